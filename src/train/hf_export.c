/* hf_export.c - tokenizer_config.json and generation_config.json of a checkpoint (hf_export.h). */
#include "train/hf_export.h"

#include <string.h>

#include "data/chat.h"
#include "train/generate.h"

/* "key": "<token>" or "key": null when the tokenizer lacks it */
static void token_field(tdm_strbuf *sb, const tdm_tokenizer *tok, const char *key, const char *token) {
    tdm_sb_printf(sb, "  \"%s\": ", key);
    if (token && tdm_tokenizer_token_id(tok, token) >= 0) tdm_sb_json_string(sb, token, strlen(token));
    else tdm_sb_puts(sb, "null");
    tdm_sb_puts(sb, ",\n");
}

void tdm_hf_tokenizer_config(const tdm_tokenizer *tok, int64_t model_max_length, tdm_strbuf *out) {
    tdm_sb_puts(out, "{\n");
    tdm_sb_puts(out, "  \"tokenizer_class\": \"Qwen2TokenizerFast\",\n");
    tdm_sb_puts(out, "  \"add_bos_token\": false,\n  \"add_prefix_space\": false,\n");
    tdm_sb_puts(out, "  \"clean_up_tokenization_spaces\": false,\n  \"errors\": \"replace\",\n");
    tdm_sb_puts(out, "  \"split_special_tokens\": false,\n");
    token_field(out, tok, "bos_token", NULL);
    token_field(out, tok, "eos_token", "<|im_end|>");
    token_field(out, tok, "pad_token", "<|endoftext|>");
    token_field(out, tok, "unk_token", NULL);
    if (model_max_length > 0) tdm_sb_printf(out, "  \"model_max_length\": %lld,\n", (long long)model_max_length);
    tdm_sb_puts(out, "  \"chat_template\": ");
    tdm_sb_json_string(out, TDM_CHAT_TEMPLATE_JINJA, strlen(TDM_CHAT_TEMPLATE_JINJA));
    tdm_sb_puts(out, "\n}\n");
}

void tdm_hf_generation_config(const tdm_tokenizer *tok, tdm_strbuf *out) {
    int32_t eot = tdm_tokenizer_token_id(tok, "<|endoftext|>"), im_end = tdm_tokenizer_token_id(tok, "<|im_end|>");
    tdm_sb_puts(out, "{\n");
    if (eot >= 0) tdm_sb_printf(out, "  \"bos_token_id\": %d,\n  \"pad_token_id\": %d,\n", (int)eot, (int)eot);
    tdm_sb_puts(out, "  \"eos_token_id\": [");
    int n = 0;
    if (im_end >= 0) tdm_sb_printf(out, "%d", (int)im_end), n++;
    if (eot >= 0) tdm_sb_printf(out, "%s%d", n ? ", " : "", (int)eot);
    tdm_sb_puts(out, "],\n");
    tdm_sb_printf(out, "  \"do_sample\": false,\n  \"temperature\": %.17g,\n  \"top_k\": %d,\n  \"top_p\": %.17g\n}\n",
                  TDM_GENERATE_DEFAULT_TEMPERATURE, TDM_GENERATE_DEFAULT_TOP_K, TDM_GENERATE_DEFAULT_TOP_P);
}
