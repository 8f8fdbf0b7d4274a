#include "ab/demo.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/strbuf.h"
#include "data/synth.h"
#include "tokenizer/bpe_train.h"

/* The demo's tokenizer size matches configs/tiny/config.json (vocab_size 1024, Qwen's
 * added tokens at 998..1023). */
#define DEMO_VOCAB 1024

int tdm_demo_prepare(const char *dir, tdm_error *err) {
    char data_dir[1024], train[1100], tok[1100];
    snprintf(data_dir, sizeof data_dir, "%s/data", dir);
    snprintf(train, sizeof train, "%s/train.json", data_dir);
    snprintf(tok, sizeof tok, "%s/tokenizer.json", dir);
    if (!tdm_file_exists(train)) {
        tdm_synth_options o = {
            .out_dir = data_dir, .n_train = 2000, .n_test = 200, .seed = 1, .min_size = 64, .max_size = 128};
        if (tdm_synth_generate(&o, err) != 0) return -1;
    }
    if (tdm_file_exists(tok)) return 0;
    tdm_bpe_trainer *tr = tdm_bpe_trainer_create(err);
    if (!tr) return -1;
    tdm_strbuf json;
    tdm_sb_init(&json);
    tdm_bpe_stats st;
    int rc = tdm_bpe_trainer_add_dataset(tr, train, err);
    if (rc == 0) rc = tdm_bpe_trainer_train(tr, DEMO_VOCAB, &json, &st, err);
    if (rc == 0) rc = tdm_write_file_atomic(tok, json.data, json.len, err);
    tdm_sb_free(&json);
    tdm_bpe_trainer_free(tr);
    return rc;
}

int tdm_demo_find_model(char *out, size_t cap, tdm_error *err) {
    char exe[1024], cand[3][1100];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 40);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0; /* the binary's folder: build/ in a checkout */
    snprintf(cand[0], sizeof cand[0], "configs/tiny");
    snprintf(cand[1], sizeof cand[1], "%s/../configs/tiny", exe);
    snprintf(cand[2], sizeof cand[2], "%s/../share/tandem/configs/tiny", exe);
    for (int i = 0; i < 3; i++) {
        if (i > 0 && !slash) break;
        char cfg[1200];
        snprintf(cfg, sizeof cfg, "%.1100s/config.json", cand[i]);
        if (access(cfg, R_OK) == 0) {
            snprintf(out, cap, "%s", cand[i]);
            return 0;
        }
    }
    return tdm_errorf(err,
                      "the demo needs the tiny configuration, configs/tiny/config.json: found neither here nor "
                      "at %s; run it from the repository root or set TANDEM_DEMO_MODEL to that folder",
                      slash ? cand[1] : "the binary's folder");
}

int tdm_demo_ab_args(const char *dir, const char *model_dir, char ***argv_out) {
    static char tok[1100], data[1100], out[1100], model[1100];
    snprintf(tok, sizeof tok, "%s/tokenizer.json", dir);
    snprintf(data, sizeof data, "%s/data/train.json", dir);
    snprintf(out, sizeof out, "%s/ab", dir);
    snprintf(model, sizeof model, "%s", model_dir);
    static char *argv[] = {"ab",
                           "--baseline",
                           "",
                           "--candidate",
                           "--overlap-grad-reduce",
                           "--model",
                           model,
                           "--tokenizer",
                           tok,
                           "--data",
                           data,
                           "--freeze-vision",
                           "--freeze-projector",
                           "--use-distributed-optimizer",
                           "--ddp-bucket-size",
                           "500000",
                           "--micro-batch-size",
                           "2",
                           "--global-batch-size",
                           "8",
                           "--seq-length",
                           "512",
                           "--lr",
                           "1e-3",
                           "--lr-warmup-iters",
                           "5",
                           "--lr-decay-style",
                           "cosine",
                           "--seed",
                           "1234",
                           "--steps",
                           "40",
                           "--window",
                           "11:40",
                           "--repeats",
                           "2",
                           "--out",
                           out,
                           NULL};
    *argv_out = argv;
    return (int)(sizeof argv / sizeof *argv) - 1;
}
