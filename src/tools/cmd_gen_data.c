/* cmd_gen_data.c - `tandem gen-data`: write the built-in synthetic shapes dataset. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "data/synth.h"
#include "tools/commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tandem gen-data --out DIR [--samples N] [--heldout M] [--seed S] [--min-size PX] [--max-size PX]\n"
            "                       [--scene same|mixed]\n"
            "  Writes DIR/train.json (N samples, default 2000), DIR/test.json (M held-out closed questions,\n"
            "  default 200) in the MindSpeed-MM \"messages\"/\"images\" format, and their PNG pictures of\n"
            "  coloured shapes under DIR/images/ (sides between --min-size and --max-size, default 64..128).\n"
            "  --scene same (default): 1-4 copies of one shape in one colour per picture; mixed: 1-4 shapes\n"
            "  of any kind and colour, so questions pick one shape out of several (harder to learn).\n"
            "  The same flags always give the same bytes (default seed 1234).\n");
}

static int parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "tandem gen-data: %s expects an integer in [%lld, %lld], got '%s'\n", flag, (long long)lo,
                (long long)hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cmd_gen_data(int argc, char **argv) {
    tdm_synth_options o = {.n_train = 2000, .n_test = 200, .seed = 1234, .min_size = 64, .max_size = 128};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int64_t v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tandem gen-data: unexpected argument '%s' (tandem gen-data --help)\n", a);
            return 2;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--out")) {
            o.out_dir = val;
        } else if (!strcmp(a, "--samples")) {
            if (parse_i64(a, val, 0, 10000000, &v)) return 2;
            o.n_train = v;
        } else if (!strcmp(a, "--heldout")) {
            if (parse_i64(a, val, 0, 10000000, &v)) return 2;
            o.n_test = v;
        } else if (!strcmp(a, "--seed")) {
            if (parse_i64(a, val, 0, INT64_MAX, &v)) return 2;
            o.seed = (uint64_t)v;
        } else if (!strcmp(a, "--min-size")) {
            if (parse_i64(a, val, 24, 4096, &v)) return 2;
            o.min_size = (int)v;
        } else if (!strcmp(a, "--scene")) {
            if (!strcmp(val, "same")) {
                o.scene = TDM_SYNTH_SCENE_SAME;
            } else if (!strcmp(val, "mixed")) {
                o.scene = TDM_SYNTH_SCENE_MIXED;
            } else {
                fprintf(stderr, "tandem gen-data: --scene expects 'same' or 'mixed', got '%s'\n", val);
                return 2;
            }
        } else if (!strcmp(a, "--max-size")) {
            if (parse_i64(a, val, 24, 4096, &v)) return 2;
            o.max_size = (int)v;
        } else {
            fprintf(stderr, "tandem gen-data: unexpected argument '%s' (tandem gen-data --help)\n", a);
            return 2;
        }
    }
    if (!o.out_dir) {
        fprintf(stderr, "tandem gen-data: --out DIR is required (tandem gen-data --help)\n");
        return 2;
    }
    if (o.max_size < o.min_size) {
        fprintf(stderr, "tandem gen-data: --max-size %d is smaller than --min-size %d\n", o.max_size, o.min_size);
        return 2;
    }
    uint64_t t0 = tdm_now_ns();
    tdm_error err;
    if (tdm_synth_generate(&o, &err) != 0) {
        fprintf(stderr, "tandem gen-data: %s\n", err.msg);
        return 1;
    }
    printf("wrote %lld training and %lld held-out samples to %s in %.1f s\n", (long long)o.n_train,
           (long long)o.n_test, o.out_dir, (double)(tdm_now_ns() - t0) * 1e-9);
    return 0;
}
