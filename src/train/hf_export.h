/* hf_export.h - the Hugging Face files a checkpoint's iter folder holds beside config.json and
 * model.safetensors, so that transformers' from_pretrained finds a tokenizer and a generation
 * config there (docs/user-guide.md, Checkpoints). tandem itself reads neither of them back.
 *
 *   tokenizer_config.json    the special tokens (eos <|im_end|>, pad <|endoftext|>, no bos), the
 *                            chat template tandem applies (TDM_CHAT_TEMPLATE_JINJA, data/chat.h)
 *   generation_config.json   bos/pad <|endoftext|>, eos [<|im_end|>, <|endoftext|>] (where decoding
 *                            stops), and `tandem generate`'s defaults: greedy, temperature, top_k, top_p
 * A token the tokenizer lacks is left out (null, or not in the eos list).
 */
#ifndef TDM_HF_EXPORT_H
#define TDM_HF_EXPORT_H

#include "core/strbuf.h"
#include "tokenizer/tokenizer.h"

/* tokenizer_config.json's text; model_max_length 0 leaves it out. */
void tdm_hf_tokenizer_config(const tdm_tokenizer *tok, int64_t model_max_length, tdm_strbuf *out);
/* generation_config.json's text. */
void tdm_hf_generation_config(const tdm_tokenizer *tok, tdm_strbuf *out);

#endif
