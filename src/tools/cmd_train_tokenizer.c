/* cmd_train_tokenizer.c - `tandem train-tokenizer`: a byte-level BPE tokenizer.json
 * trained on the text of dataset files (id layout in tokenizer/bpe_train.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/strbuf.h"
#include "tokenizer/bpe_train.h"
#include "tools/commands.h"

#define MAX_DATA_FILES 64

static void usage(FILE *f) {
    fprintf(f,
            "usage: tandem train-tokenizer --data FILE.json [--data FILE2.json ...] [--vocab-size N] --out tokenizer.json\n"
            "  Trains a byte-level BPE with Qwen's normaliser and pre-tokenizer on the \"content\"/\"value\"\n"
            "  strings inside \"messages\"/\"conversations\" (and a sample's \"system\" string) of JSON or JSON\n"
            "  Lines datasets; \"<image>\" is not counted and separates words, as its vision tokens do.\n"
            "  Ids: 0..255 the bytes (id b = byte b), then merges in order of creation, then Qwen's 26 added\n"
            "  tokens at N-26..N-1 (N = 1024: <|im_start|> 999, <|im_end|> 1000, <|image_pad|> 1010).\n"
            "  --data FILE       dataset file (repeatable, up to %d)\n"
            "  --vocab-size N    total ids including the 26 added tokens (default 1024)\n"
            "  --out FILE        where to write tokenizer.json\n",
            MAX_DATA_FILES);
}

int cmd_train_tokenizer(int argc, char **argv) {
    const char *data[MAX_DATA_FILES], *out = NULL;
    int n_data = 0;
    long vocab = 1024;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--data") && i + 1 < argc) {
            if (n_data == MAX_DATA_FILES) {
                fprintf(stderr, "tandem train-tokenizer: more than %d --data files\n", MAX_DATA_FILES);
                return 2;
            }
            data[n_data++] = argv[++i];
        } else if (!strcmp(argv[i], "--vocab-size") && i + 1 < argc) {
            char *end;
            errno = 0;
            vocab = strtol(argv[++i], &end, 10);
            if (*end || errno || vocab <= 0 || vocab > (1 << 20)) {
                fprintf(stderr, "tandem train-tokenizer: --vocab-size '%s': expected an integer from 283 to %d\n",
                        argv[i], 1 << 20);
                return 2;
            }
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else {
            fprintf(stderr, "tandem train-tokenizer: unexpected argument '%s' (tandem train-tokenizer --help)\n",
                    argv[i]);
            return 2;
        }
    }
    if (!n_data || !out) {
        fprintf(stderr, "tandem train-tokenizer: --data FILE and --out FILE are required (tandem train-tokenizer --help)\n");
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
    if (rc == 0 && tdm_bpe_trainer_train(tr, (int)vocab, &json, &st, &err) != 0) rc = 1;
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
