#include "tools/cli.h"

#include <stddef.h>

#include "core/platform.h"
#include "core/strbuf.h"
#include "train/generate.h"

void tdm_cli_help(const tdm_flags *p, FILE *f) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_flags_format_help(p, &sb);
    fputs(sb.data ? sb.data : "", f);
    tdm_sb_free(&sb);
}

int tdm_cli_print_version(void) {
    tdm_platform pl;
    tdm_platform_read(&pl);
    printf("tandem %s\nbuilt for %s\n", tdm_version(), pl.build_target);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int answer(const tdm_flags *p, int what) {
    if (what == TDM_FLAGS_VERSION) return tdm_cli_print_version();
    tdm_cli_help(p, stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}

int tdm_cli_early(const tdm_flags *p, int argc, char **argv) {
    int what = tdm_flags_wants(p, argc - 1, argv + 1);
    return what ? answer(p, what) : -1;
}

int tdm_cli_parse(const tdm_flags *p, void *target, int argc, char **argv, char **rest, int *n_rest) {
    tdm_error err = {{0}};
    int rc = tdm_flags_parse(p, target, argc - 1, argv + 1, rest, n_rest, &err);
    if (rc > 0) return answer(p, rc);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", p->command, err.msg);
        return 2;
    }
    return -1;
}

const tdm_flag tdm_cli_generator_flags[TDM_CLI_N_GENERATOR_FLAGS] = {
    {.name = "model",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(tdm_generator_options, model),
     .metavar = "DIR",
     .help = "directory (or file) with config.json"},
    {.name = "tokenizer",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(tdm_generator_options, tokenizer),
     .metavar = "FILE",
     .help = "tokenizer.json"},
    {.name = "load",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(tdm_generator_options, load),
     .metavar = "CKPT",
     .help = "a checkpoint directory (--save DIR of tandem train, or one iter_XXXXXXX)"},
    {.name = "hf-weights",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(tdm_generator_options, hf_weights),
     .metavar = "FILE",
     .help = "Hugging Face weights instead: a .safetensors file or a directory of them"},
    {.name = "preprocessor",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(tdm_generator_options, preprocessor),
     .metavar = "FILE",
     .help = "preprocessor_config.json (default: the model directory's, else the built-in one)"},
    {.name = "image-max-pixels",
     .kind = TDM_FLAG_I64,
     .off = offsetof(tdm_generator_options, image_max_pixels),
     .lo = 1,
     .hi = 9e15,
     .metavar = "N",
     .help = "LLaMA-Factory's bound, as the model was trained"},
    {.name = "image-min-pixels",
     .kind = TDM_FLAG_I64,
     .off = offsetof(tdm_generator_options, image_min_pixels),
     .lo = 1,
     .hi = 9e15,
     .metavar = "N",
     .help = "LLaMA-Factory's bound, as the model was trained"},
    {.name = "no-kv-cache",
     .kind = TDM_FLAG_BOOL,
     .off = offsetof(tdm_generator_options, no_kv_cache),
     .help = "re-run the whole forward for every token (the reference for the KV cache)"},
};
