/* tokenizer_internal.h - the tokenizer's state, shared by tokenizer_load.c (which
 * builds it from tokenizer.json) and tokenizer.c (which encodes and decodes with it).
 * Not part of the module's interface.
 *
 * Symbols: every string BPE can produce (vocabulary entries, the 256 byte symbols,
 * both sides and the result of every merge) gets a dense symbol index, so BPE works
 * on int32 arrays and a merge is one pair-map lookup. sym_id maps a symbol to its id
 * (-1 when the vocabulary lacks it).
 */
#ifndef TDM_TOKENIZER_INTERNAL_H
#define TDM_TOKENIZER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "tokenizer/hashmap.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tokenizer.h"

/* The word cache (piece bytes -> ids) is cleared whenever one of these fills up. */
#define TDM_TOK_CACHE_MAX_PIECE   128 /* bytes; longer pieces are rare and not cached */
#define TDM_TOK_CACHE_MAX_ENTRIES 32768
#define TDM_TOK_CACHE_KEY_BYTES   ((size_t)1 << 20)
#define TDM_TOK_CACHE_ID_SLOTS    ((size_t)1 << 18)

typedef struct tdm_added_token {
    const char *content;
    uint32_t len;
    int32_t id;
    int special;
} tdm_added_token;

typedef struct tdm_pool_block {
    struct tdm_pool_block *next;
    size_t used, cap;
    char data[];
} tdm_pool_block;

struct tdm_tokenizer {
    char name[256];
    tdm_pool_block *pool; /* owns every string below */

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
    tdm_added_token *added; /* longest content first */
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

#endif
