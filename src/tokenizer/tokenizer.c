/* tokenizer.c - loading a tokenizer.json, encoding and decoding.
 *
 * Encoding, in the order Hugging Face tokenizers (and transformers.js, our test peer)
 * apply it:
 *   0. Invalid UTF-8 input is repaired first: each maximal ill-formed subpart becomes
 *      U+FFFD (WHATWG rule, see bytelevel.h). This is exactly what the peer sees,
 *      because a JavaScript string can only be made from bytes by such a decoder
 *      (TextDecoder, Buffer.toString), so ids agree even on broken input.
 *   1. Split on added tokens: at each position the longest added-token content that
 *      matches there wins; those pieces map straight to their id.
 *   2. NFC on the text between them (skipped for pure ASCII, which NFC never changes).
 *   3. Pre-tokenizer regex (pretok.h) cuts it into pieces.
 *   4. Each piece's UTF-8 bytes become byte-level symbols (bytelevel.h), then BPE
 *      merges the adjacent pair of lowest rank, leftmost first, until none applies.
 *   5. Each final symbol's vocabulary id (or unk_token's, when set).
 *
 * Symbols: every string BPE can produce (vocabulary entries, the 256 byte symbols,
 * both sides and the result of every merge) gets a dense symbol index, so BPE works on
 * int32 arrays and a merge is one pair-map lookup. sym_id maps a symbol to its id
 * (-1 when the vocabulary lacks it).
 */
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/hashmap.h"
#include "tokenizer/pretok.h"

#define MAX_FILE_BYTES ((size_t)256 << 20)
#define MAX_ID ((int64_t)1 << 22)         /* 4M ids: beyond that a broken file, not a bigger model */
#define MAX_TEXT_BYTES ((size_t)16 << 20) /* per encode call; BPE scratch is ~36 bytes per input byte */
#define CACHE_MAX_PIECE 128               /* bytes; longer pieces are rare and not cached */
#define CACHE_MAX_ENTRIES 32768
#define CACHE_KEY_BYTES ((size_t)1 << 20)
#define CACHE_ID_SLOTS ((size_t)1 << 18)

typedef struct added_token {
    const char *content;
    uint32_t len;
    int32_t id;
    int special;
} added_token;

typedef struct pool_block {
    struct pool_block *next;
    size_t used, cap;
    char data[];
} pool_block;

struct tdm_tokenizer {
    char name[256];
    pool_block *pool; /* owns every string below */

    /* symbols */
    tdm_strmap sym_of; /* byte-level string -> symbol */
    const char **sym_str;
    uint32_t *sym_len;
    int32_t *sym_id;
    size_t n_sym, cap_sym;
    int32_t byte_sym[256];
    tdm_pairmap merges;

    /* ids */
    int32_t n_ids;
    const char **id_str;   /* token string as in the file (NULL: unused id) */
    const char **id_bytes; /* what the id decodes to */
    uint32_t *id_nbytes;
    added_token *added; /* longest content first */
    size_t n_added;
    uint8_t added_first[256]; /* 1 when some added token starts with this byte */

    int nfc, ignore_merges;
    int32_t unk_id;
    tdm_pretok *pretok;

    /* cache of piece -> ids; value = offset << 16 | count into cache_ids */
    pthread_mutex_t cache_mu;
    tdm_strmap cache;
    char *cache_keys;
    size_t cache_keys_len;
    int32_t *cache_ids;
    size_t cache_ids_len;
};

void tdm_ids_push(tdm_ids *v, int32_t id) {
    if (v->len == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 64;
        v->data = tdm_xrealloc(v->data, v->cap * sizeof *v->data);
    }
    v->data[v->len++] = id;
}

void tdm_ids_free(tdm_ids *v) {
    free(v->data);
    memset(v, 0, sizeof *v);
}

static char *pool_dup(tdm_tokenizer *t, const char *s, size_t n) {
    pool_block *b = t->pool;
    if (!b || b->cap - b->used < n + 1) {
        size_t cap = n + 1 > ((size_t)1 << 20) ? n + 1 : ((size_t)1 << 20);
        b = tdm_xmalloc(sizeof *b + cap);
        b->next = t->pool;
        b->used = 0;
        b->cap = cap;
        t->pool = b;
    }
    char *p = b->data + b->used;
    memcpy(p, s, n);
    p[n] = 0;
    b->used += n + 1;
    return p;
}

/* The symbol of byte-level string s, created (with id -1) when new. */
static int32_t symbol(tdm_tokenizer *t, const char *s, size_t n) {
    int64_t v = tdm_strmap_get(&t->sym_of, s, n);
    if (v >= 0) return (int32_t)v;
    if (t->n_sym == t->cap_sym) {
        t->cap_sym = t->cap_sym ? 2 * t->cap_sym : 1024;
        t->sym_str = tdm_xrealloc(t->sym_str, t->cap_sym * sizeof *t->sym_str);
        t->sym_len = tdm_xrealloc(t->sym_len, t->cap_sym * sizeof *t->sym_len);
        t->sym_id = tdm_xrealloc(t->sym_id, t->cap_sym * sizeof *t->sym_id);
    }
    int32_t k = (int32_t)t->n_sym++;
    t->sym_str[k] = pool_dup(t, s, n);
    t->sym_len[k] = (uint32_t)n;
    t->sym_id[k] = -1;
    tdm_strmap_put(&t->sym_of, t->sym_str[k], n, k);
    return k;
}

static int type_is(const tdm_json *obj, const char *type) {
    const tdm_json *v = tdm_json_get(obj, "type");
    return v && v->type == TDM_JSON_STRING && !strcmp(v->str, type);
}

static const char *type_of(const tdm_json *obj) {
    const tdm_json *v = tdm_json_get(obj, "type");
    return v && v->type == TDM_JSON_STRING ? v->str : "(no type)";
}

/* 1 when obj[key] is missing, null or false. */
static int absent_or_false(const tdm_json *obj, const char *key) {
    const tdm_json *v = tdm_json_get(obj, key);
    return !v || v->type == TDM_JSON_NULL || v->type == TDM_JSON_FALSE;
}

static int absent_or_empty(const tdm_json *obj, const char *key) {
    const tdm_json *v = tdm_json_get(obj, key);
    return !v || v->type == TDM_JSON_NULL || (v->type == TDM_JSON_STRING && v->len == 0);
}

static int parse_id(const tdm_json *v, int32_t *out) {
    if (!v || v->type != TDM_JSON_NUMBER || !v->is_int || v->i64 < 0 || v->i64 >= MAX_ID) return -1;
    *out = (int32_t)v->i64;
    return 0;
}

static int load_vocab(tdm_tokenizer *t, const tdm_json *model, tdm_error *err) {
    const tdm_json *vocab = tdm_json_get(model, "vocab");
    if (!vocab || vocab->type != TDM_JSON_OBJECT)
        return tdm_errorf(err, "%s: model.vocab must be an object of token -> id", t->name);
    tdm_strmap_init(&t->sym_of, vocab->len + 512);
    for (size_t i = 0; i < vocab->len; i++) {
        int32_t id;
        if (parse_id(vocab->items[i], &id) != 0)
            return tdm_errorf(err, "%s: model.vocab[\"%.80s\"] (line %d): id must be an integer in [0, %lld)",
                              t->name, vocab->keys[i], vocab->items[i]->line, (long long)MAX_ID);
        int32_t s = symbol(t, vocab->keys[i], strlen(vocab->keys[i]));
        t->sym_id[s] = id;
        if (id >= t->n_ids) t->n_ids = id + 1;
    }
    for (int b = 0; b < 256; b++) {
        char buf[4];
        int n = tdm_utf8_put(buf, tdm_bytelevel_char((uint8_t)b));
        t->byte_sym[b] = symbol(t, buf, (size_t)n);
    }
    return 0;
}

/* One merge, as "left right" (tokenizers < 0.20) or ["left", "right"]. */
static int load_merge(tdm_tokenizer *t, const tdm_json *m, size_t rank, tdm_error *err) {
    const char *l, *r;
    size_t ln, rn;
    if (m->type == TDM_JSON_STRING) {
        const char *sp = memchr(m->str, ' ', m->len);
        if (!sp || sp == m->str || memchr(sp + 1, ' ', m->len - (size_t)(sp + 1 - m->str)) || sp + 1 == m->str + m->len)
            return tdm_errorf(err, "%s: model.merges[%zu] (line %d): expected two tokens separated by one space, got \"%.80s\"",
                              t->name, rank, m->line, m->str);
        l = m->str;
        ln = (size_t)(sp - m->str);
        r = sp + 1;
        rn = m->len - ln - 1;
    } else if (m->type == TDM_JSON_ARRAY && m->len == 2 && m->items[0]->type == TDM_JSON_STRING &&
               m->items[1]->type == TDM_JSON_STRING && m->items[0]->len && m->items[1]->len) {
        l = m->items[0]->str;
        ln = m->items[0]->len;
        r = m->items[1]->str;
        rn = m->items[1]->len;
    } else {
        return tdm_errorf(err, "%s: model.merges[%zu] (line %d): expected \"a b\" or [\"a\", \"b\"]", t->name, rank,
                          m->line);
    }
    int32_t a = symbol(t, l, ln), b = symbol(t, r, rn);
    char stackbuf[256];
    char *cat = ln + rn <= sizeof stackbuf ? stackbuf : tdm_xmalloc(ln + rn);
    memcpy(cat, l, ln);
    memcpy(cat + ln, r, rn);
    int32_t res = symbol(t, cat, ln + rn);
    if (cat != stackbuf) free(cat);
    /* A repeated pair keeps its last rank, as both tokenizers and transformers.js do. */
    tdm_pairmap_put(&t->merges, a, b, (int32_t)rank, res);
    return 0;
}

static int load_model(tdm_tokenizer *t, const tdm_json *root, tdm_error *err) {
    const tdm_json *model = tdm_json_get(root, "model");
    if (!model || model->type != TDM_JSON_OBJECT) return tdm_errorf(err, "%s: missing object \"model\"", t->name);
    if (tdm_json_get(model, "type") && !type_is(model, "BPE"))
        return tdm_errorf(err, "%s: model.type is \"%s\"; only \"BPE\" is supported", t->name, type_of(model));
    if (!absent_or_false(model, "byte_fallback"))
        return tdm_errorf(err, "%s: model.byte_fallback = true is not supported (byte-level BPE needs none)", t->name);
    if (!absent_or_false(model, "dropout") && tdm_json_get(model, "dropout")->type != TDM_JSON_NUMBER)
        return tdm_errorf(err, "%s: model.dropout must be null or a number", t->name);
    const tdm_json *dropout = tdm_json_get(model, "dropout");
    if (dropout && dropout->type == TDM_JSON_NUMBER && dropout->num != 0)
        return tdm_errorf(err, "%s: model.dropout is %g; only deterministic BPE (null) is supported", t->name,
                          dropout->num);
    if (!absent_or_empty(model, "continuing_subword_prefix") || !absent_or_empty(model, "end_of_word_suffix"))
        return tdm_errorf(err, "%s: model.continuing_subword_prefix / end_of_word_suffix are not supported", t->name);
    t->ignore_merges = !absent_or_false(model, "ignore_merges");
    if (load_vocab(t, model, err) != 0) return -1;

    const tdm_json *merges = tdm_json_get(model, "merges");
    if (!merges || merges->type != TDM_JSON_ARRAY) return tdm_errorf(err, "%s: model.merges must be an array", t->name);
    tdm_pairmap_init(&t->merges, merges->len);
    for (size_t i = 0; i < merges->len; i++)
        if (load_merge(t, merges->items[i], i, err) != 0) return -1;

    t->unk_id = -1;
    const tdm_json *unk = tdm_json_get(model, "unk_token");
    if (unk && unk->type == TDM_JSON_STRING) {
        int64_t s = tdm_strmap_get(&t->sym_of, unk->str, unk->len);
        if (s < 0 || t->sym_id[s] < 0)
            return tdm_errorf(err, "%s: model.unk_token \"%.80s\" is not in the vocabulary", t->name, unk->str);
        t->unk_id = t->sym_id[s];
    } else if (unk && unk->type != TDM_JSON_NULL) {
        return tdm_errorf(err, "%s: model.unk_token must be a string or null", t->name);
    }
    return 0;
}

static int cmp_added_longest_first(const void *a, const void *b) {
    const added_token *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id - y->id;
}

static int load_added(tdm_tokenizer *t, const tdm_json *root, tdm_error *err) {
    const tdm_json *arr = tdm_json_get(root, "added_tokens");
    if (!arr || arr->type == TDM_JSON_NULL) return 0;
    if (arr->type != TDM_JSON_ARRAY) return tdm_errorf(err, "%s: added_tokens must be an array", t->name);
    t->added = tdm_xcalloc(arr->len + 1, sizeof *t->added);
    for (size_t i = 0; i < arr->len; i++) {
        const tdm_json *a = arr->items[i];
        const tdm_json *content = tdm_json_get(a, "content");
        added_token *at = &t->added[t->n_added];
        if (parse_id(tdm_json_get(a, "id"), &at->id) != 0)
            return tdm_errorf(err, "%s: added_tokens[%zu] (line %d): \"id\" must be an integer in [0, %lld)", t->name, i,
                              a->line, (long long)MAX_ID);
        if (!content || content->type != TDM_JSON_STRING || content->len == 0)
            return tdm_errorf(err, "%s: added_tokens[%zu] (line %d): \"content\" must be a non-empty string", t->name, i,
                              a->line);
        if (!absent_or_false(a, "lstrip") || !absent_or_false(a, "rstrip") || !absent_or_false(a, "single_word"))
            return tdm_errorf(err, "%s: added_tokens[%zu] \"%.80s\": lstrip / rstrip / single_word are not supported",
                              t->name, i, content->str);
        at->content = pool_dup(t, content->str, content->len);
        at->len = (uint32_t)content->len;
        at->special = !absent_or_false(a, "special");
        t->added_first[(uint8_t)at->content[0]] = 1;
        if (at->id >= t->n_ids) t->n_ids = at->id + 1;
        t->n_added++;
    }
    qsort(t->added, t->n_added, sizeof *t->added, cmp_added_longest_first);
    return 0;
}

static int load_normalizer(tdm_tokenizer *t, const tdm_json *root, tdm_error *err) {
    const tdm_json *n = tdm_json_get(root, "normalizer");
    if (!n || n->type == TDM_JSON_NULL) return 0;
    if (type_is(n, "NFC")) {
        t->nfc = 1;
        return 0;
    }
    const tdm_json *seq = tdm_json_get(n, "normalizers");
    if (type_is(n, "Sequence") && seq && seq->type == TDM_JSON_ARRAY) {
        for (size_t i = 0; i < seq->len; i++) {
            if (!type_is(seq->items[i], "NFC"))
                return tdm_errorf(err, "%s: normalizer \"%s\" is not supported (only NFC)", t->name,
                                  type_of(seq->items[i]));
            t->nfc = 1;
        }
        return 0;
    }
    return tdm_errorf(err, "%s: normalizer \"%s\" is not supported (only NFC)", t->name, type_of(n));
}

/* transformers.js's built-in GPT-2 pattern, used by a ByteLevel pre-tokenizer with use_regex. */
static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_byte_level(tdm_tokenizer *t, const tdm_json *bl, const char **pattern, tdm_error *err) {
    if (!absent_or_false(bl, "add_prefix_space"))
        return tdm_errorf(err, "%s: ByteLevel add_prefix_space = true is not supported", t->name);
    const tdm_json *ur = tdm_json_get(bl, "use_regex");
    if (!ur || ur->type == TDM_JSON_TRUE) {
        if (*pattern) return tdm_errorf(err, "%s: a Split regex followed by ByteLevel use_regex = true is not supported", t->name);
        *pattern = GPT2_PATTERN;
    }
    return 0;
}

static int load_pre_tokenizer(tdm_tokenizer *t, const tdm_json *root, tdm_error *err) {
    const tdm_json *p = tdm_json_get(root, "pre_tokenizer");
    if (!p || p->type != TDM_JSON_OBJECT)
        return tdm_errorf(err, "%s: missing object \"pre_tokenizer\" (expected Split + ByteLevel)", t->name);
    const tdm_json *seq = tdm_json_get(p, "pretokenizers");
    size_t n = type_is(p, "Sequence") && seq && seq->type == TDM_JSON_ARRAY ? seq->len : 1;
    const char *pattern = NULL;
    int byte_level = 0;
    for (size_t i = 0; i < n; i++) {
        const tdm_json *s = type_is(p, "Sequence") ? seq->items[i] : p;
        if (type_is(s, "Split")) {
            const tdm_json *pat = tdm_json_get(tdm_json_get(s, "pattern"), "Regex");
            const tdm_json *beh = tdm_json_get(s, "behavior");
            if (pattern || byte_level || !pat || pat->type != TDM_JSON_STRING)
                return tdm_errorf(err, "%s: pre_tokenizer: expected one Split with a \"Regex\" pattern before ByteLevel", t->name);
            if (!beh || beh->type != TDM_JSON_STRING || strcmp(beh->str, "Isolated"))
                return tdm_errorf(err, "%s: pre_tokenizer Split: only behavior \"Isolated\" is supported", t->name);
            if (!absent_or_false(s, "invert"))
                return tdm_errorf(err, "%s: pre_tokenizer Split: invert = true is not supported", t->name);
            pattern = pat->str;
        } else if (type_is(s, "ByteLevel")) {
            if (byte_level) return tdm_errorf(err, "%s: pre_tokenizer: two ByteLevel steps", t->name);
            if (load_byte_level(t, s, &pattern, err) != 0) return -1;
            byte_level = 1;
        } else {
            return tdm_errorf(err, "%s: pre_tokenizer \"%s\" is not supported (expected Split and ByteLevel)", t->name,
                              type_of(s));
        }
    }
    if (!byte_level) return tdm_errorf(err, "%s: pre_tokenizer has no ByteLevel step; only byte-level BPE is supported", t->name);
    if (pattern && !(t->pretok = tdm_pretok_create(pattern, t->name, err))) return -1;
    return 0;
}

/* What each id decodes to: added tokens their content, vocabulary entries the bytes
 * their byte-level characters stand for (a character outside the map is kept as is). */
static void build_decode_table(tdm_tokenizer *t) {
    t->id_str = tdm_xcalloc((size_t)t->n_ids, sizeof *t->id_str);
    t->id_bytes = tdm_xcalloc((size_t)t->n_ids, sizeof *t->id_bytes);
    t->id_nbytes = tdm_xcalloc((size_t)t->n_ids, sizeof *t->id_nbytes);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    for (size_t s = 0; s < t->n_sym; s++) {
        int32_t id = t->sym_id[s];
        if (id < 0) continue;
        const unsigned char *u = (const unsigned char *)t->sym_str[s];
        size_t n = t->sym_len[s];
        tdm_sb_clear(&sb);
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            int k = tdm_utf8_next(u + i, n - i, &cp);
            int b = tdm_bytelevel_byte(cp);
            if (b >= 0) {
                tdm_sb_putc(&sb, (char)b);
            } else {
                tdm_sb_append(&sb, (const char *)u + i, (size_t)k);
            }
            i += (size_t)k;
        }
        t->id_str[id] = t->sym_str[s];
        t->id_bytes[id] = pool_dup(t, sb.data ? sb.data : "", sb.len);
        t->id_nbytes[id] = (uint32_t)sb.len;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        added_token *a = &t->added[i];
        t->id_str[a->id] = a->content;
        t->id_bytes[a->id] = a->content;
        t->id_nbytes[a->id] = a->len;
    }
    tdm_sb_free(&sb);
}

tdm_tokenizer *tdm_tokenizer_parse(const char *json, size_t len, const char *name, tdm_error *err) {
    tdm_json_doc *doc = tdm_json_parse(json, len, name, err);
    if (!doc) return NULL;
    tdm_tokenizer *t = tdm_xcalloc(1, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    pthread_mutex_init(&t->cache_mu, NULL);
    const tdm_json *root = tdm_json_root(doc);
    if (root->type != TDM_JSON_OBJECT) {
        tdm_errorf(err, "%s: expected a JSON object at the top level", name);
        goto fail;
    }
    if (load_model(t, root, err) != 0 || load_added(t, root, err) != 0 || load_normalizer(t, root, err) != 0 ||
        load_pre_tokenizer(t, root, err) != 0)
        goto fail;
    const tdm_json *dec = tdm_json_get(root, "decoder");
    if (dec && dec->type != TDM_JSON_NULL && !type_is(dec, "ByteLevel")) {
        tdm_errorf(err, "%s: decoder \"%s\" is not supported (expected ByteLevel)", name, type_of(dec));
        goto fail;
    }
    build_decode_table(t);
    tdm_strmap_init(&t->cache, CACHE_MAX_ENTRIES);
    t->cache_keys = tdm_xmalloc(CACHE_KEY_BYTES);
    t->cache_ids = tdm_xmalloc(CACHE_ID_SLOTS * sizeof *t->cache_ids);
    tdm_json_free(doc);
    return t;
fail:
    tdm_json_free(doc);
    tdm_tokenizer_free(t);
    return NULL;
}

tdm_tokenizer *tdm_tokenizer_load(const char *path, tdm_error *err) {
    size_t len;
    char *text = tdm_read_file(path, MAX_FILE_BYTES, &len, err);
    if (!text) return NULL;
    tdm_tokenizer *t = tdm_tokenizer_parse(text, len, path, err);
    free(text);
    return t;
}

void tdm_tokenizer_free(tdm_tokenizer *t) {
    if (!t) return;
    tdm_pretok_free(t->pretok);
    tdm_strmap_free(&t->sym_of);
    tdm_strmap_free(&t->cache);
    tdm_pairmap_free(&t->merges);
    free(t->sym_str);
    free(t->sym_len);
    free(t->sym_id);
    free(t->id_str);
    free(t->id_bytes);
    free(t->id_nbytes);
    free(t->added);
    free(t->cache_keys);
    free(t->cache_ids);
    pthread_mutex_destroy(&t->cache_mu);
    for (pool_block *b = t->pool, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(t);
}

/* ---- BPE on one piece ---- */

typedef struct heap_item {
    int32_t rank, pos; /* pos: index of the pair's left symbol in the piece */
} heap_item;

static int item_less(heap_item a, heap_item b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(heap_item *h, size_t *n, heap_item it) {
    size_t i = (*n)++;
    while (i > 0 && item_less(it, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = it;
}

static heap_item heap_pop(heap_item *h, size_t *n) {
    heap_item top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && item_less(h[c + 1], h[c])) c++;
        if (!item_less(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static void push_pair(const tdm_tokenizer *t, const int32_t *sym, const int32_t *next, int32_t pos, heap_item *h,
                      size_t *nh) {
    if (pos < 0 || next[pos] < 0) return;
    const tdm_merge *m = tdm_pairmap_get(&t->merges, sym[pos], sym[next[pos]]);
    if (m) heap_push(h, nh, (heap_item){m->rank, pos});
}

/* Merges sym[0..n) in place by rank (leftmost first among equal ranks); the surviving
 * symbols are compacted to the front. Returns their count. The heap holds every
 * current mergeable pair; an entry whose pair has changed since is skipped when popped
 * (its rank no longer matches the pair now at that position). */
static size_t bpe_merge(const tdm_tokenizer *t, int32_t *sym, size_t n, int32_t *next, int32_t *prev, heap_item *h) {
    size_t nh = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        prev[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) push_pair(t, sym, next, (int32_t)i, h, &nh);
    while (nh) {
        heap_item it = heap_pop(h, &nh);
        int32_t l = it.pos, r = next[l];
        if (sym[l] < 0 || r < 0) continue;
        const tdm_merge *m = tdm_pairmap_get(&t->merges, sym[l], sym[r]);
        if (!m || m->rank != it.rank) continue;
        sym[l] = m->result;
        sym[r] = -1;
        next[l] = next[r];
        if (next[r] >= 0) prev[next[r]] = l;
        push_pair(t, sym, next, prev[l], h, &nh);
        push_pair(t, sym, next, l, h, &nh);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (sym[i] >= 0) sym[k++] = sym[i];
    return k;
}

static int ids_of_piece(const tdm_tokenizer *t, const char *piece, size_t n, tdm_ids *out, tdm_error *err) {
    const unsigned char *u = (const unsigned char *)piece;
    if (t->ignore_merges) {
        /* The whole piece as one vocabulary entry, when there is one. */
        char *bl = tdm_xmalloc(2 * n);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) m += (size_t)tdm_utf8_put(bl + m, tdm_bytelevel_char(u[i]));
        int64_t s = tdm_strmap_get(&t->sym_of, bl, m);
        free(bl);
        if (s >= 0 && t->sym_id[s] >= 0) {
            tdm_ids_push(out, t->sym_id[s]);
            return 0;
        }
    }
    enum { SMALL = 256 };
    int32_t s_sym[SMALL], s_next[SMALL], s_prev[SMALL];
    heap_item s_heap[3 * SMALL];
    int big = n > SMALL;
    int32_t *sym = big ? tdm_xmalloc(3 * n * sizeof *sym) : s_sym;
    int32_t *next = big ? sym + n : s_next, *prev = big ? sym + 2 * n : s_prev;
    heap_item *heap = big ? tdm_xmalloc(3 * n * sizeof *heap) : s_heap;
    for (size_t i = 0; i < n; i++) sym[i] = t->byte_sym[u[i]];
    size_t k = bpe_merge(t, sym, n, next, prev, heap);
    int rc = 0;
    for (size_t i = 0; i < k; i++) {
        int32_t id = t->sym_id[sym[i]];
        if (id < 0) id = t->unk_id;
        if (id < 0) {
            rc = tdm_errorf(err, "%s: token \"%.80s\" is not in the vocabulary and there is no unk_token", t->name,
                            t->sym_str[sym[i]]);
            break;
        }
        tdm_ids_push(out, id);
    }
    if (big) {
        free(sym);
        free(heap);
    }
    return rc;
}

typedef struct encode_ctx {
    const tdm_tokenizer *t;
    tdm_ids *out;
    tdm_error *err;
} encode_ctx;

static int encode_piece(const char *piece, size_t n, void *vctx) {
    encode_ctx *c = vctx;
    tdm_tokenizer *t = (tdm_tokenizer *)c->t; /* the cache is the only state encode mutates */
    if (n > CACHE_MAX_PIECE) return ids_of_piece(t, piece, n, c->out, c->err);
    pthread_mutex_lock(&t->cache_mu);
    int64_t v = tdm_strmap_get(&t->cache, piece, n);
    if (v >= 0) {
        for (int64_t i = 0; i < (v & 0xFFFF); i++) tdm_ids_push(c->out, t->cache_ids[(v >> 16) + i]);
        pthread_mutex_unlock(&t->cache_mu);
        return 0;
    }
    pthread_mutex_unlock(&t->cache_mu);
    size_t first = c->out->len;
    if (ids_of_piece(t, piece, n, c->out, c->err) != 0) return -1;
    size_t k = c->out->len - first;
    pthread_mutex_lock(&t->cache_mu);
    if (t->cache.count + 1 > CACHE_MAX_ENTRIES || t->cache_keys_len + n > CACHE_KEY_BYTES ||
        t->cache_ids_len + k > CACHE_ID_SLOTS) {
        tdm_strmap_clear(&t->cache); /* full: start over rather than track recency */
        t->cache_keys_len = t->cache_ids_len = 0;
    }
    if (tdm_strmap_get(&t->cache, piece, n) < 0) {
        char *key = t->cache_keys + t->cache_keys_len;
        memcpy(key, piece, n);
        memcpy(t->cache_ids + t->cache_ids_len, c->out->data + first, k * sizeof(int32_t));
        tdm_strmap_put(&t->cache, key, n, (int64_t)t->cache_ids_len << 16 | (int64_t)k);
        t->cache_keys_len += n;
        t->cache_ids_len += k;
    }
    pthread_mutex_unlock(&t->cache_mu);
    return 0;
}

/* Steps 2-5 on text between added tokens. */
static int encode_section(const tdm_tokenizer *t, const char *s, size_t n, tdm_ids *out, tdm_error *err) {
    if (n == 0) return 0;
    char *norm = NULL;
    if (t->nfc) {
        size_t i = 0;
        while (i < n && !((unsigned char)s[i] & 0x80)) i++;
        if (i < n) {
            utf8proc_uint8_t *dst;
            utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (m < 0) return tdm_errorf(err, "%s: NFC normalisation failed: %s", t->name, utf8proc_errmsg(m));
            norm = (char *)dst;
            s = norm;
            n = (size_t)m;
        }
    }
    encode_ctx c = {t, out, err};
    int rc = t->pretok ? tdm_pretok_split(t->pretok, s, n, encode_piece, &c, err) : encode_piece(s, n, &c);
    free(norm);
    return rc ? -1 : 0;
}

int tdm_tokenizer_encode(const tdm_tokenizer *t, const char *text, size_t len, tdm_ids *out, tdm_error *err) {
    if (len > MAX_TEXT_BYTES)
        return tdm_errorf(err, "%s: text of %zu bytes is longer than the %zu bytes one encode call accepts", t->name, len,
                          MAX_TEXT_BYTES);
    char *fixed = NULL;
    if (!tdm_utf8_valid(text, len)) {
        fixed = tdm_utf8_repair(text, len, &len);
        text = fixed;
    }
    int rc = 0;
    size_t start = 0, i = 0;
    while (i < len) {
        const added_token *hit = NULL;
        if (t->added_first[(uint8_t)text[i]]) {
            for (size_t k = 0; k < t->n_added && !hit; k++) {
                const added_token *a = &t->added[k];
                if (a->len <= len - i && !memcmp(text + i, a->content, a->len)) hit = a; /* longest first */
            }
        }
        if (!hit) {
            i++;
            continue;
        }
        if ((rc = encode_section(t, text + start, i - start, out, err)) != 0) goto done;
        tdm_ids_push(out, hit->id);
        i += hit->len;
        start = i;
    }
    rc = encode_section(t, text + start, len - start, out, err);
done:
    free(fixed);
    return rc;
}

char *tdm_tokenizer_decode(const tdm_tokenizer *t, const int32_t *ids, size_t n) {
    size_t len;
    return tdm_tokenizer_decode_len(t, ids, n, &len);
}

char *tdm_tokenizer_decode_len(const tdm_tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_sb_append(&sb, "", 0);
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || !t->id_bytes[id]) continue; /* unknown ids decode to nothing */
        tdm_sb_append(&sb, t->id_bytes[id], t->id_nbytes[id]);
    }
    *len = sb.len;
    if (tdm_utf8_valid(sb.data, sb.len)) return sb.data;
    char *fixed = tdm_utf8_repair(sb.data, sb.len, len);
    tdm_sb_free(&sb);
    return fixed;
}

int32_t tdm_tokenizer_token_id(const tdm_tokenizer *t, const char *token) {
    size_t n = strlen(token);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == n && !memcmp(t->added[i].content, token, n)) return t->added[i].id;
    int64_t s = tdm_strmap_get(&t->sym_of, token, n);
    return s >= 0 ? t->sym_id[s] : -1;
}

const char *tdm_tokenizer_id_token(const tdm_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids ? t->id_str[id] : NULL;
}

int tdm_tokenizer_vocab_size(const tdm_tokenizer *t) {
    return t->n_ids;
}
