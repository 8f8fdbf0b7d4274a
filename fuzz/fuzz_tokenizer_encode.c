/* libFuzzer target: encoding arbitrary bytes (invalid UTF-8, NUL, partial special tokens)
 * with a small fixed tokenizer built in memory: the 256 byte tokens, a few merges, two
 * added tokens sharing a prefix, NFC and the Qwen pre-tokenizer regex. Every id must be
 * in range, and for valid UTF-8 that contains no added token the decoded text must be the
 * NFC form of the input, which we check as: decode(encode(x)) re-encodes to the same ids.
 * fuzz-modules: tokenizer core */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/tokenizer.h"

static tdm_tokenizer *tok;

static void put_byte_token(tdm_strbuf *sb, uint8_t b) {
    char tmp[4];
    int n = tdm_utf8_put(tmp, tdm_bytelevel_char(b));
    tdm_sb_json_string(sb, tmp, (size_t)n);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    static const char *merges[][2] = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"Ġ", "w"}, {"hell", "o"}, {"Ġ", "Ġ"}};
    static const char *merged[] = {"he", "ll", "hell", "Ġw", "hello", "ĠĠ"};
    int nm = (int)(sizeof merged / sizeof *merged);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_sb_puts(&sb, "{\"version\": \"1.0\", \"added_tokens\": ["
                     "{\"id\": 300, \"content\": \"<|a|>\", \"special\": true, \"normalized\": false},"
                     "{\"id\": 301, \"content\": \"<|a|>x\", \"special\": false, \"normalized\": false}],"
                     "\"normalizer\": {\"type\": \"NFC\"},"
                     "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
                     "\"pattern\": {\"Regex\": ");
    tdm_sb_json_string(&sb, tdm_qwen_pretok_regex, strlen(tdm_qwen_pretok_regex));
    tdm_sb_puts(&sb, "}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                     "\"add_prefix_space\": false, \"use_regex\": false}]},"
                     "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (int b = 0; b < 256; b++) {
        put_byte_token(&sb, (uint8_t)b);
        tdm_sb_printf(&sb, ": %d, ", b);
    }
    for (int i = 0; i < nm; i++) {
        tdm_sb_json_string(&sb, merged[i], strlen(merged[i]));
        tdm_sb_printf(&sb, ": %d%s", 256 + i, i + 1 < nm ? ", " : "");
    }
    tdm_sb_puts(&sb, "}, \"merges\": [");
    for (int i = 0; i < nm; i++) tdm_sb_printf(&sb, "\"%s %s\"%s", merges[i][0], merges[i][1], i + 1 < nm ? ", " : "");
    tdm_sb_puts(&sb, "]}}");
    tdm_error err;
    tok = tdm_tokenizer_parse(sb.data, sb.len, "fuzz-small.json", &err);
    tdm_sb_free(&sb);
    if (!tok) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_error err;
    tdm_ids ids = {0}, again = {0};
    int vs = tdm_tokenizer_vocab_size(tok);
    if (tdm_tokenizer_encode(tok, (const char *)data, size, &ids, &err) == 0) {
        for (size_t i = 0; i < ids.len; i++)
            if (ids.data[i] < 0 || ids.data[i] >= vs) abort();
        size_t n;
        char *text = tdm_tokenizer_decode_len(tok, ids.data, ids.len, &n);
        if (!text) abort();
        /* decode output is valid UTF-8 in NFC form, so encoding it again is stable */
        if (tdm_utf8_valid((const char *)data, size) && tdm_tokenizer_encode(tok, text, n, &again, &err) == 0) {
            size_t n2;
            char *text2 = tdm_tokenizer_decode_len(tok, again.data, again.len, &n2);
            if (!text2 || n2 != n || memcmp(text, text2, n)) abort();
            free(text2);
        }
        free(text);
    }
    tdm_ids_free(&ids);
    tdm_ids_free(&again);
    return 0;
}
