/* cmd_generate.c - `tandem generate`: greedy answer to one image and prompt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "tools/commands.h"
#include "train/generate.h"

static void usage(FILE *f) {
    fprintf(f, "usage: tandem generate --model DIR --tokenizer FILE (--load CKPT | --hf-weights FILE) [--image FILE]\n"
               "                       --prompt TEXT [--system TEXT] [--max-new-tokens N] [--preprocessor FILE]\n"
               "                       [--image-max-pixels N] [--image-min-pixels N] (as the model was trained)\n"
               "                       [--no-kv-cache]\n"
               "  Greedy decoding. The image goes before the prompt text (as \"<image>TEXT\"); prints the answer.\n"
               "  --load CKPT          a checkpoint directory (--save DIR of tandem train, or one iter_XXXXXXX)\n"
               "  --max-new-tokens N   stop after N tokens (default 64) or at <|im_end|>\n"
               "  --no-kv-cache        re-run the whole forward for every token (the reference for the KV cache)\n");
}

int cmd_generate(int argc, char **argv) {
    tdm_generator_options o = {0};
    const char *image = NULL, *prompt = NULL, *system_text = NULL;
    int max_new = 64;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) return usage(stdout), 0;
        if (!strcmp(f, "--no-kv-cache")) { /* the only flag without a value */
            o.no_kv_cache = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tandem generate: %s: expected a value after it (tandem generate --help)\n", f);
            return 2;
        }
        for (int j = 1; j < i; j++) /* each of these flags takes one value: a second one would be dropped */
            if (!strcmp(argv[j], f)) {
                fprintf(stderr, "tandem generate: %s given twice (it takes one value)\n", f);
                return 2;
            }
        const char *v = argv[++i];
        if (!strcmp(f, "--model")) o.model = v;
        else if (!strcmp(f, "--tokenizer")) o.tokenizer = v;
        else if (!strcmp(f, "--load")) o.load = v;
        else if (!strcmp(f, "--hf-weights")) o.hf_weights = v;
        else if (!strcmp(f, "--preprocessor")) o.preprocessor = v;
        else if (!strcmp(f, "--image-max-pixels") || !strcmp(f, "--image-min-pixels")) {
            char *e;
            long long n = strtoll(v, &e, 10);
            if (*e || n < 1) {
                fprintf(stderr, "tandem generate: %s %s: expected a positive integer (pixels)\n", f, v);
                return 2;
            }
            *(!strcmp(f, "--image-max-pixels") ? &o.image_max_pixels : &o.image_min_pixels) = n;
        }
        else if (!strcmp(f, "--image")) image = v;
        else if (!strcmp(f, "--prompt")) prompt = v;
        else if (!strcmp(f, "--system")) system_text = v;
        else if (!strcmp(f, "--max-new-tokens")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 65536) {
                fprintf(stderr, "tandem generate: --max-new-tokens %s: expected an integer in 1..65536\n", v);
                return 2;
            }
            max_new = (int)n;
        } else {
            fprintf(stderr, "tandem generate: unknown flag '%s' (tandem generate --help)\n", f);
            return 2;
        }
    }
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
