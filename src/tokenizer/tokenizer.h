/* tokenizer.h - Hugging Face byte-level BPE tokenizers (Qwen2 / Qwen3 / Qwen3-VL).
 *
 * Loads a tokenizer.json and reproduces `tokenizers` exactly: added tokens split
 * first (longest match), NFC normalisation, the pre-tokenizer regex, the GPT-2
 * byte-to-unicode map, BPE merges by rank, vocabulary lookup.
 *
 *   tdm_error err;
 *   tdm_tokenizer *t = tdm_tokenizer_load("tokenizer.json", &err);   // NULL: err.msg says why
 *   const char *s = "<|im_start|>user\nHi<|im_end|>";
 *   tdm_ids ids = {0};
 *   tdm_tokenizer_encode(t, s, strlen(s), &ids, &err);
 *   // Qwen3: ids = 151644 872 198 13048 151645
 *   char *text = tdm_tokenizer_decode(t, ids.data, ids.len);          // the text again
 *   free(text); tdm_ids_free(&ids); tdm_tokenizer_free(t);
 *
 * Checked id for id against transformers.js (tests/tokenizer/peer_tokenizer.sh).
 * Invalid UTF-8 in encode's input is repaired first, each maximal ill-formed subpart
 * becoming U+FFFD, exactly as a JavaScript or Python decoder would hand it over.
 * Encode and decode may run concurrently on one tokenizer.
 * A tokenizer.json of another shape (WordPiece, byte fallback, other normalisers or
 * pre-tokenizers, lstrip/rstrip added tokens) is refused with a message, not
 * approximated. BPE training, writing such a file: bpe_train.h.
 */
#ifndef TDM_TOKENIZER_H
#define TDM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* A growable array of token ids. */
typedef struct tdm_ids {
    int32_t *data;
    size_t len, cap;
} tdm_ids;

void tdm_ids_push(tdm_ids *v, int32_t id);
void tdm_ids_free(tdm_ids *v);

typedef struct tdm_tokenizer tdm_tokenizer;

/* Reads and parses a tokenizer.json (at most 256 MiB; ids below 4M), or the
 * tokenizer.json inside a directory (a Hugging Face model directory). NULL on error,
 * with a message naming the file and the field that is wrong or unsupported. */
tdm_tokenizer *tdm_tokenizer_load(const char *file_or_dir, tdm_error *err);
/* The same from text in memory; `name` stands for the file in messages. */
tdm_tokenizer *tdm_tokenizer_parse(const char *json, size_t len, const char *name, tdm_error *err);
/* Frees everything; t may be NULL. */
void tdm_tokenizer_free(tdm_tokenizer *t);

/* Appends the ids of UTF-8 `text` to out. Added/special tokens written in the text
 * are recognised. Invalid UTF-8 is repaired first (see above and tokenizer.c).
 * Fails for texts over 16 MiB, or when a piece has no id and there is no unk_token. */
int tdm_tokenizer_encode(const tdm_tokenizer *t, const char *text, size_t len, tdm_ids *out, tdm_error *err);

/* Decoded UTF-8 text (malloc'ed, NUL-terminated); invalid sequences become U+FFFD. */
char *tdm_tokenizer_decode(const tdm_tokenizer *t, const int32_t *ids, size_t n);
/* The same, with the length in bytes in *len (the text may contain NUL bytes).
 * Ids that are not in the tokenizer decode to nothing. */
char *tdm_tokenizer_decode_len(const tdm_tokenizer *t, const int32_t *ids, size_t n, size_t *len);

/* The id of a token string (vocabulary entry or added token), or -1. */
int32_t tdm_tokenizer_token_id(const tdm_tokenizer *t, const char *token);
/* The token string of an id as tokenizer.json writes it (byte-level form for
 * vocabulary entries, the content for added tokens), or NULL for an unused id. */
const char *tdm_tokenizer_id_token(const tdm_tokenizer *t, int32_t id);
/* Number of ids (vocabulary plus added tokens: max id + 1). */
int tdm_tokenizer_vocab_size(const tdm_tokenizer *t);
/* The file it was loaded from (the name given to parse), for messages about it. */
const char *tdm_tokenizer_name(const tdm_tokenizer *t);

#endif
