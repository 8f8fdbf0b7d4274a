/* optimizer.h - AdamW over the data-parallel buffers: the distributed optimizer
 * (ZeRO-1: each rank updates only its shards) or the plain one (every rank updates
 * everything, identically), gradient norm and clipping, parameter all-gather, and the
 * optimizer state for checkpoints.
 *
 * Optimizer state (fp32 m and v) covers exactly this rank's owned elements: for
 * bucket b the range tdm_ddp_layout_shard(layout, b, rank) (the whole buffer without
 * the distributed optimizer), concatenated in bucket order. Shards cut across
 * parameters, so for checkpoints the state is described as pieces: runs of elements
 * of one parameter. A checkpoint that stores every rank's pieces can be loaded at any
 * dp by feeding every stored piece to tdm_ddp_opt_load_piece on every rank: each
 * rank keeps the intersection with what it owns.
 */
#ifndef TDM_DIST_OPTIMIZER_H
#define TDM_DIST_OPTIMIZER_H

#include <stdint.h>

#include "core/error.h"
#include "distributed/ddp.h"

typedef struct tdm_adamw_config {
    float lr;
    float beta1;        /* --adam-beta1 0.9 */
    float beta2;        /* --adam-beta2 0.999 */
    float eps;          /* --adam-eps 1e-8 */
    float weight_decay; /* --weight-decay 0.01; 0 for no_decay parameters (biases, 1-D) */
    float clip_grad;    /* --clip-grad 1.0; 0 disables clipping */
} tdm_adamw_config;

/* Collective; call after tdm_ddp_finish_grad_sync succeeded. Gradients are taken as
 * grad * grad_scale (grad_scale = 1/global tokens). Computes the global norm of the
 * scaled gradient (each element counted once: owned shards summed in double, combined
 * across ranks in rank order; plain: the whole reduced buffer), writes it to
 * *grad_norm (before clipping), clips by clip_grad/(norm + 1e-6) when that is < 1,
 * runs AdamW on the owned elements (weight decay 0 for no_decay parameters; padding
 * untouched), then all-gathers each bucket's parameter shards (synchronously, timed as
 * params-all-gather; or, with overlap_param_gather, in the background: forward's
 * param_needed waits per bucket). Advances the Adam step and the iteration. Timed as
 * optimizer. Fails on every rank when the norm is not finite. */
int tdm_ddp_optimizer_step(tdm_ddp *ddp, const tdm_adamw_config *hp, float grad_scale, double *grad_norm,
                           tdm_error *err);

/* Collective (distributed optimizer; local otherwise). After a step: the L2 norm of the trained
 * parameters (Megatron's "params norm") and the number of gradient elements equal to zero
 * (its "num zeros": the reduced gradient, before clipping), each element counted once across
 * ranks, padding excluded. Either output may be NULL. */
int tdm_ddp_param_stats(tdm_ddp *ddp, double *params_norm, double *grad_zeros, tdm_error *err);

/* ---- optimizer state, for checkpoints ------------------------------------------------ */

/* A run of one parameter's elements in this rank's state: elements
 * [param_offset, param_offset + count) of table parameter `param` are m[state_offset ..]
 * and v[state_offset ..]. */
typedef struct tdm_ddp_opt_piece {
    int param;
    int64_t param_offset;
    int64_t count;
    int64_t state_offset;
} tdm_ddp_opt_piece;

/* Number of pieces of this rank's state; fills out[0 .. min(n, cap)) when out != NULL. */
int tdm_ddp_opt_pieces(const tdm_ddp *ddp, tdm_ddp_opt_piece *out, int cap);
/* This rank's state arrays and their length (elements, padding included). */
float *tdm_ddp_opt_m(tdm_ddp *ddp);
float *tdm_ddp_opt_v(tdm_ddp *ddp);
/* bf16_params: the fp32 main parameters of the same elements (Megatron's "fp32_param"); NULL in
 * fp32, where the parameter buffer is the main copy. */
float *tdm_ddp_opt_main(tdm_ddp *ddp);
int64_t tdm_ddp_opt_numel(const tdm_ddp *ddp);
/* Adam's step count (bias correction); 0 before the first step. */
int64_t tdm_ddp_opt_step_count(const tdm_ddp *ddp);
void tdm_ddp_opt_set_step_count(tdm_ddp *ddp, int64_t step);

/* Copies the part of a stored piece (m and v of elements [param_offset, param_offset +
 * count) of parameter `param`, by table index) that this rank owns into its state (with
 * bf16_params the main copy is not part of it: load it through tdm_ddp_opt_main).
 * Fails when the parameter is unknown, frozen, or the range exceeds its numel. */
int tdm_ddp_opt_load_piece(tdm_ddp *ddp, int param, int64_t param_offset, int64_t count, const float *m, const float *v,
                           tdm_error *err);

#endif
