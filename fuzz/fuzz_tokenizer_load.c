/* libFuzzer target: tdm_tokenizer_parse on an arbitrary tokenizer.json. A tokenizer that
 * loads must encode a fixed text and decode its ids without crashing, and every id it
 * produces must be below tdm_tokenizer_vocab_size.
 * fuzz-modules: tokenizer core */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_error err;
    tdm_tokenizer *t = tdm_tokenizer_parse((const char *)data, size, "fuzz/tokenizer.json", &err);
    if (!t) return 0;
    static const char text[] = "Hello world! <|im_start|>user\n\xc3\xa9t\xc3\xa9 123  \t\xf0\x9f\x98\x80 \xff";
    tdm_ids ids = {0};
    if (tdm_tokenizer_encode(t, text, sizeof text - 1, &ids, &err) == 0) {
        int vs = tdm_tokenizer_vocab_size(t);
        for (size_t i = 0; i < ids.len; i++)
            if (ids.data[i] < 0 || ids.data[i] >= vs) abort();
        size_t n;
        free(tdm_tokenizer_decode_len(t, ids.data, ids.len, &n));
    }
    tdm_ids_free(&ids);
    (void)tdm_tokenizer_id_token(t, 0);
    (void)tdm_tokenizer_token_id(t, "<|im_start|>");
    tdm_tokenizer_free(t);
    return 0;
}
