/* hashmap.h - the two lookup tables BPE needs: byte strings -> values (vocabulary,
 * word cache) and symbol pairs -> merge (rank and result).
 *
 * Open addressing with linear probing, capacity a power of two kept under 50% load.
 * The string map does not copy keys: a key must stay valid as long as the map.
 */
#ifndef TDM_TOKENIZER_HASHMAP_H
#define TDM_TOKENIZER_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct tdm_strmap_slot {
    const char *key; /* NULL = empty */
    uint32_t len;
    uint32_t hash;
    int64_t val;
} tdm_strmap_slot;

typedef struct tdm_strmap {
    tdm_strmap_slot *slots;
    size_t cap, count;
} tdm_strmap;

void tdm_strmap_init(tdm_strmap *m, size_t expected);
void tdm_strmap_free(tdm_strmap *m);
/* Forgets every entry, keeps the capacity. */
void tdm_strmap_clear(tdm_strmap *m);
/* The value stored under key[0..len), or -1 when absent. */
int64_t tdm_strmap_get(const tdm_strmap *m, const char *key, size_t len);
/* Stores val under key (replacing an existing value). */
void tdm_strmap_put(tdm_strmap *m, const char *key, size_t len, int64_t val);

/* A merge: symbols (left, right) become `result`; lower rank merges first. */
typedef struct tdm_merge {
    uint64_t key; /* left << 32 | right */
    int32_t rank; /* -1 = empty slot */
    int32_t result;
} tdm_merge;

typedef struct tdm_pairmap {
    tdm_merge *slots;
    size_t cap, count;
} tdm_pairmap;

void tdm_pairmap_init(tdm_pairmap *m, size_t expected);
void tdm_pairmap_free(tdm_pairmap *m);
/* The merge of (left, right), or NULL. */
const tdm_merge *tdm_pairmap_get(const tdm_pairmap *m, int32_t left, int32_t right);
/* Stores (replaces) the merge of (left, right). */
void tdm_pairmap_put(tdm_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t result);

#endif
