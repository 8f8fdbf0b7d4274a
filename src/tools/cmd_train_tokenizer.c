/* cmd_train_tokenizer.c - `tandem train-tokenizer`: a byte-level BPE tokenizer.json
 * trained on the text of dataset files (id layout in tokenizer/bpe_train.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/strbuf.h"
#include "tokenizer/bpe_train.h"
#include "tools/cli.h"
#include "tools/commands.h"

#define MAX_DATA_FILES 64

typedef struct train_tokenizer_opts {
    const char *data[MAX_DATA_FILES];
    int n_data;
    int vocab;
    const char *out;
} train_tokenizer_opts;

static const tdm_flag FLAGS[] = {
    {.name = "data",
     .kind = TDM_FLAG_LIST,
     .off = offsetof(train_tokenizer_opts, data),
     .count_off = offsetof(train_tokenizer_opts, n_data),
     .max = MAX_DATA_FILES,
     .metavar = "FILE",
     .help = "dataset file (repeatable, up to 64)"},
    {.name = "vocab-size",
     .kind = TDM_FLAG_INT,
     .off = offsetof(train_tokenizer_opts, vocab),
     .lo = 1,
     .hi = 1 << 20,
     .def = "1024",
     .metavar = "N",
     .help = "total ids including the 26 added tokens"},
    {.name = "out",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(train_tokenizer_opts, out),
     .metavar = "FILE",
     .help = "where to write tokenizer.json"},
};

static const tdm_flags P = {
    .command = "tandem train-tokenizer",
    .usage = "tandem train-tokenizer --data FILE.json [--data FILE2.json ...] [--vocab-size N] --out tokenizer.json",
    .about = "Trains a byte-level BPE with Qwen's normaliser and pre-tokenizer on the \"content\"/\"value\"\n"
             "strings inside \"messages\"/\"conversations\" (and a sample's \"system\" string) of JSON or JSON\n"
             "Lines datasets; \"<image>\" is not counted and separates words, as its vision tokens do.\n"
             "Ids: 0..255 the bytes (id b = byte b), then merges in order of creation, then Qwen's 26 added\n"
             "tokens at N-26..N-1 (N = 1024: <|im_start|> 999, <|im_end|> 1000, <|image_pad|> 1010).",
    .flags = FLAGS,
    .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
};

int cmd_train_tokenizer(int argc, char **argv) {
    train_tokenizer_opts o = {0};
    tdm_flags_defaults(&P, &o);
    int done = tdm_cli_parse(&P, &o, argc, argv, NULL, NULL);
    if (done >= 0) return done;
    const char *const *data = o.data, *out = o.out;
    const int n_data = o.n_data, vocab = o.vocab;
    if (!n_data || !out) {
        fprintf(stderr,
                "tandem train-tokenizer: --data FILE and --out FILE are required (tandem train-tokenizer --help)\n");
        return 2;
    }
    tdm_error err;
    tdm_bpe_trainer *tr = tdm_bpe_trainer_create(&err);
    if (!tr) {
        fprintf(stderr, "tandem train-tokenizer: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < n_data && rc == 0; i++)
        if (tdm_bpe_trainer_add_dataset(tr, data[i], &err) != 0) rc = 1;
    tdm_strbuf json;
    tdm_sb_init(&json);
    tdm_bpe_stats st = {0};
    if (rc == 0 && tdm_bpe_trainer_train(tr, vocab, &json, &st, &err) != 0) rc = 1;
    if (rc == 0 && tdm_write_file_atomic(out, json.data, json.len, &err) != 0) rc = 1;
    if (rc) {
        fprintf(stderr, "tandem train-tokenizer: %s\n", err.msg);
    } else {
        printf("wrote %s: %d ids = 256 bytes + %d merged tokens (%d merges) + %d added tokens; "
               "trained on %lld texts, %lld words (%lld distinct)\n",
               out, st.vocab_size, st.n_tokens - 256, st.n_merges, TDM_QWEN_N_ADDED, (long long)st.texts,
               (long long)st.words, (long long)st.unique_words);
        int unused = st.vocab_size - TDM_QWEN_N_ADDED - st.n_tokens;
        if (unused > 0)
            printf("note: the text ran out of pairs to merge; ids %d..%d are unused (more text fills them)\n",
                   st.n_tokens, st.n_tokens + unused - 1);
    }
    tdm_sb_free(&json);
    tdm_bpe_trainer_free(tr);
    return rc;
}
