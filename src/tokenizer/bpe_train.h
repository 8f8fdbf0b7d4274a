/* bpe_train.h - training a byte-level BPE tokenizer with Qwen's pipeline, written as a
 * Hugging Face tokenizer.json that tdm_tokenizer_load (and transformers.js) can read.
 *
 *   tdm_bpe_trainer *tr = tdm_bpe_trainer_create(&err);
 *   tdm_bpe_trainer_add_dataset(tr, "data/train.json", &err);   // or _add_text
 *   tdm_strbuf json; tdm_sb_init(&json);
 *   tdm_bpe_trainer_train(tr, 1024, &json, &stats, &err);
 *
 * Words are counted after the same steps encoding applies (UTF-8 repair, added tokens
 * cut out, NFC, Qwen's pre-tokenizer regex). Training then repeatedly merges the most
 * frequent adjacent pair of tokens, counted over all words weighted by frequency; ties
 * go to the pair whose left token's bytes sort first (memcmp order, a prefix before
 * its extensions), then the right token's. Nothing depends on hash order, so the
 * output is a pure function of the input texts and the vocabulary size.
 *
 * Id layout of the written file (the tiny model config relies on it), for size N:
 *   0..255        the byte symbols, in byte order: id b is byte b (written as GPT-2's
 *                 byte-level character for b, e.g. id 32 is "Ġ");
 *   256..N-27     one token per merge, in the order the merges were made;
 *   N-26..N-1     Qwen's 26 added tokens in Qwen's order, <|endoftext|> first and
 *                 </think> last (so for N = 1024: <|im_start|> 999, <|im_end|> 1000,
 *                 <|vision_start|> 1007, <|vision_end|> 1008, <|image_pad|> 1010).
 * A merge whose result already exists (e.g. "ab"+"c" after "a"+"bc") is recorded in
 * merges without a new id. Training goes on until the vocabulary is full or the
 * corpus runs out of pairs (every word a single token); in that case the ids between
 * the last merged token and N-26 are left unused (absent from the vocabulary, like
 * the padding rows of Qwen's embedding), so the added tokens keep their ids.
 */
#ifndef TDM_TOKENIZER_BPE_TRAIN_H
#define TDM_TOKENIZER_BPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"

#define TDM_QWEN_N_ADDED 26
/* Qwen's added tokens in id order; the first TDM_QWEN_N_SPECIAL are special = true. */
extern const char *const tdm_qwen_added_tokens[TDM_QWEN_N_ADDED];
#define TDM_QWEN_N_SPECIAL 14
/* Qwen2/Qwen3's pre-tokenizer regex, as tokenizer.json writes it. */
extern const char tdm_qwen_pretok_regex[];

typedef struct tdm_bpe_trainer tdm_bpe_trainer;

typedef struct tdm_bpe_stats {
    int64_t texts; /* texts added */
    int64_t words; /* pre-tokenized words counted (with repeats) */
    int64_t unique_words;
    int n_merges;   /* merges written */
    int n_tokens;   /* ids in use below the added tokens: 256 + new merged tokens */
    int vocab_size; /* N */
} tdm_bpe_stats;

tdm_bpe_trainer *tdm_bpe_trainer_create(tdm_error *err);
void tdm_bpe_trainer_free(tdm_bpe_trainer *tr);

/* Counts the words of one text (any bytes; invalid UTF-8 is repaired). */
int tdm_bpe_trainer_add_text(tdm_bpe_trainer *tr, const char *text, size_t len, tdm_error *err);

/* Adds every text of a dataset file: a JSON document or JSON Lines (one object per
 * line). Walks the JSON and takes the string values of "content", "value" and "text"
 * fields found inside "messages" or "conversations", and of a sample's "system" field
 * (the system turn of LLaMA-Factory's layout); a literal "<image>" is not counted
 * and separates words, as the vision tokens that replace it in a sample do. Errors name
 * the file (and line for JSON Lines). */
int tdm_bpe_trainer_add_dataset(tdm_bpe_trainer *tr, const char *path, tdm_error *err);

/* Trains a vocabulary of vocab_size ids (layout above; some may be unused when the
 * corpus is small) and appends the tokenizer.json text to out. vocab_size must be in [256 + 26 + 1, 1 << 20]. */
int tdm_bpe_trainer_train(tdm_bpe_trainer *tr, int vocab_size, tdm_strbuf *out, tdm_bpe_stats *stats, tdm_error *err);

#endif
