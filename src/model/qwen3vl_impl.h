/* qwen3vl_impl.h - the inside of tdm_model, shared by the files of src/model that
 * compute it (qwen3vl.c: life cycle and the step driver; vision.c: the ViT and its
 * mergers; decoder.c: the text decoder and the loss; rope_tables.c: position tables;
 * activations.c: the activation layout). Not a public interface.
 *
 * Names used in shape comments:
 *   N  vision patches in the micro-batch (before merging)   D  vision width
 *   M  merged rows = N / sm^2 = image-pad tokens             H4 sm^2 * D (merger width)
 *   Iv vision MLP width   O  merger output width (= h)       hv vision head dim
 *   T  tokens in the micro-batch   h  text width   I  text MLP width
 *   nh, nkv, hd  query heads, kv heads, text head dim        V  vocabulary
 */
#ifndef TDM_QWEN3VL_IMPL_H
#define TDM_QWEN3VL_IMPL_H

#include <stdint.h>

#include "model/qwen3vl.h"

/* Indices into the parameter table, per layer. */
typedef struct vis_block_ix {
    int norm1_w, norm1_b, norm2_w, norm2_b, qkv_w, qkv_b, proj_w, proj_b, fc1_w, fc1_b, fc2_w, fc2_b;
} vis_block_ix;

typedef struct merger_ix {
    int norm_w, norm_b, fc1_w, fc1_b, fc2_w, fc2_b;
} merger_ix;

typedef struct dec_layer_ix {
    int in_norm, q, k, v, o, q_norm, k_norm, post_norm, gate, up, down;
} dec_layer_ix;

/* Saved activations of one ViT block (everything its backward reads). */
typedef struct vis_block_act {
    float *x;                         /* [N,D] block input (the previous block's output) */
    float *ln1, *ln1_mean, *ln1_rstd; /* [N,D], [N], [N] */
    float *q, *k, *v;                 /* [N,D] each = [N,heads,hv]; q and k after RoPE */
    float *att, *lse;                 /* [N,D] attention output before proj, [N,heads] */
    float *h;                         /* [N,D] after the attention residual */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fc1, *act; /* [N,Iv] before and after GELU-tanh */
} vis_block_act;

/* Saved activations of one patch merger. The final merger normalises per patch
 * (ln [N,D], mean/rstd [N]); a DeepStack merger after the 2x2 concatenation
 * (ln [M,H4], mean/rstd [M]). Either way ln is [M,H4] as fc1 reads it. */
typedef struct merger_act {
    float *ln, *mean, *rstd;
    float *fc1, *act; /* [M,H4] before and after GELU-erf */
    float *out;       /* [M,O] */
} merger_act;

/* Saved activations of one decoder layer. */
typedef struct dec_layer_act {
    float *x;                  /* [T,h] layer input (previous output + DeepStack feature) */
    float *ln1, *ln1_rstd;     /* [T,h], [T] */
    float *q_raw, *q_rstd, *q; /* [T,nh*hd] before q_norm, [T*nh], after q_norm and RoPE */
    float *k_raw, *k_rstd, *k; /* [T,nkv*hd], [T*nkv], [T,nkv*hd] */
    float *v;                  /* [T,nkv*hd] */
    float *att, *lse;          /* [T,nh*hd], [T,nh] */
    float *h;                  /* [T,h] after the attention residual */
    float *ln2, *ln2_rstd;
    float *gate, *up, *act; /* [T,I] */
} dec_layer_act;

typedef struct model_acts {
    /* vision */
    float *vis_rope_cos, *vis_rope_sin; /* [N,hv/2] */
    int32_t *pos_idx;                   /* [N,4] the four table rows each patch interpolates */
    float *pos_w;                       /* [N,4] their bilinear weights */
    int32_t *vis_cu;                    /* [N/sm^2 + 2] attention segments (one per image frame) */
    vis_block_act *blk;                 /* [depth] */
    float *vis_out;                     /* [N,D] last block output */
    float *qkv_tmp;                     /* [N,3D] */
    merger_act merger;
    merger_act *ds; /* [n_deepstack] */
    /* text */
    float *txt_rope_cos, *txt_rope_sin; /* [T,hd/2] */
    int32_t *embed_ids;                 /* [T] input ids with -1 at image-pad rows */
    int32_t *image_rows;                /* [T] token rows of the image pads, in order (M used) */
    dec_layer_act *lay;                 /* [num_layers] */
    float *x_final;                     /* [T,h] last layer output */
    float *fin, *fin_rstd;              /* [T,h] final norm output, [T] */
    /* backward scratch: vision */
    float *vg, *vg2, *vg3;          /* [N,D] */
    float *vdI1, *vdI2;             /* [N,Iv] */
    float *vdq, *vdk, *vdv, *vdatt; /* [N,D] */
    float *vdqkv;                   /* [N,3D] */
    float *mdln, *mdfc1, *mdact;    /* [M,H4] */
    float *dmerge;                  /* [M,O] gradient of the final merger output */
    float *dfeat;                   /* [n_deepstack,M,O] gradients of the DeepStack features */
    float *dtap;                    /* [n_deepstack,N,D] gradients into the tapped block outputs */
    /* backward scratch: text */
    float *g, *gt, *gt2;    /* [T,h] */
    float *dI1, *dI2, *dI3; /* [T,I] */
    float *datt, *dq, *dqr; /* [T,nh*hd] */
    float *dk, *dkr, *dv;   /* [T,nkv*hd] */
    float *dh;              /* [T,h] gradient of the final norm output (from the loss) */
    /* The last decoder layer on the loss's rows only (decoder.c, "pruned"): when set for
     * the micro-batch, that layer's q, attention output and everything after it, x_final,
     * fin and dh hold n_keep packed rows, keep_rows[i] being row i's token row. */
    int pruned, n_keep;
    int32_t *keep_rows;         /* [T] token rows whose target counts, ascending */
    int32_t *keep_cu;           /* [max_seqs+1] each sample's range of keep_rows */
    int32_t *keep_targets;      /* [T] their targets */
    float *keep_cos, *keep_sin; /* [T,hd/2] their RoPE angles */
    /* recomputation: where a group's last layer writes its (unused) output again */
    float *rc_out;  /* [T,h] */
    float *vrc_out; /* [N,D] */
    /* kernel workspaces */
    float *attn_ws;
    float *xent_ws;
    int xent_chunk;
} model_acts;

#define UNIT_NAME_MAX 48

struct tdm_model {
    tdm_model_config cfg;
    tdm_freeze freeze;
    tdm_param_table params;
    tdm_param_hooks hooks;

    /* parameter indices */
    int patch_w, patch_b, pos_embed;
    vis_block_ix *vb; /* [depth] */
    merger_ix merger;
    merger_ix ds[TDM_MAX_DEEPSTACK];
    int embed;
    dec_layer_ix *dl; /* [num_layers] */
    int final_norm;
    int lm_head; /* == embed when tied */

    /* units (layers in forward order): the profiler's names and each parameter's unit */
    int n_units;
    char (*unit_name)[UNIT_NAME_MAX];
    int u_vis_embed, u_block0, u_merger, u_ds0, u_embed, u_layer0, u_norm, u_head;

    /* trainability of the parts (from tdm_freeze and tying) */
    int train_vision, train_projector, train_llm, train_head;
    /* run the last decoder layer on the loss's rows only (tdm_model_set_prune_last_layer) */
    int prune_last;

    /* activations (after tdm_model_reserve) */
    tdm_recompute rc;
    tdm_model_limits limits;
    int reserved;
    int decode_len; /* rows of the decoder activations tdm_model_decode may continue (0: none) */
    void *act_block;
    int64_t act_bytes;
    /* the unit whose bfloat16 weights `wide` holds widened (-1: none); wide_off[param] is where */
    float *wide;
    int64_t wide_bytes;
    int64_t *wide_off;
    int wide_unit;
    model_acts a;
};

/* Derived sizes. */
static inline int tdm_merge_rows(const tdm_model_config *c) {
    return c->vision.spatial_merge_size * c->vision.spatial_merge_size;
}

/* activations.c: lays the activations of `c` for `lim` over `base` (NULL: only count),
 * keeping what recomputation `rc` (NULL: none) and a vision tower with or without a
 * backward need. Returns the bytes needed. */
int64_t tdm_model_layout_acts(const tdm_model_config *c, const tdm_model_limits *lim, const tdm_recompute *rc,
                              int vision_backward, char *base, model_acts *a);

/* Layer l of a tower of n layers under recomputation rc: 0 when its activations are kept;
 * else 1, with [*g0, *g1) its group (the layers recomputed together from the saved input
 * of layer *g0). Uniform: every layer, groups of num_layers; block: the first num_layers
 * layers, one per group (Megatron's recompute methods). */
static inline int tdm_recompute_group(const tdm_recompute *rc, int n, int l, int *g0, int *g1) {
    if (!rc || rc->method == TDM_RECOMPUTE_NONE || rc->num_layers < 1) return 0;
    int k = rc->num_layers < n ? rc->num_layers : n;
    if (rc->method == TDM_RECOMPUTE_UNIFORM) {
        *g0 = l / k * k;
        *g1 = *g0 + k < n ? *g0 + k : n;
        return 1;
    }
    if (l >= k) return 0;
    *g0 = l;
    *g1 = l + 1;
    return 1;
}

/* The shared activation sets a tower of n layers needs under rc (the largest group). */
static inline int tdm_recompute_slots(const tdm_recompute *rc, int n) {
    if (!rc || rc->method == TDM_RECOMPUTE_NONE || rc->num_layers < 1 || n < 1) return 0;
    if (rc->method == TDM_RECOMPUTE_BLOCK) return 1;
    return rc->num_layers < n ? rc->num_layers : n;
}

/* rope_tables.c */
/* Interleaved (or chunked) M-RoPE angle tables cos/sin [T, hd/2] from position_ids [3,T]. */
void tdm_mrope_tables(float *cos_t, float *sin_t, const int32_t *position_ids, int T, const tdm_text_config *tc);
/* ViT 2D RoPE tables [N, hv/2] and bilinear position-table taps [N,4] for the images of
 * a batch (block order), plus the attention segments (one per image frame). Returns
 * the number of segments. */
int tdm_vision_tables(float *cos_t, float *sin_t, int32_t *pos_idx, float *pos_w, int32_t *cu, const int32_t *grid_thw,
                      int n_images, const tdm_vision_config *vc);

/* Per-unit hook and profiler plumbing (qwen3vl.c). */
void tdm_model_unit_begin(tdm_model *m, int unit, int backward, uint64_t *t0);
void tdm_model_unit_end(tdm_model *m, int unit, int backward, uint64_t t0);
void tdm_model_grad_ready(tdm_model *m, int param);
/* grad pointer of a parameter when it is trainable, else NULL (no work). */
float *tdm_model_gradp(tdm_model *m, int param);
/* The fp32 weights of a parameter. Stored as bfloat16 bits (--bf16), they are widened into a
 * scratch that holds one unit (layer) at a time: the pointer stays valid while the caller reads
 * parameters of the same unit only, as every layer function does. */
const float *tdm_model__wide(const tdm_model *m, int param);
static inline const float *tdm_model_w(const tdm_model *m, int param) {
    const tdm_param *p = &m->params.p[param];
    return p->bits ? tdm_model__wide(m, param) : p->data;
}

/* vision.c */
void tdm_vision_forward(tdm_model *m, const tdm_batch *b, int nseg);
/* dmerge [M,O] and dfeat [n_ds,M,O] must be filled. */
void tdm_vision_backward(tdm_model *m, const tdm_batch *b, int nseg);

/* decoder.c */
/* prune: the last layer may run on the rows the loss reads only (when m->prune_last and
 * the batch allows; a->pruned says whether it did). */
void tdm_decoder_forward(tdm_model *m, const tdm_batch *b, int n_image_rows, int prune);
/* Backward of the decoder from m->a.dh; fills dmerge/dfeat when need_vision. */
void tdm_decoder_backward(tdm_model *m, const tdm_batch *b, int n_image_rows, int need_vision);

/* Level-2 profiler span around one kernel call. */
#define TDM_KERNEL(name, call)                                                                                         \
    do {                                                                                                               \
        uint64_t k_t0_ = tdm_prof_on(2) ? tdm_now_ns() : 0;                                                            \
        call;                                                                                                          \
        if (tdm_prof_on(2)) tdm_prof_complete(TDM_PROF_KERNEL, 2, name, k_t0_, tdm_now_ns(), -1);                      \
    } while (0)

#endif
