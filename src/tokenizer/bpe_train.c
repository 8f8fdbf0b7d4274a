#include "tokenizer/bpe_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/hashmap.h"
#include "tokenizer/pretok.h"

#define MAX_DATASET_BYTES ((size_t)1 << 30)
#define MAX_WORD_BYTES    ((size_t)1 << 30) /* unique word bytes kept for training */
#define MAX_VOCAB         (1 << 20)

const char *const tdm_qwen_added_tokens[TDM_QWEN_N_ADDED] = {
    "<|endoftext|>",  "<|im_start|>",   "<|im_end|>",      "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>",  "<|box_end|>",    "<|quad_start|>",  "<|quad_end|>",         "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>",   "<|video_pad|>",        "<tool_call>",
    "</tool_call>",   "<|fim_prefix|>", "<|fim_middle|>",  "<|fim_suffix|>",       "<|fim_pad|>",
    "<|repo_name|>",  "<|file_sep|>",   "<tool_response>", "</tool_response>",     "<think>",
    "</think>",
};

const char tdm_qwen_pretok_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

struct tdm_bpe_trainer {
    tdm_pretok *pretok;
    tdm_strmap word_of; /* word bytes -> index */
    char **wstr;
    uint32_t *wlen;
    int64_t *wcount;
    size_t n_words, cap_words, word_bytes;
    int64_t texts, words;
};

tdm_bpe_trainer *tdm_bpe_trainer_create(tdm_error *err) {
    tdm_pretok *p = tdm_pretok_create(tdm_qwen_pretok_regex, "Qwen pre-tokenizer", err);
    if (!p) return NULL;
    tdm_bpe_trainer *tr = tdm_xcalloc(1, sizeof *tr);
    tr->pretok = p;
    tdm_strmap_init(&tr->word_of, 1024);
    return tr;
}

void tdm_bpe_trainer_free(tdm_bpe_trainer *tr) {
    if (!tr) return;
    tdm_pretok_free(tr->pretok);
    tdm_strmap_free(&tr->word_of);
    for (size_t i = 0; i < tr->n_words; i++) free(tr->wstr[i]);
    free(tr->wstr);
    free(tr->wlen);
    free(tr->wcount);
    free(tr);
}

static int count_word(const char *w, size_t n, void *ctx) {
    tdm_bpe_trainer *tr = ctx;
    tr->words++;
    int64_t k = tdm_strmap_get(&tr->word_of, w, n);
    if (k >= 0) {
        tr->wcount[k]++;
        return 0;
    }
    if (tr->word_bytes + n > MAX_WORD_BYTES) return 1;
    if (tr->n_words == tr->cap_words) {
        tr->cap_words = tr->cap_words ? 2 * tr->cap_words : 1024;
        tr->wstr = tdm_xrealloc(tr->wstr, tr->cap_words * sizeof *tr->wstr);
        tr->wlen = tdm_xrealloc(tr->wlen, tr->cap_words * sizeof *tr->wlen);
        tr->wcount = tdm_xrealloc(tr->wcount, tr->cap_words * sizeof *tr->wcount);
    }
    char *copy = tdm_xmalloc(n);
    memcpy(copy, w, n);
    tr->wstr[tr->n_words] = copy;
    tr->wlen[tr->n_words] = (uint32_t)n;
    tr->wcount[tr->n_words] = 1;
    tdm_strmap_put(&tr->word_of, copy, n, (int64_t)tr->n_words);
    tr->n_words++;
    tr->word_bytes += n;
    return 0;
}

/* NFC and pre-tokenizer on text between added tokens, as encoding does. */
static int count_section(tdm_bpe_trainer *tr, const char *s, size_t n, tdm_error *err) {
    if (n == 0) return 0;
    utf8proc_uint8_t *norm;
    utf8proc_ssize_t m =
        utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &norm, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (m < 0) return tdm_errorf(err, "NFC normalisation failed: %s", utf8proc_errmsg(m));
    int rc = tdm_pretok_split(tr->pretok, (const char *)norm, (size_t)m, count_word, tr, err);
    free(norm);
    if (rc > 0) return tdm_errorf(err, "more than %zu bytes of distinct words", MAX_WORD_BYTES);
    return rc;
}

int tdm_bpe_trainer_add_text(tdm_bpe_trainer *tr, const char *text, size_t len, tdm_error *err) {
    char *fixed = NULL;
    if (!tdm_utf8_valid(text, len)) text = fixed = tdm_utf8_repair(text, len, &len);
    tr->texts++;
    int rc = 0;
    size_t start = 0, i = 0;
    while (i < len) {
        size_t hit = 0;
        if (text[i] == '<')
            for (int k = 0; k < TDM_QWEN_N_ADDED; k++) {
                size_t n = strlen(tdm_qwen_added_tokens[k]);
                if (n > hit && n <= len - i && !memcmp(text + i, tdm_qwen_added_tokens[k], n)) hit = n;
            }
        if (!hit) {
            i++;
            continue;
        }
        if ((rc = count_section(tr, text + start, i - start, err)) != 0) break;
        i += hit;
        start = i;
    }
    if (rc == 0) rc = count_section(tr, text + start, len - start, err);
    free(fixed);
    return rc;
}

/* ---- datasets ---- */

/* Adds text with each "<image>" replaced by <|image_pad|>, an added token: so the tag
 * separates words as the vision tokens that replace it do when a sample is encoded
 * (chat.h), and none of its letters are counted. */
static int add_with_image_tags_cut(tdm_bpe_trainer *tr, const char *s, size_t n, tdm_error *err) {
    static const char tag[] = "<image>", pad[] = "<|image_pad|>";
    const size_t tn = sizeof tag - 1, pn = sizeof pad - 1;
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_sb_append(&sb, "", 0);
    for (size_t i = 0; i < n;) {
        const char *q = memmem(s + i, n - i, tag, tn);
        size_t k = q ? (size_t)(q - s) : n;
        tdm_sb_append(&sb, s + i, k - i);
        if (q) tdm_sb_append(&sb, pad, pn);
        i = q ? k + tn : n;
    }
    int rc = tdm_bpe_trainer_add_text(tr, sb.data, sb.len, err);
    tdm_sb_free(&sb);
    return rc;
}

static int walk(tdm_bpe_trainer *tr, const tdm_json *v, int in_messages, tdm_error *err) {
    if (v->type == TDM_JSON_ARRAY) {
        for (size_t i = 0; i < v->len; i++)
            if (walk(tr, v->items[i], in_messages, err) != 0) return -1;
    } else if (v->type == TDM_JSON_OBJECT) {
        for (size_t i = 0; i < v->len; i++) {
            const char *k = v->keys[i];
            const tdm_json *x = v->items[i];
            if (!strcmp(k, "messages") || !strcmp(k, "conversations")) {
                if (walk(tr, x, 1, err) != 0) return -1;
            } else if (in_messages && x->type == TDM_JSON_STRING &&
                       (!strcmp(k, "content") || !strcmp(k, "value") || !strcmp(k, "text"))) {
                if (add_with_image_tags_cut(tr, x->str, x->len, err) != 0) return -1;
            } else if (!in_messages && x->type == TDM_JSON_STRING && x->len > 0 && !strcmp(k, "system") &&
                       (tdm_json_get(v, "messages") || tdm_json_get(v, "conversations"))) {
                /* a sample's system prompt field (LLaMA-Factory): encoded as its system turn */
                if (add_with_image_tags_cut(tr, x->str, x->len, err) != 0) return -1;
            } else if (walk(tr, x, in_messages, err) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

int tdm_bpe_trainer_add_dataset(tdm_bpe_trainer *tr, const char *path, tdm_error *err) {
    size_t len;
    char *text = tdm_read_file(path, MAX_DATASET_BYTES, &len, err);
    if (!text) return -1;
    int64_t texts_before = tr->texts;
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
    if (i == len) {
        free(text);
        return tdm_errorf(err, "%s: the file is empty (expected a JSON array of samples or JSON Lines)", path);
    }
    tdm_error jerr;
    tdm_json_doc *doc = tdm_json_parse(text, len, path, &jerr);
    int rc = 0;
    if (doc) {
        if ((rc = walk(tr, tdm_json_root(doc), 0, err)) != 0) tdm_error_prefix(err, "%s", path);
        tdm_json_free(doc);
    } else if (i < len && text[i] == '{') {
        /* Not one document: JSON Lines, one object per non-empty line. */
        size_t lineno = 0;
        for (size_t s = 0; s < len && rc == 0;) {
            const char *nl = memchr(text + s, '\n', len - s);
            size_t e = nl ? (size_t)(nl - text) : len;
            lineno++;
            size_t k = s;
            while (k < e && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r')) k++;
            if (k < e) {
                char name[600];
                snprintf(name, sizeof name, "%s: line %zu", path, lineno);
                tdm_json_doc *d = tdm_json_parse(text + s, e - s, name, err);
                if (!d) {
                    /* A broken first line more likely means a broken JSON document. */
                    if (lineno == 1 && err) *err = jerr;
                    rc = -1;
                    break;
                }
                if ((rc = walk(tr, tdm_json_root(d), 0, err)) != 0) tdm_error_prefix(err, "%s", name);
                tdm_json_free(d);
            }
            s = e + 1;
        }
    } else {
        if (err) *err = jerr;
        rc = -1;
    }
    free(text);
    if (rc == 0 && tr->texts == texts_before)
        rc = tdm_errorf(
            err,
            "%s: no text found (expected \"content\" or \"value\" strings inside \"messages\" or \"conversations\")",
            path);
    return rc;
}

/* ---- training ---- */

/* Pair -> weighted count; entries are never removed (a count may drop to 0). */
typedef struct pair_count {
    uint64_t key;
    int64_t count;
    int used;
} pair_count;

typedef struct count_map {
    pair_count *slots;
    size_t cap, count;
} count_map;

static size_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static pair_count *count_slot(count_map *m, int32_t a, int32_t b) {
    if (2 * (m->count + 1) > m->cap) {
        count_map old = *m;
        m->cap = old.cap ? 2 * old.cap : 4096;
        m->count = 0;
        m->slots = tdm_xcalloc(m->cap, sizeof *m->slots);
        for (size_t i = 0; i < old.cap; i++)
            if (old.slots[i].used) {
                pair_count *s = count_slot(m, (int32_t)(old.slots[i].key >> 32), (int32_t)(uint32_t)old.slots[i].key);
                s->count = old.slots[i].count;
            }
        free(old.slots);
    }
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = mix(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        pair_count *s = &m->slots[i];
        if (!s->used) {
            s->used = 1;
            s->key = k;
            s->count = 0;
            m->count++;
            return s;
        }
        if (s->key == k) return s;
    }
}

typedef struct token {
    char *bytes;
    uint32_t len;
} token;

/* memcmp order with a prefix first: the tie-break between equally frequent pairs. */
static int bytes_cmp(const token *x, const token *y) {
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->bytes, y->bytes, n);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

static void add_word_pairs(count_map *pc, const int32_t *s, uint32_t n, int64_t w) {
    for (uint32_t i = 0; i + 1 < n; i++) count_slot(pc, s[i], s[i + 1])->count += w;
}

static void sb_byte_level(tdm_strbuf *sb, const char *bytes, size_t n) {
    char tmp[4 * 64];
    tdm_strbuf bl;
    tdm_sb_init(&bl);
    for (size_t i = 0; i < n; i++) {
        int k = tdm_utf8_put(tmp, tdm_bytelevel_char((uint8_t)bytes[i]));
        tdm_sb_append(&bl, tmp, (size_t)k);
    }
    tdm_sb_json_string(sb, bl.data, bl.len);
    tdm_sb_free(&bl);
}

static void write_json(tdm_strbuf *out, const token *toks, int n_toks, const int32_t (*merges)[2], int n_merges,
                       int vocab_size) {
    static const char byte_level[] =
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}";
    tdm_sb_puts(out,
                "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [\n");
    for (int k = 0; k < TDM_QWEN_N_ADDED; k++) {
        tdm_sb_printf(out,
                      "    {\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": false, "
                      "\"rstrip\": false, \"normalized\": false, \"special\": %s}%s\n",
                      vocab_size - TDM_QWEN_N_ADDED + k, tdm_qwen_added_tokens[k],
                      k < TDM_QWEN_N_SPECIAL ? "true" : "false", k + 1 < TDM_QWEN_N_ADDED ? "," : "");
    }
    tdm_sb_puts(out, "  ],\n  \"normalizer\": {\"type\": \"NFC\"},\n  \"pre_tokenizer\": {\"type\": \"Sequence\", "
                     "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": ");
    tdm_sb_json_string(out, tdm_qwen_pretok_regex, strlen(tdm_qwen_pretok_regex));
    tdm_sb_printf(out, "}, \"behavior\": \"Isolated\", \"invert\": false}, %s]},\n", byte_level);
    tdm_sb_printf(out, "  \"post_processor\": %s,\n  \"decoder\": %s,\n", byte_level, byte_level);
    tdm_sb_puts(out, "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
                     "    \"continuing_subword_prefix\": \"\",\n    \"end_of_word_suffix\": \"\",\n"
                     "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n"
                     "    \"vocab\": {\n");
    for (int i = 0; i < n_toks; i++) {
        tdm_sb_puts(out, "      ");
        sb_byte_level(out, toks[i].bytes, toks[i].len);
        tdm_sb_printf(out, ": %d%s\n", i, i + 1 < n_toks ? "," : "");
    }
    tdm_sb_puts(out, "    },\n    \"merges\": [\n");
    for (int i = 0; i < n_merges; i++) {
        tdm_sb_puts(out, "      [");
        sb_byte_level(out, toks[merges[i][0]].bytes, toks[merges[i][0]].len);
        tdm_sb_puts(out, ", ");
        sb_byte_level(out, toks[merges[i][1]].bytes, toks[merges[i][1]].len);
        tdm_sb_printf(out, "]%s\n", i + 1 < n_merges ? "," : "");
    }
    tdm_sb_puts(out, "    ]\n  }\n}\n");
}

/* Longer than most: the merge loop (pick the most frequent pair, merge it, update the pair
 * counts word by word) shares its arrays with the setup and the cleanup around it. */
int tdm_bpe_trainer_train(tdm_bpe_trainer *tr, int vocab_size, tdm_strbuf *out, tdm_bpe_stats *stats, tdm_error *err) {
    if (vocab_size < 256 + TDM_QWEN_N_ADDED + 1 || vocab_size > MAX_VOCAB)
        return tdm_errorf(
            err, "vocabulary size %d is out of range: expected %d to %d (256 bytes + merges + 26 added tokens)",
            vocab_size, 256 + TDM_QWEN_N_ADDED + 1, MAX_VOCAB);
    const int n_target = vocab_size - TDM_QWEN_N_ADDED; /* bytes + merged tokens */
    token *toks = tdm_xcalloc((size_t)n_target, sizeof *toks);
    tdm_strmap tok_of;
    tdm_strmap_init(&tok_of, (size_t)n_target);
    for (int b = 0; b < 256; b++) {
        toks[b].bytes = tdm_xmalloc(1);
        toks[b].bytes[0] = (char)b;
        toks[b].len = 1;
        tdm_strmap_put(&tok_of, toks[b].bytes, 1, b);
    }
    int n_toks = 256;

    /* Every word as a run of token ids inside one array; wn[w] shrinks as merges apply. */
    size_t *wstart = tdm_xmalloc((tr->n_words + 1) * sizeof *wstart);
    uint32_t *wn = tdm_xmalloc((tr->n_words + 1) * sizeof *wn);
    int32_t *syms = tdm_xmalloc((tr->word_bytes + 1) * sizeof *syms);
    count_map pc = {0};
    size_t at = 0;
    for (size_t w = 0; w < tr->n_words; w++) {
        wstart[w] = at;
        wn[w] = tr->wlen[w];
        for (uint32_t i = 0; i < tr->wlen[w]; i++) syms[at + i] = (uint8_t)tr->wstr[w][i];
        add_word_pairs(&pc, syms + at, wn[w], tr->wcount[w]);
        at += tr->wlen[w];
    }

    int cap_merges = n_target, n_merges = 0;
    int32_t(*merges)[2] = tdm_xmalloc((size_t)cap_merges * sizeof *merges);
    int rc = 0;
    while (n_toks < n_target) {
        const pair_count *best = NULL;
        for (size_t i = 0; i < pc.cap; i++) {
            const pair_count *s = &pc.slots[i];
            if (!s->used || s->count <= 0) continue;
            if (best && s->count < best->count) continue;
            if (best && s->count == best->count) {
                const token *a = &toks[s->key >> 32], *b = &toks[(uint32_t)s->key];
                const token *ba = &toks[best->key >> 32], *bb = &toks[(uint32_t)best->key];
                int c = bytes_cmp(a, ba);
                if (c > 0 || (c == 0 && bytes_cmp(b, bb) >= 0)) continue;
            }
            best = s;
        }
        if (!best) break; /* every word is one token: ids n_toks..n_target-1 stay unused */
        int32_t a = (int32_t)(best->key >> 32), b = (int32_t)(uint32_t)best->key;
        /* The merged token: new, or one that already exists (then no new id). */
        size_t len = (size_t)toks[a].len + toks[b].len;
        char *cat = tdm_xmalloc(len);
        memcpy(cat, toks[a].bytes, toks[a].len);
        memcpy(cat + toks[a].len, toks[b].bytes, toks[b].len);
        int64_t c = tdm_strmap_get(&tok_of, cat, len);
        if (c < 0) {
            c = n_toks++;
            toks[c].bytes = cat;
            toks[c].len = (uint32_t)len;
            tdm_strmap_put(&tok_of, cat, len, c);
        } else {
            free(cat);
        }
        if (n_merges == cap_merges) {
            cap_merges *= 2;
            merges = tdm_xrealloc(merges, (size_t)cap_merges * sizeof *merges);
        }
        merges[n_merges][0] = a;
        merges[n_merges][1] = b;
        n_merges++;
        /* Apply it to every word that holds the pair, updating the pair counts. */
        for (size_t w = 0; w < tr->n_words; w++) {
            int32_t *s = syms + wstart[w];
            uint32_t n = wn[w], i = 0;
            while (i + 1 < n && !(s[i] == a && s[i + 1] == b)) i++;
            if (i + 1 >= n) continue;
            add_word_pairs(&pc, s, n, -tr->wcount[w]);
            uint32_t j = 0;
            for (i = 0; i < n;) {
                if (i + 1 < n && s[i] == a && s[i + 1] == b) {
                    s[j++] = (int32_t)c;
                    i += 2;
                } else {
                    s[j++] = s[i++];
                }
            }
            wn[w] = j;
            add_word_pairs(&pc, s, j, tr->wcount[w]);
        }
    }
    if (rc == 0) {
        write_json(out, toks, n_toks, (const int32_t(*)[2])merges, n_merges, vocab_size);
        if (stats) {
            stats->texts = tr->texts;
            stats->words = tr->words;
            stats->unique_words = (int64_t)tr->n_words;
            stats->n_merges = n_merges;
            stats->n_tokens = n_toks;
            stats->vocab_size = vocab_size;
        }
    }
    for (int i = 0; i < n_toks; i++) free(toks[i].bytes);
    free(toks);
    tdm_strmap_free(&tok_of);
    free(wstart);
    free(wn);
    free(syms);
    free(pc.slots);
    free(merges);
    return rc;
}
