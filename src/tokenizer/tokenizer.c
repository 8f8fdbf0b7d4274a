/* tokenizer.c - encoding and decoding (loading is tokenizer_load.c).
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
 * Thread safety: encode and decode may run concurrently on one tokenizer; the word
 * cache, the only state encoding changes, is behind a mutex.
 */
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/tokenizer_internal.h"

#define MAX_TEXT_BYTES ((size_t)16 << 20) /* per encode call; BPE scratch is ~36 bytes per input byte */

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

/* ---- BPE on one piece ---- */

typedef struct heap_item {
    int32_t rank, pos; /* pos: index of the pair's left symbol in the piece */
} heap_item;

static int item_less(heap_item a, heap_item b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

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
    if (n > TDM_TOK_CACHE_MAX_PIECE) return ids_of_piece(t, piece, n, c->out, c->err);
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
    if (t->cache.count + 1 > TDM_TOK_CACHE_MAX_ENTRIES || t->cache_keys_len + n > TDM_TOK_CACHE_KEY_BYTES ||
        t->cache_ids_len + k > TDM_TOK_CACHE_ID_SLOTS) {
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
        return tdm_errorf(err, "%s: text of %zu bytes is longer than the %zu bytes one encode call accepts", t->name,
                          len, MAX_TEXT_BYTES);
    char *fixed = NULL;
    if (!tdm_utf8_valid(text, len)) {
        fixed = tdm_utf8_repair(text, len, &len);
        text = fixed;
    }
    int rc = 0;
    size_t start = 0, i = 0;
    while (i < len) {
        const tdm_added_token *hit = NULL;
        if (t->added_first[(uint8_t)text[i]]) {
            for (size_t k = 0; k < t->n_added && !hit; k++) {
                const tdm_added_token *a = &t->added[k];
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

int tdm_tokenizer_vocab_size(const tdm_tokenizer *t) { return t->n_ids; }

const char *tdm_tokenizer_name(const tdm_tokenizer *t) { return t->name; }
