/* test_config.c - the shipped config.json files read with the right values, and broken
 * configs (written here into a temp directory) refused with messages that name the file
 * and the field. Run from the repository root (scripts/test.sh does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "harness.h"
#include "model/config.h"

static char tmpdir[256];
static char *tiny_text; /* configs/tiny/config.json as shipped */

static void test_shipped_2b(void) {
    tdm_model_config c;
    tdm_error err = {{0}};
    int rc = tdm_model_config_load("configs/qwen3-vl-2b", &c, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc) return;
    CHECK(strstr(c.path, "configs/qwen3-vl-2b/config.json") != NULL, "path %s", c.path);
    const tdm_vision_config *v = &c.vision;
    const tdm_text_config *t = &c.text;
    CHECK(v->depth == 24 && v->hidden_size == 1024 && v->num_heads == 16 && v->intermediate_size == 4096,
          "vision %d %d %d %d", v->depth, v->hidden_size, v->num_heads, v->intermediate_size);
    CHECK(v->patch_size == 16 && v->temporal_patch_size == 2 && v->in_channels == 3 && v->spatial_merge_size == 2,
          "patching");
    CHECK(v->num_position_embeddings == 2304 && v->out_hidden_size == 2048, "pos/out");
    CHECK(v->n_deepstack == 3 && v->deepstack_indexes[0] == 5 && v->deepstack_indexes[1] == 11 &&
              v->deepstack_indexes[2] == 17,
          "deepstack");
    CHECK(strcmp(v->hidden_act, "gelu_pytorch_tanh") == 0, "vision act %s", v->hidden_act);
    CHECK(t->hidden_size == 2048 && t->num_layers == 28 && t->num_heads == 16 && t->num_kv_heads == 8 &&
              t->head_dim == 128 && t->intermediate_size == 6144 && t->vocab_size == 151936,
          "text sizes");
    CHECK(t->rope_theta == 5e6 && t->rms_norm_eps == 1e-6, "theta %g eps %g", t->rope_theta, t->rms_norm_eps);
    CHECK(t->mrope_section[0] == 24 && t->mrope_section[1] == 20 && t->mrope_section[2] == 20 &&
              t->mrope_interleaved == 1,
          "mrope");
    CHECK(t->max_position_embeddings == 262144 && strcmp(t->hidden_act, "silu") == 0, "maxpos/act");
    CHECK(c.tie_word_embeddings == 1, "2B is tied");
    CHECK(c.image_token_id == 151655 && c.video_token_id == 151656 && c.vision_start_token_id == 151652 &&
              c.vision_end_token_id == 151653,
          "vision tokens");
    CHECK(c.bos_token_id == 151643 && c.eos_token_id == 151645 && c.pad_token_id == -1, "bos %d eos %d pad %d",
          c.bos_token_id, c.eos_token_id, c.pad_token_id);
    CHECK(tdm_vision_head_dim(v) == 64 && tdm_vision_merge_dim(v) == 4096 && tdm_vision_patch_dim(v) == 1536,
          "derived");
}

static void test_shipped_8b(void) {
    tdm_model_config c;
    tdm_error err = {{0}};
    int rc = tdm_model_config_load("configs/qwen3-vl-8b/config.json", &c, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc) return;
    const tdm_vision_config *v = &c.vision;
    const tdm_text_config *t = &c.text;
    CHECK(v->depth == 27 && v->hidden_size == 1152 && v->num_heads == 16 && v->intermediate_size == 4304 &&
              v->out_hidden_size == 4096,
          "vision");
    CHECK(v->n_deepstack == 3 && v->deepstack_indexes[0] == 8 && v->deepstack_indexes[1] == 16 &&
              v->deepstack_indexes[2] == 24,
          "deepstack");
    CHECK(t->hidden_size == 4096 && t->num_layers == 36 && t->num_heads == 32 && t->num_kv_heads == 8 &&
              t->head_dim == 128 && t->intermediate_size == 12288 && t->vocab_size == 151936,
          "text");
    CHECK(c.tie_word_embeddings == 0, "8B is untied");
    CHECK(tdm_vision_head_dim(v) == 72, "vision head dim");
}

static void test_shipped_tiny(void) {
    tdm_model_config c;
    tdm_error err = {{0}};
    int rc = tdm_model_config_load("configs/tiny", &c, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc) return;
    const tdm_vision_config *v = &c.vision;
    const tdm_text_config *t = &c.text;
    CHECK(v->depth == 4 && v->hidden_size == 128 && v->num_heads == 4 && v->intermediate_size == 512 &&
              v->patch_size == 16 && v->temporal_patch_size == 2 && v->spatial_merge_size == 2 &&
              v->num_position_embeddings == 256 && v->out_hidden_size == 256,
          "vision");
    CHECK(v->n_deepstack == 3 && v->deepstack_indexes[0] == 0 && v->deepstack_indexes[1] == 1 &&
              v->deepstack_indexes[2] == 2,
          "deepstack");
    CHECK(t->hidden_size == 256 && t->num_layers == 4 && t->num_heads == 4 && t->num_kv_heads == 2 &&
              t->head_dim == 64 && t->intermediate_size == 768 && t->vocab_size == 1024,
          "text");
    CHECK(t->rope_theta == 5e6 && t->rms_norm_eps == 1e-6 && t->mrope_section[0] == 12 && t->mrope_section[1] == 10 &&
              t->mrope_section[2] == 10 && t->mrope_interleaved,
          "rope");
    CHECK(c.tie_word_embeddings == 0, "tiny is untied");
    CHECK(c.text.padding_idx == -1, "a top-level pad_token_id is no padding_idx: %d", c.text.padding_idx);
    CHECK(c.bos_token_id == 998 && c.pad_token_id == 998 && c.eos_token_id == 1000, "bos %d pad %d eos %d",
          c.bos_token_id, c.pad_token_id, c.eos_token_id);
    CHECK(c.vision_start_token_id == 1007 && c.vision_end_token_id == 1008 && c.image_token_id == 1010 &&
              c.video_token_id == 1011,
          "vision tokens");
}

/* Writes tiny's config with the first occurrence of `from` replaced by `to` and loads it;
 * returns the load's rc, the error in *err, and the file's path in path[512]. */
static int load_edited(const char *case_name, const char *from, const char *to, tdm_model_config *c, tdm_error *err,
                       char *path) {
    const char *at = strstr(tiny_text, from);
    if (!at) {
        fprintf(stderr, "  test bug: '%s' not in configs/tiny/config.json\n", from);
        return 99;
    }
    size_t pre = (size_t)(at - tiny_text), fl = strlen(from), tl = strlen(to), n = strlen(tiny_text);
    char *buf = malloc(n - fl + tl + 1);
    memcpy(buf, tiny_text, pre);
    memcpy(buf + pre, to, tl);
    memcpy(buf + pre + tl, at + fl, n - pre - fl + 1);
    snprintf(path, 512, "%s/%s.json", tmpdir, case_name);
    tdm_error werr;
    if (tdm_write_file_atomic(path, buf, strlen(buf), &werr) != 0) {
        fprintf(stderr, "  %s\n", werr.msg);
        free(buf);
        return 99;
    }
    free(buf);
    err->msg[0] = 0;
    return tdm_model_config_load(path, c, err);
}

typedef struct broken_case {
    const char *name, *from, *to;
    const char *field; /* must appear in the message, next to the file name */
} broken_case;

static void test_broken_configs(void) {
    const broken_case cases[] = {
        {"missing_depth", "\"depth\": 4,", "", "vision_config.depth"},
        {"missing_vocab", "\"vocab_size\": 1024", "\"vocab_sizes\": 1024", "text_config.vocab_size"},
        {"string_size", "\"hidden_size\": 256,", "\"hidden_size\": \"256\",", "text_config.hidden_size"},
        {"fraction_layers", "\"num_hidden_layers\": 4,", "\"num_hidden_layers\": 4.5,",
         "text_config.num_hidden_layers"},
        {"zero_heads", "\"num_attention_heads\": 4,", "\"num_attention_heads\": 0,", "text_config.num_attention_heads"},
        {"negative_inter", "\"intermediate_size\": 512,", "\"intermediate_size\": -512,",
         "vision_config.intermediate_size"},
        {"kv_not_dividing", "\"num_key_value_heads\": 2,", "\"num_key_value_heads\": 3,",
         "text_config.num_key_value_heads"},
        {"heads_not_dividing", "\"num_attention_heads\": 4,", "\"num_attention_heads\": 3,",
         "text_config.num_attention_heads"},
        {"mrope_sum", "12,\n        10,\n        10", "12,\n        10,\n        11", "mrope_section"},
        {"mrope_count", "12,\n        10,\n        10", "22,\n        10", "mrope_section"},
        {"deepstack_past_depth", "0,\n      1,\n      2\n", "0,\n      1,\n      4\n",
         "vision_config.deepstack_visual_indexes"},
        {"deepstack_unsorted", "0,\n      1,\n      2\n", "0,\n      2,\n      1\n",
         "vision_config.deepstack_visual_indexes"},
        {"pos_not_square", "\"num_position_embeddings\": 256", "\"num_position_embeddings\": 250",
         "vision_config.num_position_embeddings"},
        {"out_hidden_mismatch", "\"out_hidden_size\": 256", "\"out_hidden_size\": 128",
         "vision_config.out_hidden_size"},
        {"vision_heads_not_dividing", "\"num_heads\": 4,", "\"num_heads\": 3,", "vision_config.num_heads"},
        {"vision_head_dim_not_4", "\"num_heads\": 4,", "\"num_heads\": 64,", "vision_config.num_heads"},
        {"image_token_past_vocab", "\"image_token_id\": 1010", "\"image_token_id\": 1024", "image_token_id"},
        {"eos_past_vocab", "\"eos_token_id\": 1000", "\"eos_token_id\": 5000", "text_config.eos_token_id"},
        {"eos_list_past_vocab", "\"eos_token_id\": 1000", "\"eos_token_id\": [1000, 5000]", "text_config.eos_token_id"},
        {"eos_list_of_strings", "\"eos_token_id\": 1000", "\"eos_token_id\": [\"</s>\"]", "text_config.eos_token_id"},
        {"text_act", "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "text_config.hidden_act"},
        {"vision_act", "\"hidden_act\": \"gelu_pytorch_tanh\"", "\"hidden_act\": \"relu\"", "vision_config.hidden_act"},
        {"model_type", "\"model_type\": \"qwen3_vl\"", "\"model_type\": \"qwen2_vl\"", "model_type"},
        {"absurd_layers", "\"num_hidden_layers\": 4,", "\"num_hidden_layers\": 1000000000000,",
         "text_config.num_hidden_layers"},
        {"absurd_total", "\"depth\": 4,\n    \"hidden_act\": \"gelu_pytorch_tanh\",\n    \"hidden_size\": 128,",
         "\"depth\": 1024, \"hidden_act\": \"gelu_pytorch_tanh\", \"hidden_size\": 65536,", "parameters"},
        {"no_text_config", "\"text_config\"", "\"text_configuration\"", "text_config"},
        {"text_config_array", "\"text_config\": {", "\"text_config\": [], \"x\": {", "text_config"},
        {"tie_contradiction", "\"use_cache\": true,", "\"use_cache\": true, \"tie_word_embeddings\": true,",
         "tie_word_embeddings"},
        {"theta_contradiction", "\"rope_type\": \"default\"", "\"rope_type\": \"default\", \"rope_theta\": 10000",
         "rope_theta"},
        {"not_interleaved", "\"mrope_interleaved\": true", "\"mrope_interleaved\": false", "mrope_interleaved"},
        {"yarn", "\"rope_type\": \"default\"", "\"rope_type\": \"yarn\"", "rope_type"},
        /* transformers reads the older key "type" as rope_type (and lets it win) */
        {"yarn_as_type", "\"rope_type\": \"default\"", "\"type\": \"yarn\", \"factor\": 4.0",
         "text_config.rope_scaling.type"},
        {"yarn_type_beside_default", "\"rope_type\": \"default\"", "\"rope_type\": \"default\", \"type\": \"yarn\"",
         "text_config.rope_scaling.type"},
        {"no_rope", "\"rope_scaling\"", "\"rope_scalingz\"", "mrope_section"},
        {"attention_bias", "\"attention_bias\": false", "\"attention_bias\": true", "text_config.attention_bias"},
        /* transformers applies attention dropout in training: it cannot be silently dropped */
        {"attention_dropout", "\"attention_dropout\": 0.0", "\"attention_dropout\": 0.1",
         "text_config.attention_dropout: 0.1"},
        {"attention_dropout_string", "\"attention_dropout\": 0.0", "\"attention_dropout\": \"0\"",
         "text_config.attention_dropout"},
        {"bool_as_string", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": \"false\"",
         "tie_word_embeddings"},
        {"malformed_json", "\"model_type\": \"qwen3_vl\",", "\"model_type\": \"qwen3_vl\" ", ":"},
        {"too_many_deepstack", "0,\n      1,\n      2\n", "0, 1, 2, 3, 4, 5, 6, 7, 8\n", "deepstack_visual_indexes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tdm_model_config c;
        tdm_error err;
        char path[512];
        int rc = load_edited(cases[i].name, cases[i].from, cases[i].to, &c, &err, path);
        CHECK(rc == -1, "%s: expected refusal, rc %d", cases[i].name, rc);
        if (rc != -1) continue;
        if (getenv("TDM_TEST_VERBOSE")) printf("  %-26s %s\n", cases[i].name, err.msg);
        CHECK(strstr(err.msg, path) != NULL, "%s: message does not name the file: %s", cases[i].name, err.msg);
        CHECK(strstr(err.msg, cases[i].field) != NULL, "%s: message does not name '%s': %s", cases[i].name,
              cases[i].field, err.msg);
    }
}

/* Fewer decoder layers than DeepStack taps (a checkpoint cut down to 1 or 2 layers for a quick
 * run) is a valid HF config: transformers adds feature j after layer j only while j < layers,
 * and the later taps reach nothing. */
/* transformers allows a list of end-of-sequence ids (Llama 3, many fine-tunes): the first is the
 * model's eos_token_id, every one must be in the vocabulary. */
static void test_eos_list(void) {
    tdm_model_config c;
    tdm_error err;
    char path[512];
    int rc = load_edited("eos_list", "\"eos_token_id\": 1000", "\"eos_token_id\": [1000, 998]", &c, &err, path);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(rc != 0 || c.eos_token_id == 1000, "eos %d", c.eos_token_id);
}

/* text_config.pad_token_id is the embedding's padding_idx (HF: no gradient through its lookups). */
static void test_text_pad_token(void) {
    tdm_model_config c;
    tdm_error err;
    char path[512];
    int rc = load_edited("text_pad", "\"bos_token_id\": 998,", "\"bos_token_id\": 998, \"pad_token_id\": 998,", &c,
                         &err, path);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(rc != 0 || (c.text.padding_idx == 998 && c.pad_token_id == 998), "padding_idx %d", c.text.padding_idx);
    /* the top-level pad_token_id (998 in tiny) may differ: transformers keeps them apart */
    rc = load_edited("text_pad_other", "\"bos_token_id\": 998,", "\"bos_token_id\": 998, \"pad_token_id\": 1001,", &c,
                     &err, path);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(rc != 0 || c.text.padding_idx == 1001, "padding_idx %d", c.text.padding_idx);
}

static void test_fewer_layers_than_taps(void) {
    tdm_model_config c;
    tdm_error err;
    char path[512];
    int rc = load_edited("one_layer", "\"num_hidden_layers\": 4,", "\"num_hidden_layers\": 1,", &c, &err, path);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(rc != 0 || (c.text.num_layers == 1 && c.vision.n_deepstack == 3), "values");
}

/* The HF 5.x layout (rope_parameters with rope_theta inside) and a top-level rope_scaling
 * are both accepted and give the same values. */
static void test_rope_places(void) {
    tdm_model_config c;
    tdm_error err;
    char path[512];
    int rc = load_edited("rope_parameters", "\"rope_scaling\": {", "\"rope_parameters\": {\"rope_theta\": 10000, ", &c,
                         &err, path);
    /* text_config.rope_theta 5e6 is still present: a contradiction. */
    CHECK(rc == -1 && strstr(err.msg, "rope_theta"), "rc %d: %s", rc, err.msg);
    rc = load_edited("rope_parameters_ok", "\"rope_scaling\": {", "\"rope_parameters\": {\"rope_theta\": 5000000, ", &c,
                     &err, path);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(rc != 0 || (c.text.mrope_section[0] == 12 && c.text.rope_theta == 5e6), "values");
    /* Qwen2-VL's spelling, "type": "mrope", is plain M-RoPE. */
    rc = load_edited("rope_type_mrope", "\"rope_type\": \"default\"", "\"type\": \"mrope\"", &c, &err, path);
    CHECK(rc == 0, "%s", err.msg);
    /* A contradiction inside rope_parameters is reported there. */
    rc = load_edited(
        "rope_parameters_sum",
        "\"rope_scaling\": {\n      \"mrope_interleaved\": true,\n      \"mrope_section\": [\n        12,",
        "\"rope_parameters\": {\n      \"mrope_interleaved\": true,\n      \"mrope_section\": [\n        14,", &c, &err,
        path);
    CHECK(rc == -1 && strstr(err.msg, "text_config.rope_parameters.mrope_section") && strstr(err.msg, path),
          "rc %d: %s", rc, err.msg);

    /* Move the rope object to the top level: take it out of text_config, add it at the root. */
    const char *rope = "\"rope_scaling\": {\n      \"mrope_interleaved\": true,\n      \"mrope_section\": [\n        "
                       "12,\n        10,\n        10\n      ],\n      \"rope_type\": \"default\"\n    },";
    char *saved = tiny_text;
    const char *at = strstr(saved, rope);
    CHECK(at != NULL, "test bug: rope block not found");
    if (!at) return;
    size_t n = strlen(saved), rl = strlen(rope), pre = (size_t)(at - saved);
    char *edited = malloc(n + 1);
    memcpy(edited, saved, pre);
    memcpy(edited + pre, at + rl, n - pre - rl + 1);
    tiny_text = edited;
    rc = load_edited("rope_top", "\"model_type\": \"qwen3_vl\",",
                     "\"model_type\": \"qwen3_vl\", \"rope_scaling\": {\"mrope_section\": [12, 10, 10]},", &c, &err,
                     path);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(rc != 0 || (c.text.mrope_section[1] == 10 && c.text.mrope_interleaved == 1), "values");
    tiny_text = saved;
    free(edited);
}

static void test_missing_file(void) {
    tdm_model_config c;
    tdm_error err = {{0}};
    char path[300];
    snprintf(path, sizeof path, "%s/nope", tmpdir);
    CHECK(tdm_model_config_load(path, &c, &err) == -1, "loaded a missing file");
    CHECK(strstr(err.msg, "nope") != NULL, "%s", err.msg);
    /* A directory without config.json names the config.json it looked for. */
    CHECK(tdm_model_config_load(tmpdir, &c, &err) == -1, "loaded a directory without config.json");
    CHECK(strstr(err.msg, "config.json") != NULL, "%s", err.msg);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tdm_test_config_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    tdm_error err;
    tiny_text = tdm_read_file("configs/tiny/config.json", 1 << 20, NULL, &err);
    if (!tiny_text) {
        fprintf(stderr, "%s (run from the repository root)\n", err.msg);
        return 1;
    }
    RUN(test_shipped_2b);
    RUN(test_shipped_8b);
    RUN(test_shipped_tiny);
    RUN(test_broken_configs);
    RUN(test_rope_places);
    RUN(test_fewer_layers_than_taps);
    RUN(test_eos_list);
    RUN(test_text_pad_token);
    RUN(test_missing_file);
    free(tiny_text);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return TEST_SUMMARY();
}
