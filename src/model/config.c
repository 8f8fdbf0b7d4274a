/* config.c - reading a Hugging Face Qwen3-VL config.json (see config.h).
 *
 * The file nests two sub-configs, as transformers' Qwen3VLConfig writes it:
 *   { "model_type": "qwen3_vl", "image_token_id": ..., "tie_word_embeddings": ...,
 *     "vision_config": { depth, hidden_size, num_heads, ..., deepstack_visual_indexes },
 *     "text_config":   { hidden_size, num_hidden_layers, ..., rope_theta,
 *                        "rope_scaling": { mrope_section, mrope_interleaved, rope_type } } }
 * Versions of transformers put the rotary settings in different places (text_config.rope_scaling
 * up to 4.57, text_config.rope_parameters with rope_theta inside from 5.0, sometimes the top
 * level), so all of those are looked at.
 *
 * Reading happens in two passes: fields (type and range of each value), then consistency
 * between fields (divisibility, sums, index ranges). Both name the file and the field.
 */
#include "model/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "core/json.h"

typedef struct reader {
    const char *file; /* for messages */
    tdm_error *err;
    char rope_where[64]; /* where the rotary settings were found, e.g. "text_config.rope_scaling" */
    int vocab;           /* text_config.vocab_size, once read */
} reader;

/* "vision_config" + "depth" -> "vision_config.depth"; top level has an empty section. */
static void field_path(char *out, size_t cap, const char *sect, const char *key) {
    if (sect[0]) snprintf(out, cap, "%s.%s", sect, key);
    else snprintf(out, cap, "%s", key);
}

static int fail_field(reader *r, const char *sect, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_field(reader *r, const char *sect, const char *key, const char *fmt, ...) {
    char path[160], what[512];
    field_path(path, sizeof path, sect, key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tdm_errorf(r->err, "%s: %s: %s", r->file, path, what);
}

/* An integer in [lo, hi]. A missing field takes `def` when has_def, else is an error. */
static int read_int(reader *r, const tdm_json *obj, const char *sect, const char *key, int64_t lo, int64_t hi,
                    int has_def, int def, int *out) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (!v || v->type == TDM_JSON_NULL) {
        if (has_def) {
            *out = def;
            return 0;
        }
        return fail_field(r, sect, key, "missing (an integer is required)");
    }
    if (v->type != TDM_JSON_NUMBER || !v->is_int)
        return fail_field(r, sect, key, "expected an integer, found %s (line %d)",
                          v->type == TDM_JSON_NUMBER ? "a fraction" : tdm_json_type_name(v->type), v->line);
    if (v->i64 < lo || v->i64 > hi)
        return fail_field(r, sect, key, "%lld is out of range [%lld, %lld]", (long long)v->i64, (long long)lo,
                          (long long)hi);
    *out = (int)v->i64;
    return 0;
}

#define REQ_INT(obj, sect, key, lo, hi, out)      read_int(r, obj, sect, key, lo, hi, 0, 0, out)
#define OPT_INT(obj, sect, key, lo, hi, def, out) read_int(r, obj, sect, key, lo, hi, 1, def, out)

/* A finite positive number; `present` (may be NULL) reports whether the field was there. */
static int read_pos_num(reader *r, const tdm_json *obj, const char *sect, const char *key, double def, double *out,
                        int *present) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (present) *present = v && v->type != TDM_JSON_NULL;
    if (!v || v->type == TDM_JSON_NULL) {
        *out = def;
        return 0;
    }
    if (v->type != TDM_JSON_NUMBER)
        return fail_field(r, sect, key, "expected a number, found %s (line %d)", tdm_json_type_name(v->type), v->line);
    if (!(v->num > 0) || !isfinite(v->num)) return fail_field(r, sect, key, "must be positive (got %g)", v->num);
    *out = v->num;
    return 0;
}

static int read_bool(reader *r, const tdm_json *obj, const char *sect, const char *key, int def, int *out,
                     int *present) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (present) *present = v && v->type != TDM_JSON_NULL;
    if (!v || v->type == TDM_JSON_NULL) {
        *out = def;
        return 0;
    }
    if (v->type != TDM_JSON_TRUE && v->type != TDM_JSON_FALSE)
        return fail_field(r, sect, key, "expected true or false, found %s (line %d)", tdm_json_type_name(v->type),
                          v->line);
    *out = v->type == TDM_JSON_TRUE;
    return 0;
}

/* A string into out[cap]; a missing field copies `def`, or is an error when def is NULL. */
static int read_str(reader *r, const tdm_json *obj, const char *sect, const char *key, const char *def, char *out,
                    size_t cap) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (!v || v->type == TDM_JSON_NULL) {
        if (!def) return fail_field(r, sect, key, "missing (a string is required)");
        snprintf(out, cap, "%s", def);
        return 0;
    }
    if (v->type != TDM_JSON_STRING)
        return fail_field(r, sect, key, "expected a string, found %s (line %d)", tdm_json_type_name(v->type), v->line);
    if (v->len >= cap) return fail_field(r, sect, key, "string is too long (%zu bytes)", v->len);
    memcpy(out, v->str, v->len + 1);
    return 0;
}

/* A JSON array of n_max or fewer integers in [lo, hi]; *n receives the count. */
static int read_int_array(reader *r, const tdm_json *obj, const char *sect, const char *key, int n_max, int64_t lo,
                          int64_t hi, int *vals, int *n) {
    const tdm_json *a = tdm_json_get(obj, key);
    if (!a || a->type == TDM_JSON_NULL) return fail_field(r, sect, key, "missing (a list of integers is required)");
    if (a->type != TDM_JSON_ARRAY)
        return fail_field(r, sect, key, "expected a list of integers, found %s (line %d)", tdm_json_type_name(a->type),
                          a->line);
    if (a->len > (size_t)n_max) return fail_field(r, sect, key, "%zu entries, at most %d supported", a->len, n_max);
    for (size_t i = 0; i < a->len; i++) {
        const tdm_json *v = a->items[i];
        if (v->type != TDM_JSON_NUMBER || !v->is_int)
            return fail_field(r, sect, key, "entry %zu: expected an integer, found %s", i,
                              v->type == TDM_JSON_NUMBER ? "a fraction" : tdm_json_type_name(v->type));
        if (v->i64 < lo || v->i64 > hi)
            return fail_field(r, sect, key, "entry %zu: %lld is out of range [%lld, %lld]", i, (long long)v->i64,
                              (long long)lo, (long long)hi);
        vals[i] = (int)v->i64;
    }
    *n = (int)a->len;
    return 0;
}

/* A sub-object that must exist. */
static const tdm_json *require_object(reader *r, const tdm_json *obj, const char *key) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (!v) {
        fail_field(r, "", key, "missing (an object is required)");
        return NULL;
    }
    if (v->type != TDM_JSON_OBJECT) {
        fail_field(r, "", key, "expected an object, found %s (line %d)", tdm_json_type_name(v->type), v->line);
        return NULL;
    }
    return v;
}

static int read_vision(reader *r, const tdm_json *vj, tdm_vision_config *v) {
    const char *s = "vision_config";
    const int H = TDM_CONFIG_MAX_HIDDEN;
    if (REQ_INT(vj, s, "depth", 1, TDM_CONFIG_MAX_LAYERS, &v->depth) ||
        REQ_INT(vj, s, "hidden_size", 1, H, &v->hidden_size) ||
        REQ_INT(vj, s, "num_heads", 1, TDM_CONFIG_MAX_HEADS, &v->num_heads) ||
        REQ_INT(vj, s, "intermediate_size", 1, H, &v->intermediate_size) ||
        OPT_INT(vj, s, "patch_size", 1, 64, 16, &v->patch_size) ||
        OPT_INT(vj, s, "temporal_patch_size", 1, 16, 2, &v->temporal_patch_size) ||
        OPT_INT(vj, s, "in_channels", 1, 16, 3, &v->in_channels) ||
        OPT_INT(vj, s, "spatial_merge_size", 1, 8, 2, &v->spatial_merge_size) ||
        REQ_INT(vj, s, "num_position_embeddings", 1, 1 << 20, &v->num_position_embeddings) ||
        REQ_INT(vj, s, "out_hidden_size", 1, H, &v->out_hidden_size) ||
        read_int_array(r, vj, s, "deepstack_visual_indexes", TDM_MAX_DEEPSTACK, 0, TDM_CONFIG_MAX_LAYERS,
                       v->deepstack_indexes, &v->n_deepstack) ||
        read_str(r, vj, s, "hidden_act", "gelu_pytorch_tanh", v->hidden_act, sizeof v->hidden_act))
        return -1;
    return 0;
}

/* Finds the rotary settings: the first object among the places HF versions use. */
static const tdm_json *find_rope(reader *r, const tdm_json *root, const tdm_json *tj, char *where, size_t cap) {
    struct {
        const tdm_json *obj;
        const char *sect, *key;
    } places[] = {
        {tj, "text_config", "rope_scaling"},
        {tj, "text_config", "rope_parameters"},
        {root, "", "rope_scaling"},
        {root, "", "rope_parameters"},
    };
    for (size_t i = 0; i < sizeof places / sizeof *places; i++) {
        const tdm_json *v = tdm_json_get(places[i].obj, places[i].key);
        if (!v || v->type == TDM_JSON_NULL) continue;
        if (v->type != TDM_JSON_OBJECT) {
            fail_field(r, places[i].sect, places[i].key, "expected an object, found %s (line %d)",
                       tdm_json_type_name(v->type), v->line);
            return NULL;
        }
        if (!tdm_json_get(v, "mrope_section")) continue; /* e.g. a top-level copy without the sections */
        field_path(where, cap, places[i].sect, places[i].key);
        return v;
    }
    tdm_errorf(r->err,
               "%s: text_config.rope_scaling.mrope_section: missing (looked in text_config.rope_scaling, "
               "text_config.rope_parameters, rope_scaling, rope_parameters)",
               r->file);
    return NULL;
}

static int read_text(reader *r, const tdm_json *root, const tdm_json *tj, tdm_text_config *t) {
    const char *s = "text_config";
    const int H = TDM_CONFIG_MAX_HIDDEN;
    if (REQ_INT(tj, s, "hidden_size", 1, H, &t->hidden_size) ||
        REQ_INT(tj, s, "num_hidden_layers", 1, TDM_CONFIG_MAX_LAYERS, &t->num_layers) ||
        REQ_INT(tj, s, "num_attention_heads", 1, TDM_CONFIG_MAX_HEADS, &t->num_heads) ||
        REQ_INT(tj, s, "num_key_value_heads", 1, TDM_CONFIG_MAX_HEADS, &t->num_kv_heads) ||
        REQ_INT(tj, s, "head_dim", 1, 1024, &t->head_dim) ||
        REQ_INT(tj, s, "intermediate_size", 1, H, &t->intermediate_size) ||
        REQ_INT(tj, s, "vocab_size", 1, TDM_CONFIG_MAX_VOCAB, &t->vocab_size) ||
        OPT_INT(tj, s, "max_position_embeddings", 1, TDM_CONFIG_MAX_POSITIONS, 128000, &t->max_position_embeddings) ||
        read_pos_num(r, tj, s, "rms_norm_eps", 1e-6, &t->rms_norm_eps, NULL) ||
        read_str(r, tj, s, "hidden_act", "silu", t->hidden_act, sizeof t->hidden_act))
        return -1;
    if (t->rms_norm_eps >= 1) return fail_field(r, s, "rms_norm_eps", "%g is not a small epsilon", t->rms_norm_eps);

    int bias = 0;
    if (read_bool(r, tj, s, "attention_bias", 0, &bias, NULL)) return -1;
    if (bias) return fail_field(r, s, "attention_bias", "true is not supported (Qwen3-VL has no attention biases)");
    /* transformers drops attention probabilities in training when this is non-zero; the model
     * here has no dropout, so anything but 0 would train another model without a word. */
    const tdm_json *drop = tdm_json_get(tj, "attention_dropout");
    if (drop && drop->type != TDM_JSON_NULL && drop->type != TDM_JSON_NUMBER)
        return fail_field(r, s, "attention_dropout", "expected a number, found %s (line %d)",
                          tdm_json_type_name(drop->type), drop->line);
    if (drop && drop->type == TDM_JSON_NUMBER && drop->num != 0)
        return fail_field(r, s, "attention_dropout", "%g is not supported (expected 0.0: no attention dropout here)",
                          drop->num);

    char *where = r->rope_where;
    const tdm_json *rope = find_rope(r, root, tj, where, sizeof r->rope_where);
    if (!rope) return -1;
    int n = 0;
    if (read_int_array(r, rope, where, "mrope_section", 3, 0, 1024, t->mrope_section, &n)) return -1;
    if (n != 3) return fail_field(r, where, "mrope_section", "%d entries, expected 3 (t, h, w)", n);
    /* HF's Qwen3-VL always interleaves; a config saying otherwise asks for Qwen2-VL's chunked
     * layout, which this model does not implement. */
    if (read_bool(r, rope, where, "mrope_interleaved", 1, &t->mrope_interleaved, NULL)) return -1;
    if (!t->mrope_interleaved)
        return fail_field(r, where, "mrope_interleaved", "false is not supported (Qwen3-VL interleaves M-RoPE)");
    /* transformers still reads the older key "type" as rope_type (and lets it win when both are
     * there): a {"type": "yarn", "factor": 4} must not pass as plain RoPE. */
    static const char *const type_keys[] = {"rope_type", "type"};
    for (int i = 0; i < 2; i++) {
        char rope_type[32];
        if (read_str(r, rope, where, type_keys[i], "default", rope_type, sizeof rope_type)) return -1;
        if (strcmp(rope_type, "default") != 0 && strcmp(rope_type, "mrope") != 0)
            return fail_field(r, where, type_keys[i], "\"%s\" is not supported (expected \"default\")", rope_type);
    }

    double theta_text = 0, theta_rope = 0;
    int has_text = 0, has_rope = 0;
    if (read_pos_num(r, tj, s, "rope_theta", 5e6, &theta_text, &has_text) ||
        read_pos_num(r, rope, where, "rope_theta", 5e6, &theta_rope, &has_rope))
        return -1;
    if (has_text && has_rope && theta_text != theta_rope)
        return fail_field(r, s, "rope_theta", "%g contradicts %s.rope_theta %g", theta_text, where, theta_rope);
    t->rope_theta = has_text ? theta_text : theta_rope;
    return 0;
}

/* A token id that transformers also takes as a list (eos_token_id): an integer, or a non-empty
 * list of them of which the first counts; every entry must be below `vocab`. */
static int read_id_or_list(reader *r, const tdm_json *obj, const char *sect, const char *key, int def, int vocab,
                           int *out) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (!v || v->type != TDM_JSON_ARRAY) return OPT_INT(obj, sect, key, 0, INT32_MAX, def, out);
    int ids[16], n = 0;
    if (read_int_array(r, obj, sect, key, 16, 0, INT32_MAX, ids, &n)) return -1;
    if (n == 0) return fail_field(r, sect, key, "an empty list (a token id or a list of them is expected)");
    for (int i = 0; i < n; i++)
        if (ids[i] >= vocab)
            return fail_field(r, sect, key, "entry %d: %d is not below text_config.vocab_size %d", i, ids[i], vocab);
    *out = ids[0];
    return 0;
}

/* Optional integer that may sit in text_config or at the top level (text_config wins);
 * both present and different is a contradiction, except with `independent` (pad_token_id:
 * transformers keeps the two apart, text_config's is the embedding's padding_idx).
 * lists: eos_token_id's list form is accepted. */
static int read_either_int(reader *r, const tdm_json *root, const tdm_json *tj, const char *key, int def, int lists,
                           int independent, int *out) {
    int a = def, b = def;
    const tdm_json *in_text = tdm_json_get(tj, key), *in_root = tdm_json_get(root, key);
    int rc =
        lists ? read_id_or_list(r, tj, "text_config", key, def, r->vocab, &a) ||
                    read_id_or_list(r, root, "", key, def, r->vocab, &b)
              : OPT_INT(tj, "text_config", key, 0, INT32_MAX, def, &a) || OPT_INT(root, "", key, 0, INT32_MAX, def, &b);
    if (rc) return -1;
    int ht = in_text && in_text->type != TDM_JSON_NULL, hr = in_root && in_root->type != TDM_JSON_NULL;
    if (ht && hr && a != b && !independent)
        return fail_field(r, "text_config", key, "%d contradicts the top-level %s %d", a, key, b);
    *out = ht ? a : b;
    return 0;
}

static int check_vision(reader *r, const tdm_vision_config *v, const tdm_text_config *t) {
    const char *s = "vision_config";
    if (v->hidden_size % v->num_heads)
        return fail_field(r, s, "num_heads", "%d does not divide hidden_size %d", v->num_heads, v->hidden_size);
    int hd = v->hidden_size / v->num_heads;
    if (hd % 4) /* 2D RoPE: hd/4 frequencies for rows, hd/4 for columns */
        return fail_field(r, s, "num_heads",
                          "head dim %d (hidden_size / num_heads) must be a multiple of 4 for 2D RoPE", hd);
    int side = (int)lround(sqrt((double)v->num_position_embeddings));
    if (side * side != v->num_position_embeddings)
        return fail_field(r, s, "num_position_embeddings", "%d is not a perfect square (a side x side grid)",
                          v->num_position_embeddings);
    if (v->out_hidden_size != t->hidden_size)
        return fail_field(r, s, "out_hidden_size", "%d differs from text_config.hidden_size %d", v->out_hidden_size,
                          t->hidden_size);
    for (int j = 0; j < v->n_deepstack; j++) {
        if (v->deepstack_indexes[j] >= v->depth)
            return fail_field(r, s, "deepstack_visual_indexes", "entry %d: block %d does not exist (depth %d)", j,
                              v->deepstack_indexes[j], v->depth);
        if (j > 0 && v->deepstack_indexes[j] <= v->deepstack_indexes[j - 1])
            return fail_field(r, s, "deepstack_visual_indexes", "entries must be strictly increasing");
    }
    /* More taps than decoder layers is allowed, as in transformers: feature j joins after layer j
     * while j < num_hidden_layers, the others reach nothing (a checkpoint cut down to a few layers). */
    if (strcmp(v->hidden_act, "gelu_pytorch_tanh") != 0)
        return fail_field(r, s, "hidden_act", "\"%s\" is not supported (expected \"gelu_pytorch_tanh\")",
                          v->hidden_act);
    return 0;
}

static int check_text(reader *r, const tdm_text_config *t) {
    const char *s = "text_config", *rw = r->rope_where;
    if (t->hidden_size % t->num_heads)
        return fail_field(r, s, "num_attention_heads", "%d does not divide hidden_size %d", t->num_heads,
                          t->hidden_size);
    if (t->num_heads % t->num_kv_heads)
        return fail_field(r, s, "num_key_value_heads", "%d does not divide num_attention_heads %d", t->num_kv_heads,
                          t->num_heads);
    if (t->head_dim % 2) return fail_field(r, s, "head_dim", "%d must be even for RoPE", t->head_dim);
    int sum = t->mrope_section[0] + t->mrope_section[1] + t->mrope_section[2];
    if (sum != t->head_dim / 2)
        return fail_field(r, rw, "mrope_section", "[%d, %d, %d] sums to %d, expected head_dim/2 = %d",
                          t->mrope_section[0], t->mrope_section[1], t->mrope_section[2], sum, t->head_dim / 2);
    /* The interleave puts h at i = 1 (mod 3), i < 3*s_h, and w at i = 2 (mod 3), i < 3*s_w:
     * the last of those indexes (3*s_h - 2, 3*s_w - 1) must exist among head_dim/2 frequencies. */
    if (3 * t->mrope_section[1] - 2 >= t->head_dim / 2 || 3 * t->mrope_section[2] - 1 >= t->head_dim / 2)
        return fail_field(r, rw, "mrope_section", "h/w sections [%d, %d] too large to interleave in %d",
                          t->mrope_section[1], t->mrope_section[2], t->head_dim / 2);
    if (strcmp(t->hidden_act, "silu") != 0)
        return fail_field(r, s, "hidden_act", "\"%s\" is not supported (expected \"silu\")", t->hidden_act);
    return 0;
}

/* Parameter count from the config, only to refuse absurd sizes early (the authoritative
 * count is the model's parameter table). Each term is below 2^36 given the field bounds,
 * so nothing here overflows int64. */
static int64_t rough_params(const tdm_model_config *c) {
    const tdm_vision_config *v = &c->vision;
    const tdm_text_config *t = &c->text;
    int64_t D = v->hidden_size, I = v->intermediate_size, M = tdm_vision_merge_dim(v), O = v->out_hidden_size;
    int64_t h = t->hidden_size, hd = t->head_dim;
    int64_t vis = (int64_t)v->depth * (4 * D * D + 2 * D * I) + (int64_t)(1 + v->n_deepstack) * (M * M + M * O) +
                  (int64_t)v->num_position_embeddings * D + (int64_t)tdm_vision_patch_dim(v) * D;
    int64_t layer = h * hd * (2 * t->num_heads + 2 * t->num_kv_heads) + 3 * h * (int64_t)t->intermediate_size;
    return vis + (int64_t)t->num_layers * layer + 2 * (int64_t)t->vocab_size * h;
}

static int check_token(reader *r, const char *sect, const char *key, int id, int vocab) {
    if (id >= vocab) return fail_field(r, sect, key, "%d is not below text_config.vocab_size %d", id, vocab);
    return 0;
}

int tdm_model_config_parse(const char *json, size_t len, const char *name, tdm_model_config *cfg, tdm_error *err) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->path, sizeof cfg->path, "%s", name);
    reader rd = {name, err, "", 0}, *r = &rd;
    tdm_json_doc *doc = tdm_json_parse(json, len, name, err);
    if (!doc) return -1;
    const tdm_json *root = tdm_json_root(doc);
    int rc = -1;
    char model_type[64];
    if (root->type != TDM_JSON_OBJECT) {
        tdm_errorf(err, "%s: expected a JSON object at the top level", name);
        goto out;
    }
    if (read_str(r, root, "", "model_type", NULL, model_type, sizeof model_type)) goto out;
    if (strcmp(model_type, "qwen3_vl") != 0) {
        fail_field(r, "", "model_type", "\"%s\" is not supported (expected \"qwen3_vl\")", model_type);
        goto out;
    }
    const tdm_json *vj = require_object(r, root, "vision_config");
    const tdm_json *tj = vj ? require_object(r, root, "text_config") : NULL;
    if (!tj) goto out;
    if (read_vision(r, vj, &cfg->vision) || read_text(r, root, tj, &cfg->text)) goto out;
    rd.vocab = cfg->text.vocab_size;

    int tie_root = 0, tie_text = 0, has_root = 0, has_text = 0;
    if (read_bool(r, root, "", "tie_word_embeddings", 0, &tie_root, &has_root) ||
        read_bool(r, tj, "text_config", "tie_word_embeddings", 0, &tie_text, &has_text))
        goto out;
    if (has_root && has_text && tie_root != tie_text) {
        fail_field(r, "", "tie_word_embeddings", "%s contradicts text_config.tie_word_embeddings %s",
                   tie_root ? "true" : "false", tie_text ? "true" : "false");
        goto out;
    }
    cfg->tie_word_embeddings = has_root ? tie_root : tie_text;

    if (OPT_INT(root, "", "image_token_id", 0, INT32_MAX, 151655, &cfg->image_token_id) ||
        OPT_INT(root, "", "video_token_id", 0, INT32_MAX, 151656, &cfg->video_token_id) ||
        OPT_INT(root, "", "vision_start_token_id", 0, INT32_MAX, 151652, &cfg->vision_start_token_id) ||
        OPT_INT(root, "", "vision_end_token_id", 0, INT32_MAX, 151653, &cfg->vision_end_token_id) ||
        read_either_int(r, root, tj, "bos_token_id", -1, 0, 0, &cfg->bos_token_id) ||
        read_either_int(r, root, tj, "eos_token_id", -1, 1, 0, &cfg->eos_token_id) ||
        read_either_int(r, root, tj, "pad_token_id", -1, 0, 1, &cfg->pad_token_id))
        goto out;
    /* Only text_config's copy becomes the embedding's padding_idx, as in transformers. */
    const tdm_json *tpad = tdm_json_get(tj, "pad_token_id");
    cfg->text.padding_idx = tpad && tpad->type != TDM_JSON_NULL ? cfg->pad_token_id : -1;

    if (check_text(r, &cfg->text) || check_vision(r, &cfg->vision, &cfg->text)) goto out;
    int V = cfg->text.vocab_size;
    if (check_token(r, "", "image_token_id", cfg->image_token_id, V) ||
        check_token(r, "", "video_token_id", cfg->video_token_id, V) ||
        check_token(r, "", "vision_start_token_id", cfg->vision_start_token_id, V) ||
        check_token(r, "", "vision_end_token_id", cfg->vision_end_token_id, V) ||
        check_token(r, "text_config", "bos_token_id", cfg->bos_token_id, V) ||
        check_token(r, "text_config", "eos_token_id", cfg->eos_token_id, V) ||
        check_token(r, "text_config", "pad_token_id", cfg->pad_token_id, V))
        goto out;
    int64_t n = rough_params(cfg);
    if (n > TDM_CONFIG_MAX_PARAMS) {
        tdm_errorf(err, "%s: the sizes describe a model of about %lld parameters, more than the limit of %lld", name,
                   (long long)n, (long long)TDM_CONFIG_MAX_PARAMS);
        goto out;
    }
    rc = 0;
out:
    tdm_json_free(doc);
    return rc;
}

int tdm_model_config_load(const char *file_or_dir, tdm_model_config *cfg, tdm_error *err) {
    char path[1024];
    struct stat st;
    if (stat(file_or_dir, &st) == 0 && S_ISDIR(st.st_mode)) {
        if ((size_t)snprintf(path, sizeof path, "%s/config.json", file_or_dir) >= sizeof path)
            return tdm_errorf(err, "%s: path too long", file_or_dir);
    } else {
        if ((size_t)snprintf(path, sizeof path, "%s", file_or_dir) >= sizeof path)
            return tdm_errorf(err, "%s: path too long", file_or_dir);
    }
    size_t len = 0;
    char *text = tdm_read_file(path, TDM_CONFIG_MAX_BYTES, &len, err);
    if (!text) return -1;
    int rc = tdm_model_config_parse(text, len, path, cfg, err);
    free(text);
    return rc;
}
