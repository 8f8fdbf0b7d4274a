/* cmd_generate.c - `tandem generate`: the answer to one image and prompt, greedy or sampled. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "train/generate.h"

typedef struct generate_opts {
    tdm_generator_options gen; /* first: tdm_cli_generator_flags set it */
    const char *image, *prompt, *system;
    int max_new;
    int64_t seed;
} generate_opts;

static const tdm_flag FLAGS[] = {
#define GEN(field) offsetof(generate_opts, gen) + offsetof(tdm_generator_options, field)
    {.name = "image",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(generate_opts, image),
     .metavar = "FILE",
     .help = "a picture, before the prompt's text (as \"<image>TEXT\")"},
    {.name = "prompt",
     .kind = TDM_FLAG_STRING,
     .off = offsetof(generate_opts, prompt),
     .opts = TDM_FLAG_DASHES,
     .metavar = "TEXT",
     .help = "the user's turn"},
    {.name = "system",
     .kind = TDM_FLAG_STRING,
     .off = offsetof(generate_opts, system),
     .opts = TDM_FLAG_DASHES,
     .metavar = "TEXT",
     .help = "a system turn before it"},
    {.name = "max-new-tokens",
     .kind = TDM_FLAG_INT,
     .off = offsetof(generate_opts, max_new),
     .lo = 1,
     .hi = 65536,
     .def = "64",
     .metavar = "N",
     .help = "stop after N tokens or at <|im_end|>"},
#define SMP(field) GEN(sampling) + offsetof(tdm_sampling, field)
    {.name = "do-sample",
     .kind = TDM_FLAG_BOOL,
     .off = SMP(do_sample),
     .group = "Sampling (greedy without --do-sample)",
     .help = "draw each token from the model's distribution, as Hugging Face's do_sample=True"},
    {.name = "temperature",
     .kind = TDM_FLAG_DOUBLE,
     .off = SMP(temperature),
     .lo = 0,
     .hi = 1e6,
     .def = "-1",
     .metavar = "T",
     .help = "divide the logits by T (default 1; 0: greedy)"},
    {.name = "top-k",
     .kind = TDM_FLAG_INT,
     .off = SMP(top_k),
     .lo = 0,
     .hi = 1e9,
     .def = "-1",
     .metavar = "K",
     .help = "keep the K most likely tokens (default 50; 0: all)"},
    {.name = "top-p",
     .kind = TDM_FLAG_DOUBLE,
     .off = SMP(top_p),
     .lo = 0,
     .hi = 1,
     .def = "-1",
     .metavar = "P",
     .help = "then the most likely tokens up to cumulative probability P (default 1: all)"},
    {.name = "seed",
     .kind = TDM_FLAG_I64,
     .off = offsetof(generate_opts, seed),
     .lo = 0,
     .hi = 9e15,
     .def = "-1",
     .metavar = "N",
     .help = "the random seed; the same seed gives the same text (default 0)"},
#undef SMP
#undef GEN
};

static const tdm_flags P = {
    .command = "tandem generate",
    .usage = "tandem generate --model DIR --tokenizer FILE (--load CKPT | --hf-weights FILE) [--image FILE]\n"
             "                       --prompt TEXT [--system TEXT] [flags]",
    .about = "Decodes one answer, greedy or (--do-sample) sampled; prints it.",
    .flags = tdm_cli_generator_flags,
    .n_flags = TDM_CLI_N_GENERATOR_FLAGS,
    .more = &(const tdm_flag_table){FLAGS, (int)(sizeof FLAGS / sizeof *FLAGS)},
    .n_more = 1,
    .opts = TDM_FLAGS_ONCE,
};

int cmd_generate(int argc, char **argv) {
    generate_opts opts = {0};
    tdm_flags_defaults(&P, &opts);
    int done = tdm_cli_parse(&P, &opts, argc, argv, NULL, NULL);
    if (done >= 0) return done;
    tdm_generator_options o = opts.gen;
    tdm_sampling *sm = &o.sampling;
    if (!sm->do_sample) {
        const char *given = sm->temperature >= 0 ? "--temperature"
                            : sm->top_k >= 0     ? "--top-k"
                            : sm->top_p >= 0     ? "--top-p"
                            : opts.seed >= 0     ? "--seed"
                                                 : NULL;
        if (given) {
            fprintf(stderr, "tandem generate: %s: applies only with --do-sample (decoding is greedy without it)\n",
                    given);
            return 2;
        }
    }
    if (sm->temperature < 0) sm->temperature = TDM_GENERATE_DEFAULT_TEMPERATURE;
    if (sm->top_k < 0) sm->top_k = TDM_GENERATE_DEFAULT_TOP_K;
    if (sm->top_p < 0) sm->top_p = TDM_GENERATE_DEFAULT_TOP_P;
    if (sm->do_sample && sm->top_p == 0) {
        fprintf(stderr, "tandem generate: --top-p 0: expected a probability above 0 and at most 1\n");
        return 2;
    }
    sm->seed = opts.seed < 0 ? 0 : (uint64_t)opts.seed;
    const char *image = opts.image, *prompt = opts.prompt, *system_text = opts.system;
    const int max_new = opts.max_new;
    if (!o.model || !o.tokenizer || !prompt || (!o.load && !o.hf_weights)) {
        fprintf(stderr, "tandem generate: --model, --tokenizer, --prompt and --load (or --hf-weights) are required\n");
        return 2;
    }
    tdm_error err = {{0}};
    tdm_generator *g = tdm_generator_create(&o, &err);
    if (!g) {
        fprintf(stderr, "tandem generate: %s\n", err.msg);
        return 1;
    }
    tdm_strbuf user;
    tdm_sb_init(&user);
    if (image) tdm_sb_puts(&user, "<image>");
    tdm_sb_puts(&user, prompt);
    tdm_turn turns[2];
    int n = 0;
    if (system_text) turns[n++] = (tdm_turn){TDM_ROLE_SYSTEM, (char *)system_text};
    turns[n++] = (tdm_turn){TDM_ROLE_USER, user.data};
    char *answer = NULL;
    int rc = tdm_generator_answer(g, turns, n, image ? &image : NULL, image ? 1 : 0, max_new, &answer, &err);
    if (rc == 0) printf("%s\n", answer);
    else fprintf(stderr, "tandem generate: %s\n", err.msg);
    free(answer);
    tdm_sb_free(&user);
    tdm_generator_free(g);
    return rc == 0 ? 0 : 1;
}
