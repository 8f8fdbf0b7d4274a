/* kernels.h - the numerical kernels the model is made of (fp32, CPU).
 *
 * Conventions (every kernel):
 * - Row-major. A "row" is one token. `n` is the number of rows.
 * - Linear weights are stored as PyTorch does, W[out, in], and y = x W^T + b.
 * - Backward kernels OVERWRITE input gradients (dx, dq, ...) and ACCUMULATE (+=)
 *   parameter gradients (dw, db), so micro-batches accumulate into one gradient
 *   buffer. Any parameter-gradient pointer may be NULL: that parameter is frozen and
 *   no work is done for it. An input-gradient pointer may be NULL when no one needs it.
 * - Kernels are single-threaded except the BLAS calls, whose thread count the trainer
 *   sets once at start-up. They never allocate: scratch memory is passed in, sized by
 *   the matching *_workspace_floats() function.
 * - Kernels know nothing of the model: shapes come in as arguments.
 * - Elementwise and norm backwards may be called in place (dx == dy).
 */
#ifndef TDM_KERNELS_H
#define TDM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* ---- Linear (CBLAS sgemm) ------------------------------------------------------- */
/* y[n,out] = x[n,in] W[out,in]^T + b[out]   (b may be NULL) */
void tdm_linear_forward(float *y, const float *x, const float *w, const float *b, int n, int in, int out);
/* dx[n,in] = dy W  (overwrite);  dw[out,in] += dy^T x;  db[out] += sum_rows dy */
void tdm_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int n,
                         int in, int out);

/* ---- LayerNorm (with bias, biased variance) -------------------------------------- */
/* y = (x - mean) * rstd * w + b per row of d; saves mean[n], rstd[n] for backward. */
void tdm_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b, int n,
                           int d, float eps);
void tdm_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *mean,
                            const float *rstd, const float *w, int n, int d);

/* ---- RMSNorm (fused: one pass forward keeping rstd, one pass backward) ------------ */
/* y = x * rstd * w per row of d. For q_norm/k_norm call with n = tokens*heads, d = head_dim. */
void tdm_rmsnorm_forward(float *y, float *rstd, const float *x, const float *w, int n, int d, float eps);
void tdm_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *rstd, const float *w,
                          int n, int d);

/* ---- Activations (elementwise over n values) -------------------------------------- */
void tdm_gelu_tanh_forward(float *y, const float *x, int64_t n);
void tdm_gelu_tanh_backward(float *dx, const float *dy, const float *x, int64_t n);
void tdm_gelu_erf_forward(float *y, const float *x, int64_t n);
void tdm_gelu_erf_backward(float *dx, const float *dy, const float *x, int64_t n);
/* SwiGLU fused: out = silu(gate) * up, all [n, d]. */
void tdm_swiglu_forward(float *out, const float *gate, const float *up, int n, int d);
/* dgate = dout * up * silu'(gate);  dup = dout * silu(gate)   (both overwrite) */
void tdm_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int n, int d);

/* ---- Rotary embedding, rotate-half form, driven by a per-token angle table --------- */
/* x [n, heads, hd] in place. cos, sin [n, hd/2]: for pair (i, i+hd/2) of every head
 *   y_i = x_i cos_i - x_{i+hd/2} sin_i,   y_{i+hd/2} = x_{i+hd/2} cos_i + x_i sin_i.
 * The model builds the tables (1D text RoPE, ViT 2D RoPE, interleaved M-RoPE). */
void tdm_rope_forward(float *x, const float *cos, const float *sin, int n, int heads, int hd);
/* The backward is the rotation by -theta, in place on dx. */
void tdm_rope_backward(float *dx, const float *cos, const float *sin, int n, int heads, int hd);

/* ---- OpenBLAS's kernel set (blas_core.c) ------------------------------------------ */
/* The set OpenBLAS should run on this CPU when its own choice is a generic one (it does not
 * know the CPU's model), else NULL. */
const char *tdm_blas_better_core(void);
/* Called first in main: when the above names a set and OPENBLAS_CORETYPE is unset, sets it
 * and runs the program again (execv; returns when nothing was to be done or exec failed). */
void tdm_blas_select_core(char **argv);
/* A log line when tandem chose the set (1), else 0. */
int tdm_blas_core_note(char *buf, size_t n);
/* The kernel set in use and who chose it: "SkylakeX (OpenBLAS's choice)", "Haswell
 * (OPENBLAS_CORETYPE=Haswell)". Results of a matrix product depend on it. */
void tdm_blas_describe(char *buf, size_t n);
/* The sgemm ceiling: GFLOP/s of the fastest of repeated n x n x n cblas_sgemm calls over about `seconds`
 * (at least three calls), with the BLAS threads as configured; 0 when the buffers cannot be had. */
double tdm_blas_sgemm_gflops(int n, double seconds);

/* ---- Attention, flash-style ------------------------------------------------------- */
/* q [n, nh, hd], k and v [n, nkv, hd] (nh % nkv == 0, GQA: query head h reads kv head
 * h / (nh/nkv)), out [n, nh, hd], lse [n, nh] (log-sum-exp of each row's scores, saved
 * for backward). Tokens are packed segments: segment s is rows cu_seqlens[s] ..
 * cu_seqlens[s+1]-1 and attends only inside itself; causal = 1 for the decoder, 0 for
 * the vision encoder. scale is usually 1/sqrt(hd). Computed in tiles with an online
 * softmax: no n x n score matrix ever exists. lse may be NULL when no backward follows
 * (generation). Rows outside cu_seqlens[0] .. cu_seqlens[nseg]-1 are not touched.
 * The workspace holds one segment's packed keys and values plus one tile's scratch:
 * about 4*(hd+16)*n + 128*(3*hd + 320) floats when nh/nkv <= 8; pass n >= cu_seqlens[nseg]. The same
 * workspace serves forward and backward. */
int64_t tdm_attention_workspace_floats(int n, int nh, int nkv, int hd);
void tdm_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                           const int32_t *cu_seqlens, int nseg, int nh, int nkv, int hd, int causal, float scale,
                           float *workspace);
/* dq, dk, dv overwrite (dk/dv summed over the query heads that share a kv head).
 * Recomputes scores per tile from q, k and the saved lse. */
void tdm_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                            const float *v, const float *out, const float *lse, const int32_t *cu_seqlens, int nseg,
                            int nh, int nkv, int hd, int causal, float scale, float *workspace);
/* The same with the queries a sorted subset of the key rows, packed: q, out, lse and
 * dout hold nq = cu_q[nseg] rows, query i stands at key row q_pos[i], and segment s owns
 * queries cu_q[s] .. cu_q[s+1]-1 (their q_pos inside the segment's keys). k, v, dk, dv
 * keep every key row; dk and dv are overwritten on all rows of cu_seqlens, so rows no
 * query sees get zero. The model's last decoder layer computes only the rows the loss reads. */
void tdm_attention_forward_rows(float *out, float *lse, const float *q, const float *k, const float *v,
                                const int32_t *cu_seqlens, const int32_t *cu_q, const int32_t *q_pos, int nseg, int nh,
                                int nkv, int hd, int causal, float scale, float *workspace);
void tdm_attention_backward_rows(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                                 const float *v, const float *out, const float *lse, const int32_t *cu_seqlens,
                                 const int32_t *cu_q, const int32_t *q_pos, int nseg, int nh, int nkv, int hd,
                                 int causal, float scale, float *workspace);

/* ---- Embedding -------------------------------------------------------------------- */
/* out[i] = table[ids[i]] for i < n; rows with ids[i] < 0 are left untouched (the model
 * fills image positions from the vision merger). */
void tdm_embedding_forward(float *out, const float *table, const int32_t *ids, int n, int d);
/* dtable[ids[i]] += dout[i] (scatter-add), rows with ids[i] < 0 skipped. */
void tdm_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int n, int d);

/* ---- Cross-entropy fused with the output projection -------------------------------- */
/* logits = h[n,d] W[v,d]^T computed for pieces of up to min(chunk, 256) counted rows
 * (gathered across ignored rows) into the workspace: the n x v matrix never exists.
 * Rows whose target is -100 are skipped entirely.
 * Returns the SUM of -log softmax(logits)[target] over counted rows (in double) and
 * writes the number of counted rows to *count. When dh != NULL or dw != NULL it also
 * does the backward of grad_scale * sum: dh[n,d] overwritten (zero on ignored rows),
 * dw[v,d] accumulated. Targets must be < v; every negative target counts as ignored.
 * Each chunk streams W (and dW) through the cache three times, so take chunk as large as
 * the workspace allows (128-256 rows reach sgemm speed; 64 is about 10% slower). */
int64_t tdm_xent_workspace_floats(int chunk, int v, int d);
double tdm_xent_fused(float *dh, float *dw, const float *h, const float *w, const int32_t *targets, int n, int d, int v,
                      float grad_scale, int chunk, float *workspace, int64_t *count);

/* ---- AdamW (PyTorch semantics: decoupled weight decay, bias correction) ----------- */
/* For i < n: g = grad[i] * grad_scale; p *= 1 - lr*wd; m = b1 m + (1-b1) g;
 * v = b2 v + (1-b2) g^2; p -= lr/(1-b1^step) * m / (sqrt(v)/sqrt(1-b2^step) + eps).
 * step is 1-based. lr, betas and weight_decay are read as the shortest decimal that rounds
 * to the float given (0.9f -> 0.9), and 1 - beta, 1 - lr*wd and the bias corrections are
 * formed in double from it, as PyTorch does with Python floats: the result agrees with
 * torch.optim.AdamW to a few ulps (tests/kernels/adamw_golden.h). */
void tdm_adamw_step(float *p, const float *grad, float *m, float *v, int64_t n, float lr, float beta1, float beta2,
                    float eps, float weight_decay, int64_t step, float grad_scale);

/* ---- elementwise -------------------------------------------------------------------- */
/* y[i] += x[i] for i < n (the residual adds); the arrays may not overlap unless equal. */
void tdm_add_into(float *y, const float *x, int64_t n);

/* bfloat16 parameters (--bf16): for i < n, y[i] = x[i] rounded to the nearest bfloat16 (ties to
 * even; a value above the largest bfloat16 becomes infinity; a NaN stays a quiet NaN), stored as
 * fp32, and bits[i] its 16 bits (the upper half of y[i]'s) when bits != NULL. y may be x, or NULL
 * when only the bits are wanted (a BF16 file). The one rounding rule of the project. */
void tdm_round_to_bf16(float *y, uint16_t *bits, const float *x, int64_t n);

/* y[i] = the bfloat16 whose bits are bits[i], as fp32 (exact), for i < n. The arrays may not overlap. */
void tdm_widen_bf16(float *y, const uint16_t *bits, int64_t n);

/* ---- checks ------------------------------------------------------------------------ */
/* 1 when every x[i], i < n, is finite (no NaN, no infinity), else 0. */
int tdm_all_finite(const float *x, int64_t n);

#endif
