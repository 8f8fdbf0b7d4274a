/* tokenizer_load.c - reading a tokenizer.json into the tokenizer's tables.
 *
 * Accepted: model BPE (vocab, merges as "a b" strings or ["a", "b"] pairs, optional
 * unk_token, ignore_merges), added_tokens, normalizer null / NFC / Sequence of NFC,
 * pre_tokenizer Split(Regex, Isolated) + ByteLevel(use_regex false) or a lone
 * ByteLevel(use_regex true), decoder ByteLevel or null. Anything else is refused with
 * a message naming the file and the field, rather than encoded differently.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/tokenizer_internal.h"

#define MAX_FILE_BYTES ((size_t)256 << 20)
#define MAX_ID         ((int64_t)1 << 22) /* 4M ids: beyond that a broken file, not a bigger model */

static char *pool_dup(tdm_tokenizer *t, const char *s, size_t n) {
    tdm_pool_block *b = t->pool;
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
            return tdm_errorf(err, "%s: model.vocab[\"%.80s\"] (line %d): id must be an integer in [0, %lld)", t->name,
                              vocab->keys[i], vocab->items[i]->line, (long long)MAX_ID);
        int32_t s = symbol(t, vocab->keys[i], strlen(vocab->keys[i]));
        t->sym_id[s] = id;
        if (id >= t->n_ids) t->n_ids = id + 1;
    }
    /* One token per id: with two, what the id decodes to would depend on the order of the file. */
    int32_t *owner = tdm_xmalloc((size_t)t->n_ids * sizeof *owner); /* id -> index of its key in vocab */
    memset(owner, 0xFF, (size_t)t->n_ids * sizeof *owner);
    int rc = 0;
    for (size_t i = 0; i < vocab->len && rc == 0; i++) {
        int32_t id = (int32_t)vocab->items[i]->i64, o = owner[id];
        if (o >= 0 && strcmp(vocab->keys[o], vocab->keys[i]))
            rc = tdm_errorf(err,
                            "%s: model.vocab[\"%.80s\"] (line %d): id %d is also the id of \"%.80s\" (each id "
                            "must name one token)",
                            t->name, vocab->keys[i], vocab->items[i]->line, id, vocab->keys[o]);
        owner[id] = (int32_t)i;
    }
    free(owner);
    if (rc) return rc;
    for (int b = 0; b < 256; b++) {
        char buf[4];
        int n = tdm_utf8_put(buf, tdm_bytelevel_char((uint8_t)b));
        t->byte_sym[b] = symbol(t, buf, (size_t)n);
    }
    return 0;
}

/* One merge, as "left right" (tokenizers < 0.20) or ["left", "right"]; both sides and their
 * concatenation must be vocabulary entries. */
static int load_merge(tdm_tokenizer *t, const tdm_json *m, size_t rank, tdm_error *err) {
    const char *l, *r;
    size_t ln, rn;
    if (m->type == TDM_JSON_STRING) {
        const char *sp = memchr(m->str, ' ', m->len);
        if (!sp || sp == m->str || memchr(sp + 1, ' ', m->len - (size_t)(sp + 1 - m->str)) || sp + 1 == m->str + m->len)
            return tdm_errorf(
                err, "%s: model.merges[%zu] (line %d): expected two tokens separated by one space, got \"%.80s\"",
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
    /* Hugging Face tokenizers refuses such a file when it loads it; accepting it would
     * defer the failure (or a silent unk_token) to whichever text first reaches the merge. */
    int32_t missing = t->sym_id[a] < 0 ? a : t->sym_id[b] < 0 ? b : t->sym_id[res] < 0 ? res : -1;
    if (missing >= 0)
        return tdm_errorf(err,
                          "%s: model.merges[%zu] (line %d): \"%.80s\" is not in model.vocab (a merge joins "
                          "two vocabulary tokens into a third)",
                          t->name, rank, m->line, t->sym_str[missing]);
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
    const tdm_added_token *x = a, *y = b;
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
        tdm_added_token *at = &t->added[t->n_added];
        if (parse_id(tdm_json_get(a, "id"), &at->id) != 0)
            return tdm_errorf(err, "%s: added_tokens[%zu] (line %d): \"id\" must be an integer in [0, %lld)", t->name,
                              i, a->line, (long long)MAX_ID);
        if (!content || content->type != TDM_JSON_STRING || content->len == 0)
            return tdm_errorf(err, "%s: added_tokens[%zu] (line %d): \"content\" must be a non-empty string", t->name,
                              i, a->line);
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
        if (*pattern)
            return tdm_errorf(err, "%s: a Split regex followed by ByteLevel use_regex = true is not supported",
                              t->name);
        *pattern = GPT2_PATTERN;
    }
    return 0;
}

static int load_pre_tokenizer(tdm_tokenizer *t, const tdm_json *root, tdm_error *err) {
    const tdm_json *p = tdm_json_get(root, "pre_tokenizer");
    if (!p || p->type != TDM_JSON_OBJECT)
        return tdm_errorf(err, "%s: missing object \"pre_tokenizer\" (expected Split + ByteLevel)", t->name);
    const tdm_json *seq = tdm_json_get(p, "pretokenizers");
    const int is_seq = type_is(p, "Sequence");
    if (is_seq && (!seq || seq->type != TDM_JSON_ARRAY))
        return tdm_errorf(err, "%s: pre_tokenizer Sequence: \"pretokenizers\" must be an array", t->name);
    size_t n = is_seq ? seq->len : 1;
    const char *pattern = NULL;
    int byte_level = 0;
    for (size_t i = 0; i < n; i++) {
        const tdm_json *s = is_seq ? seq->items[i] : p;
        if (type_is(s, "Split")) {
            const tdm_json *pat = tdm_json_get(tdm_json_get(s, "pattern"), "Regex");
            const tdm_json *beh = tdm_json_get(s, "behavior");
            if (pattern || byte_level || !pat || pat->type != TDM_JSON_STRING)
                return tdm_errorf(
                    err, "%s: pre_tokenizer: expected one Split with a \"Regex\" pattern before ByteLevel", t->name);
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
    if (!byte_level)
        return tdm_errorf(err, "%s: pre_tokenizer has no ByteLevel step; only byte-level BPE is supported", t->name);
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
        tdm_added_token *a = &t->added[i];
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
    tdm_strmap_init(&t->cache, TDM_TOK_CACHE_MAX_ENTRIES);
    t->cache_keys = tdm_xmalloc(TDM_TOK_CACHE_KEY_BYTES);
    t->cache_ids = tdm_xmalloc(TDM_TOK_CACHE_ID_SLOTS * sizeof *t->cache_ids);
    tdm_json_free(doc);
    return t;
fail:
    tdm_json_free(doc);
    tdm_tokenizer_free(t);
    return NULL;
}

tdm_tokenizer *tdm_tokenizer_load(const char *file_or_dir, tdm_error *err) {
    char path[1024];
    struct stat st;
    int is_dir = stat(file_or_dir, &st) == 0 && S_ISDIR(st.st_mode);
    if ((size_t)snprintf(path, sizeof path, is_dir ? "%s/tokenizer.json" : "%s", file_or_dir) >= sizeof path) {
        tdm_errorf(err, "%.200s: path too long", file_or_dir);
        return NULL;
    }
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
    for (tdm_pool_block *b = t->pool, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(t);
}
