#include "tokenizer/hashmap.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/alloc.h"

static size_t capacity_for(size_t expected) {
    size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    return cap;
}

void tdm_strmap_init(tdm_strmap *m, size_t expected) {
    m->cap = capacity_for(expected);
    m->count = 0;
    m->slots = tdm_xcalloc(m->cap, sizeof *m->slots);
}

void tdm_strmap_free(tdm_strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

void tdm_strmap_clear(tdm_strmap *m) {
    memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->count = 0;
}

static uint32_t str_hash(const char *key, size_t len) { return (uint32_t)XXH3_64bits(key, len); }

int64_t tdm_strmap_get(const tdm_strmap *m, const char *key, size_t len) {
    uint32_t h = str_hash(key, len);
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        const tdm_strmap_slot *s = &m->slots[i];
        if (!s->key) return -1;
        if (s->hash == h && s->len == len && !memcmp(s->key, key, len)) return s->val;
    }
}

static void strmap_grow(tdm_strmap *m) {
    tdm_strmap old = *m;
    m->cap *= 2;
    m->count = 0;
    m->slots = tdm_xcalloc(m->cap, sizeof *m->slots);
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].key) tdm_strmap_put(m, old.slots[i].key, old.slots[i].len, old.slots[i].val);
    free(old.slots);
}

void tdm_strmap_put(tdm_strmap *m, const char *key, size_t len, int64_t val) {
    if (2 * (m->count + 1) > m->cap) strmap_grow(m);
    uint32_t h = str_hash(key, len);
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        tdm_strmap_slot *s = &m->slots[i];
        if (!s->key) {
            s->key = key;
            s->len = (uint32_t)len;
            s->hash = h;
            s->val = val;
            m->count++;
            return;
        }
        if (s->hash == h && s->len == len && !memcmp(s->key, key, len)) {
            s->val = val;
            return;
        }
    }
}

static uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t)(uint32_t)left << 32 | (uint32_t)right; }

/* A 64-bit finaliser (from splitmix64) spreads consecutive symbol ids over the table. */
static size_t pair_hash(uint64_t k) {
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ULL;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebULL;
    k ^= k >> 31;
    return (size_t)k;
}

void tdm_pairmap_init(tdm_pairmap *m, size_t expected) {
    m->cap = capacity_for(expected);
    m->count = 0;
    m->slots = tdm_xmalloc(m->cap * sizeof *m->slots);
    for (size_t i = 0; i < m->cap; i++) m->slots[i].rank = -1;
}

void tdm_pairmap_free(tdm_pairmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

const tdm_merge *tdm_pairmap_get(const tdm_pairmap *m, int32_t left, int32_t right) {
    uint64_t k = pair_key(left, right);
    for (size_t i = pair_hash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        const tdm_merge *s = &m->slots[i];
        if (s->rank < 0) return NULL;
        if (s->key == k) return s;
    }
}

static void pairmap_grow(tdm_pairmap *m) {
    tdm_pairmap old = *m;
    tdm_pairmap_init(m, old.cap); /* doubles: capacity_for(cap) = 2 * cap */
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].rank >= 0)
            tdm_pairmap_put(m, (int32_t)(old.slots[i].key >> 32), (int32_t)(uint32_t)old.slots[i].key,
                            old.slots[i].rank, old.slots[i].result);
    free(old.slots);
}

void tdm_pairmap_put(tdm_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t result) {
    if (2 * (m->count + 1) > m->cap) pairmap_grow(m);
    uint64_t k = pair_key(left, right);
    for (size_t i = pair_hash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        tdm_merge *s = &m->slots[i];
        if (s->rank < 0) {
            s->key = k;
            s->rank = rank;
            s->result = result;
            m->count++;
            return;
        }
        if (s->key == k) {
            s->rank = rank;
            s->result = result;
            return;
        }
    }
}
