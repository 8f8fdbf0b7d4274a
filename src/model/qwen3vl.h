/* qwen3vl.h - the Qwen3-VL model: parameters, forward, hand-written backward.
 *
 * Life cycle:
 *   tdm_model *m = tdm_model_create(&cfg, &freeze, &err);   // parameter table, no storage
 *   tdm_param_table *t = tdm_model_params(m);               // owner binds data/grad pointers
 *   ... tdm_param_table_alloc(t, ...)  or the data-parallel layer's buffers ...
 *   tdm_model_init_weights(m, seed);                        // or load safetensors
 *   tdm_model_reserve(m, &limits, &err);                    // activations, allocated once
 *   tdm_model_set_hooks(m, &hooks);                         // optional (data parallel, profiler)
 *   tdm_model_forward_backward(m, batch, 1.0f, &res, &err); // per micro-batch; grads +=
 *
 * Parameters are registered in forward order with their Hugging Face names: vision
 * (patch_embed, pos_embed, blocks.i, merger, deepstack_merger_list.j), then the
 * language model (embed_tokens, layers.l, norm), then lm_head (absent when tied).
 * Frozen parts (tdm_freeze) have no gradient and no backward work: with the vision
 * tower and projector frozen, nothing of the vision backward runs; with the language
 * model frozen but the projector training, the decoder backward runs for activation
 * gradients only.
 *
 * Hooks (params.h), as this implementation calls them:
 *   forward   param_needed(i) for i = 0 .. n-1 in table order, each at the start of the
 *             layer ("unit") that reads it: vision.patch_embed, vision.block.k,
 *             vision.merger, vision.deepstack_merger.j, embed_tokens, layer.l, norm,
 *             lm_head. A text-only micro-batch announces the vision parameters anyway.
 *   backward  grad_ready(i) once per trainable tensor, right after its last kernel:
 *             lm_head (untied) after the fused loss; norm; for l = L-1 .. 0: down, gate,
 *             up, post_attention_layernorm, o_proj, q_norm, k_norm, q_proj, k_proj, v_proj,
 *             input_layernorm; embed_tokens (tied: after both the lm_head and the
 *             embedding contributions); then, when the batch has images, DeepStack
 *             mergers j = n-1 .. 0 and the final merger (fc2 w,b; fc1 w,b; norm w,b),
 *             blocks k = depth-1 .. 0 (fc2 w,b; fc1 w,b; norm2 w,b; proj w,b; qkv w,b;
 *             norm1 w,b), pos_embed, patch_embed weight, bias. A text-only batch reports
 *             the trainable vision tensors ready, in reverse table order, after
 *             embed_tokens. So the order is reverse table order layer by layer, but not
 *             exactly inside a layer: count per bucket, do not assume positions.
 *   layer_begin/layer_end(name, is_backward) around every unit (names live as long as
 *   the model), progress() after each; profiler: level 1 per unit, level 2 per kernel.
 */
#ifndef TDM_QWEN3VL_H
#define TDM_QWEN3VL_H

#include <stdint.h>

#include "core/error.h"
#include "data/batch.h"
#include "model/config.h"
#include "core/params.h"

typedef struct tdm_freeze {
    int vision;    /* model.visual.patch_embed, pos_embed, blocks.* */
    int projector; /* model.visual.merger.*, deepstack_merger_list.* */
    int llm;       /* model.language_model.* */
    int lm_head;   /* lm_head (when tied, the shared embedding follows `llm`) */
} tdm_freeze;

/* The largest micro-batch the activations must hold. */
typedef struct tdm_model_limits {
    int max_tokens;  /* tokens in one packed micro-batch */
    int max_seqs;    /* samples in one micro-batch */
    int max_patches; /* vision patches in one micro-batch (before merging) */
    int max_images;
} tdm_model_limits;

/* Activation recomputation, as Megatron's --recompute-granularity full with
 * --recompute-method and --recompute-num-layers, for the decoder layers and (when the
 * vision tower trains) the ViT blocks. A recomputed layer keeps only the input of its
 * group; its backward first runs the group's forward again from that input into shared
 * buffers. Results are bitwise those without recomputation (the same kernels on the same
 * inputs). A tower without a backward (frozen vision) keeps no block activations anyway. */
enum {
    TDM_RECOMPUTE_NONE = 0,
    TDM_RECOMPUTE_UNIFORM, /* every layer, in groups of num_layers sharing one saved input */
    TDM_RECOMPUTE_BLOCK,   /* the first num_layers layers, each its own group */
};
typedef struct tdm_recompute {
    int method;     /* TDM_RECOMPUTE_* */
    int num_layers; /* >= 1 with a method; larger than a tower's depth means all of it */
} tdm_recompute;

typedef struct tdm_fb_result {
    double loss_sum;  /* sum over counted tokens of -log p(target) */
    int64_t n_tokens; /* counted tokens (targets != -100) */
} tdm_fb_result;

typedef struct tdm_model tdm_model;

tdm_model *tdm_model_create(const tdm_model_config *cfg, const tdm_freeze *freeze, tdm_error *err);
void tdm_model_free(tdm_model *m);
tdm_param_table *tdm_model_params(tdm_model *m);
const tdm_model_config *tdm_model_get_config(const tdm_model *m);
/* The layers the profiler names (forward order; a parameter's `unit` indexes them). */
int tdm_model_n_units(const tdm_model *m);
const char *tdm_model_unit_name(const tdm_model *m, int unit);

/* Deterministic initialisation from the seed (normal std 0.02 for matrices and
 * embeddings, ones for norm weights, zeros for biases); a tensor's values depend only
 * on (seed, its name), so every rank and every dp size gets the same weights. */
void tdm_model_init_weights(tdm_model *m, uint64_t seed);

/* Allocates activations and workspaces for the limits (once; reuse for every step). */
int tdm_model_reserve(tdm_model *m, const tdm_model_limits *limits, tdm_error *err);
int64_t tdm_model_activation_bytes(const tdm_model *m);

/* bfloat16 weights (a parameter whose `bits` are set instead of `data`, the trainer's --bf16): the
 * model widens one unit's (layer's) weights at a time into an fp32 scratch, allocated by
 * tdm_model_reserve, before its kernels read them; the results are those of fp32 storage holding
 * the same values. The scratch's bytes for table t: 4 x the elements of its largest unit (layer),
 * counting the tensors stored as bfloat16 (bits_only), or all of them (a plan for --bf16). */
int64_t tdm_model_wide_scratch_bytes(const tdm_param_table *t, int bits_only);
/* Bytes of the scratch this model holds, 0 without bfloat16 weights. */
int64_t tdm_model_wide_bytes(const tdm_model *m);
/* Whoever changes bfloat16 weights between forwards outside the trainer's step says so (each
 * forward starts afresh anyway). */
void tdm_model_weights_changed(tdm_model *m);
/* Megatron's --recompute-granularity (NULL or "": none; "full"; "selective", which recomputes
 * nothing here: flash attention keeps no scores), --recompute-method ("uniform" | "block") and
 * --recompute-num-layers (0: not given) as *rc, under Megatron's rules (full needs the other two,
 * they are refused without it; num_layers at most the decoder's layers of cfg, when cfg is given). */
int tdm_recompute_from_flags(const char *granularity, const char *method, int num_layers, const tdm_model_config *cfg,
                             tdm_recompute *rc, tdm_error *err);
/* Recomputation from the next tdm_model_reserve on (NULL or method NONE: keep everything). */
void tdm_model_set_recompute(tdm_model *m, const tdm_recompute *rc);
/* The bytes tdm_model_reserve would allocate for this config and these limits, computed
 * without allocating anything (for memory plans of models too big to build here), under
 * recomputation `rc` and freezing `freeze` (either NULL: none). */
int64_t tdm_model_activation_bytes_for(const tdm_model_config *cfg, const tdm_model_limits *limits,
                                       const tdm_recompute *rc, const tdm_freeze *freeze);

/* The last decoder layer on the rows whose target counts only (default on): the same loss
 * and gradients, for less work (decoder.c explains). Off: every row, as PyTorch models do. */
void tdm_model_set_prune_last_layer(tdm_model *m, int on);

void tdm_model_set_hooks(tdm_model *m, const tdm_param_hooks *hooks);

/* Forward and backward of one micro-batch. Parameter gradients are ACCUMULATED
 * (+= grad_scale * d(loss_sum)/dparam), so the caller zeroes them once per step.
 * Returns the summed loss and the token count (not divided). */
int tdm_model_forward_backward(tdm_model *m, const tdm_batch *b, float grad_scale, tdm_fb_result *res, tdm_error *err);

/* Forward only. Returns the loss sum/count like above and, when logits != NULL, the
 * logits of the rows listed in `rows` (n_rows of them) into logits[n_rows, vocab]. */
int tdm_model_forward(tdm_model *m, const tdm_batch *b, const int32_t *rows, int n_rows, float *logits,
                      tdm_fb_result *res, tdm_error *err);

/* Generation with a KV cache. After tdm_model_forward on a batch of ONE sequence (the prompt,
 * n tokens), each call runs one more text token at 3-axis position `pos` through the decoder,
 * attending to the keys and values of every earlier row (kept in the reserved activations:
 * reserve max_tokens >= the prompt plus the tokens to generate), and writes its logits
 * [vocab]. Any other forward or backward ends the sequence. Hooks are not called. Fails on a
 * vision placeholder token, past the reserve, or without a one-sequence forward before. */
int tdm_model_decode(tdm_model *m, int32_t token, const int32_t pos[3], float *logits, tdm_error *err);

/* Model FLOPs of one forward+backward of this batch, counted from the shapes: every
 * matmul (2*m*n*k) and attention (QK^T, PV; 2x that again in backward) of the model:
 * frozen weights get no weight-gradient product, and an input gradient is counted only
 * where something upstream needs it; the lm_head only over counted rows (the loss is
 * defined on them). The last decoder layer counts every row even where it runs on the
 * loss's rows only (tdm_model_set_prune_last_layer): model FLOPs, as MFU counts them, so
 * the saving shows as a higher rate and the count does not depend on the setting.
 * Elementwise work is not counted. */
double tdm_model_flops(const tdm_model *m, const tdm_batch *b);

#endif
