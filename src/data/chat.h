/* chat.h - the Qwen3-VL chat template and its training labels (spec qwen3vl.md section 5).
 *
 * A sample becomes
 *   [<|im_start|>system\n{system}<|im_end|>\n]
 *   <|im_start|>user\n{text with each <image> -> <|vision_start|><|image_pad|><|vision_end|>}<|im_end|>\n
 *   <|im_start|>assistant\n{answer}<|im_end|>\n   ... (more turns)
 * with no default system prompt and no BOS/EOS. labels[i] = ids[i] for the tokens of each
 * assistant answer, its <|im_end|> and the "\n" after it; -100 everywhere else (prompts,
 * role headers, images).
 *
 * Tokenization: every prompt turn is encoded as one string; each assistant header
 * ("<|im_start|>assistant\n") and each answer ("{answer}<|im_end|>\n") are encoded
 * separately, as LLaMA-Factory and the Qwen fine-tuning code do, so the label boundary is
 * always a token boundary. This equals encoding the whole conversation at once except for
 * answers that start with whitespace.
 *
 * Output ids hold ONE <|image_pad|> per image; tdm_rope_expand_pads (rope_index.h) turns
 * it into grid_h*grid_w/merge^2 copies once the image's grid is known.
 * Special-token ids are looked up by string, so any tokenizer.json that has them as added
 * tokens works (tdm_chat_init refuses one that has them only in model.vocab).
 */
#ifndef TDM_CHAT_H
#define TDM_CHAT_H

#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "tokenizer/tokenizer.h"

#define TDM_IGNORE_INDEX (-100)

typedef struct tdm_chat {
    const tdm_tokenizer *tok;
    int32_t im_start, im_end, vision_start, vision_end, image_pad;
} tdm_chat;

/* The format above as a Jinja chat template (Hugging Face's tokenizer_config.json "chat_template"):
 * messages with string content ("<image>" stays literal there) or a list of {"type": "image"} /
 * {"type": "video"} / {"type": "text", "text": ...} items; add_generation_prompt appends the assistant
 * header. Checkpoints export it (docs/user-guide.md, Checkpoints). */
extern const char TDM_CHAT_TEMPLATE_JINJA[];

/* Looks up the special tokens; error naming the first one the tokenizer lacks. */
int tdm_chat_init(tdm_chat *c, const tdm_tokenizer *tok, tdm_error *err);

/* Appends the sample's ids and labels (same length) to ids and labels. Errors (say, a
 * literal "<|image_pad|>" typed in the text, which would break the image count) carry no
 * file prefix; the caller adds one. */
int tdm_chat_encode(const tdm_chat *c, const tdm_sample *s, tdm_ids *ids, tdm_ids *labels, tdm_error *err);

/* A generation prompt: the turns (typically [system], user) followed by
 * "<|im_start|>assistant\n". One <|image_pad|> per image, as above. */
int tdm_chat_encode_prompt(const tdm_chat *c, const tdm_turn *turns, int n_turns, tdm_ids *ids, tdm_error *err);

#endif
