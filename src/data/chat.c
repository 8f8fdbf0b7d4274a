/* chat.c - chat template and labels (see chat.h). */
#include "data/chat.h"

#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"

/* The id of special token s, which the template writes as text: so the text s must also
 * encode to that one id, which only an added token does (a model.vocab entry alone does
 * not, and the template would silently become ordinary pieces). */
static int lookup(const tdm_tokenizer *tok, const char *s, int32_t *out, tdm_error *err) {
    *out = tdm_tokenizer_token_id(tok, s);
    if (*out < 0)
        return tdm_errorf(err, "%s: no %s token, which the Qwen3-VL chat template needs", tdm_tokenizer_name(tok), s);
    tdm_ids ids = {0};
    tdm_error e;
    int ok = tdm_tokenizer_encode(tok, s, strlen(s), &ids, &e) == 0 && ids.len == 1 && ids.data[0] == *out;
    tdm_ids_free(&ids);
    if (!ok)
        return tdm_errorf(err,
                          "%s: %s (id %d) is not an added token, so the text %s does not encode to it "
                          "(expected it in \"added_tokens\", as the Qwen3-VL chat template writes it as text)",
                          tdm_tokenizer_name(tok), s, (int)*out, s);
    return 0;
}

const char TDM_CHAT_TEMPLATE_JINJA[] = "{%- for message in messages -%}\n"
                                       "{{- '<|im_start|>' + message['role'] + '\\n' -}}\n"
                                       "{%- if message['content'] is string -%}\n"
                                       "{{- message['content'] -}}\n"
                                       "{%- else -%}\n"
                                       "{%- for item in message['content'] -%}\n"
                                       "{%- if item['type'] == 'image' or 'image' in item or 'image_url' in item -%}\n"
                                       "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}\n"
                                       "{%- elif item['type'] == 'video' or 'video' in item -%}\n"
                                       "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}\n"
                                       "{%- elif 'text' in item -%}\n"
                                       "{{- item['text'] -}}\n"
                                       "{%- endif -%}\n"
                                       "{%- endfor -%}\n"
                                       "{%- endif -%}\n"
                                       "{{- '<|im_end|>\\n' -}}\n"
                                       "{%- endfor -%}\n"
                                       "{%- if add_generation_prompt -%}\n"
                                       "{{- '<|im_start|>assistant\\n' -}}\n"
                                       "{%- endif -%}\n";

int tdm_chat_init(tdm_chat *c, const tdm_tokenizer *tok, tdm_error *err) {
    c->tok = tok;
    if (lookup(tok, "<|im_start|>", &c->im_start, err) || lookup(tok, "<|im_end|>", &c->im_end, err) ||
        lookup(tok, "<|vision_start|>", &c->vision_start, err) || lookup(tok, "<|vision_end|>", &c->vision_end, err) ||
        lookup(tok, "<|image_pad|>", &c->image_pad, err))
        return -1;
    return 0;
}

/* Appends text with each "<image>" replaced by the vision markers. */
static void put_content(tdm_strbuf *sb, const char *text) {
    const char *p = text, *q;
    while ((q = strstr(p, "<image>")) != NULL) {
        tdm_sb_append(sb, p, (size_t)(q - p));
        tdm_sb_puts(sb, "<|vision_start|><|image_pad|><|vision_end|>");
        p = q + 7;
    }
    tdm_sb_puts(sb, p);
}

static int encode(const tdm_chat *c, const tdm_strbuf *sb, int trained, tdm_ids *ids, tdm_ids *labels, tdm_error *err) {
    size_t before = ids->len;
    if (tdm_tokenizer_encode(c->tok, sb->data, sb->len, ids, err) != 0) return -1;
    if (labels)
        for (size_t i = before; i < ids->len; i++) tdm_ids_push(labels, trained ? ids->data[i] : TDM_IGNORE_INDEX);
    return 0;
}

/* Encodes the turns; answers are labelled when labels != NULL. Checks the image count. */
static int encode_turns(const tdm_chat *c, const tdm_turn *turns, int n_turns, int n_images, int gen_prompt,
                        tdm_ids *ids, tdm_ids *labels, tdm_error *err) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    size_t start = ids->len;
    int rc = 0;
    for (int t = 0; t < n_turns && rc == 0; t++) {
        tdm_sb_clear(&sb);
        tdm_sb_puts(&sb, "");
        if (turns[t].role != TDM_ROLE_ASSISTANT) {
            tdm_sb_printf(&sb, "<|im_start|>%s\n", tdm_role_name(turns[t].role));
            put_content(&sb, turns[t].text);
            tdm_sb_puts(&sb, "<|im_end|>\n");
            rc = encode(c, &sb, 0, ids, labels, err);
        } else {
            tdm_sb_puts(&sb, "<|im_start|>assistant\n");
            rc = encode(c, &sb, 0, ids, labels, err);
            if (rc) break;
            tdm_sb_clear(&sb);
            tdm_sb_puts(&sb, turns[t].text);
            tdm_sb_puts(&sb, "<|im_end|>\n");
            rc = encode(c, &sb, 1, ids, labels, err);
        }
    }
    if (rc == 0 && gen_prompt) {
        tdm_sb_clear(&sb);
        tdm_sb_puts(&sb, "<|im_start|>assistant\n");
        rc = encode(c, &sb, 0, ids, labels, err);
    }
    tdm_sb_free(&sb);
    if (rc) return -1;
    int pads = 0;
    for (size_t i = start; i < ids->len; i++) pads += ids->data[i] == c->image_pad;
    if (pads != n_images)
        return tdm_errorf(err,
                          "the text tokenizes to %d <|image_pad|> tokens for %d images (is a special token "
                          "written in the text?)",
                          pads, n_images);
    return 0;
}

int tdm_chat_encode(const tdm_chat *c, const tdm_sample *s, tdm_ids *ids, tdm_ids *labels, tdm_error *err) {
    return encode_turns(c, s->turns, s->n_turns, s->n_images, 0, ids, labels, err);
}

int tdm_chat_encode_prompt(const tdm_chat *c, const tdm_turn *turns, int n_turns, tdm_ids *ids, tdm_error *err) {
    int n_images = 0;
    for (int t = 0; t < n_turns; t++)
        for (const char *p = turns[t].text; (p = strstr(p, "<image>")) != NULL; p += 7) n_images++;
    return encode_turns(c, turns, n_turns, n_images, 1, ids, NULL, err);
}
