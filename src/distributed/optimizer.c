/* optimizer.c - gradient norm, clipping, AdamW on the owned shards, and the optimizer
 * state for checkpoints (see optimizer.h). The parameter all-gathers that follow the
 * step are posted in param_gather.c. */
#include "distributed/optimizer.h"

#include <math.h>
#include <string.h>

#include "distributed/ddp_internal.h"
#include "kernels/kernels.h"

/* Sum of squares of the owned gradient elements, in double. Distributed: this rank's
 * shard of every bucket; the shards partition the buffer, so combining them across
 * ranks counts every element once. Plain: every rank holds the whole reduced
 * gradient, so the whole buffer is the global sum and no communication is needed. */
static double owned_sumsq(const tdm_ddp *ddp) {
    /* four partial sums in a fixed order: the same bits for the same data, and
     * independent chains the CPU can overlap (no -ffast-math) */
    double s4[4] = {0, 0, 0, 0};
    for (int b = 0; b < ddp->L.n_buckets; b++) {
        int64_t s, e;
        tdm_ddp_layout_shard(&ddp->L, b, ddp->rank, &s, &e);
        const float *g = ddp->grads;
        int64_t k = s;
        for (; k + 4 <= e; k += 4)
            for (int j = 0; j < 4; j++) s4[j] += (double)g[k + j] * (double)g[k + j];
        for (; k < e; k++) s4[0] += (double)g[k] * (double)g[k];
    }
    return (s4[0] + s4[1]) + (s4[2] + s4[3]);
}

/* The elements of parameter i inside this rank's range [s, e) of its bucket, as the
 * buffer range [*lo, *hi): shards cut across parameter boundaries. 0 when there are none. */
static int owned_part(const tdm_ddp *ddp, int i, int64_t s, int64_t e, int64_t *lo, int64_t *hi) {
    int64_t begin = ddp->L.offset[i], end = begin + ddp->t->p[i].numel;
    *lo = begin > s ? begin : s;
    *hi = end < e ? end : e;
    return *lo < *hi;
}

int tdm_ddp_optimizer_step(tdm_ddp *ddp, const tdm_adamw_config *hp, float grad_scale, double *grad_norm,
                           tdm_error *err) {
    if (!ddp->grads_synced)
        return tdm_errorf(err,
                          "optimizer step in iteration %lld: gradients not synchronised (call "
                          "tdm_ddp_finish_grad_sync first)",
                          (long long)ddp->iteration);
    tdm_timers_start(&ddp->timers, TDM_TIMER_OPTIMIZER);
    const tdm_ddp_layout *L = &ddp->L;

    double ss = owned_sumsq(ddp);
    if (L->distributed) {
        /* all-gather + local sum in rank order: the same bits on every rank, whatever
         * reduction algorithm the MPI library picks. */
        if (tdm_ddp_sum_across_ranks(ddp, &ss, 1, err) != 0) return -1;
    }
    double norm = sqrt(ss) * fabs((double)grad_scale);
    if (grad_norm) *grad_norm = norm;
    if (!isfinite(norm)) {
        tdm_timers_stop(&ddp->timers, TDM_TIMER_OPTIMIZER);
        return tdm_errorf(err, "iteration %lld: gradient norm is %g (NaN or Inf); stopping", (long long)ddp->iteration,
                          norm);
    }
    double scale = grad_scale;
    if (hp->clip_grad > 0) {
        double coef = hp->clip_grad / (norm + 1e-6);
        if (coef < 1.0) scale *= coef;
    }
    ddp->opt_step++;
    /* Walk the intersection of each owned range with each parameter: shards cut across
     * parameter boundaries, and weight decay is per parameter. Padding is skipped. */
    for (int b = 0; b < L->n_buckets; b++) {
        const tdm_ddp_bucket *bk = &L->buckets[b];
        int64_t s, e;
        tdm_ddp_layout_shard(L, b, ddp->rank, &s, &e);
        for (int k = bk->first; k < bk->first + bk->count; k++) {
            int i = L->order[k];
            const tdm_param *p = &ddp->t->p[i];
            int64_t lo, hi;
            if (!owned_part(ddp, i, s, e, &lo, &hi)) continue;
            int64_t st = ddp->state_offset[b] + (lo - s);
            /* bfloat16 parameters: AdamW updates the fp32 main copy, and the parameters (and the bits
             * the all-gather moves) take its rounded values */
            float *w = ddp->main ? ddp->main + st : ddp->params + lo;
            tdm_adamw_step(w, ddp->grads + lo, ddp->m + st, ddp->v + st, hi - lo, hp->lr * p->lr_mult, hp->beta1,
                           hp->beta2, hp->eps, p->no_decay ? 0.0f : hp->weight_decay, ddp->opt_step, (float)scale);
            if (ddp->main)
                tdm_round_to_bf16(ddp->params ? ddp->params + lo : NULL, ddp->bits ? ddp->bits + lo : NULL, w, hi - lo);
        }
    }

    /* distributed: the updated shards go back to every rank (param_gather.c) */
    if (L->distributed) tdm_ddp__post_param_gathers(ddp);
    ddp->grads_synced = 0;
    ddp->iteration++;
    tdm_timers_stop(&ddp->timers, TDM_TIMER_OPTIMIZER);
    return 0;
}

/* Megatron's --log-params-norm and --log-num-zeros-in-grad, over the owned elements of every
 * trained parameter (padding skipped), combined across ranks in rank order like the gradient
 * norm. Reads only: the step's results are the same with or without it. */
int tdm_ddp_param_stats(tdm_ddp *ddp, double *params_norm, double *grad_zeros, tdm_error *err) {
    const tdm_ddp_layout *L = &ddp->L;
    double s4[4] = {0, 0, 0, 0};
    int64_t zeros = 0;
    for (int b = 0; b < L->n_buckets; b++) {
        const tdm_ddp_bucket *bk = &L->buckets[b];
        int64_t s, e;
        tdm_ddp_layout_shard(L, b, ddp->rank, &s, &e);
        for (int k = bk->first; k < bk->first + bk->count; k++) {
            int64_t lo, hi;
            if (!owned_part(ddp, L->order[k], s, e, &lo, &hi)) continue;
            /* Megatron's params norm is over the fp32 main parameters where there are some */
            const float *w = ddp->main ? ddp->main + ddp->state_offset[b] + (lo - s) : ddp->params + lo;
            for (int64_t j = lo; j < hi; j++) {
                const double p = w[j - lo];
                s4[j & 3] += p * p;
                zeros += ddp->grads[j] == 0.0f;
            }
        }
    }
    double v[2] = {(s4[0] + s4[1]) + (s4[2] + s4[3]), (double)zeros};
    if (L->distributed && tdm_ddp_sum_across_ranks(ddp, v, 2, err) != 0) return -1;
    if (params_norm) *params_norm = sqrt(v[0]);
    if (grad_zeros) *grad_zeros = v[1];
    return 0;
}

/* ---- state for checkpoints ---------------------------------------------------------------- */

int tdm_ddp_opt_pieces(const tdm_ddp *ddp, tdm_ddp_opt_piece *out, int cap) {
    const tdm_ddp_layout *L = &ddp->L;
    int n = 0;
    for (int b = 0; b < L->n_buckets; b++) {
        const tdm_ddp_bucket *bk = &L->buckets[b];
        int64_t s, e;
        tdm_ddp_layout_shard(L, b, ddp->rank, &s, &e);
        for (int k = bk->first; k < bk->first + bk->count; k++) {
            int i = L->order[k];
            int64_t lo, hi;
            if (!owned_part(ddp, i, s, e, &lo, &hi)) continue;
            if (out && n < cap) {
                out[n].param = i;
                out[n].param_offset = lo - L->offset[i];
                out[n].count = hi - lo;
                out[n].state_offset = ddp->state_offset[b] + (lo - s);
            }
            n++;
        }
    }
    return n;
}

float *tdm_ddp_opt_m(tdm_ddp *ddp) { return ddp->m; }
float *tdm_ddp_opt_v(tdm_ddp *ddp) { return ddp->v; }
float *tdm_ddp_opt_main(tdm_ddp *ddp) { return ddp->main; }
int64_t tdm_ddp_opt_numel(const tdm_ddp *ddp) { return ddp->opt_numel; }
int64_t tdm_ddp_opt_step_count(const tdm_ddp *ddp) { return ddp->opt_step; }
void tdm_ddp_opt_set_step_count(tdm_ddp *ddp, int64_t step) { ddp->opt_step = step; }

int tdm_ddp_opt_load_piece(tdm_ddp *ddp, int param, int64_t param_offset, int64_t count, const float *m, const float *v,
                           tdm_error *err) {
    const tdm_ddp_layout *L = &ddp->L;
    if (param < 0 || param >= L->n_params)
        return tdm_errorf(err, "optimizer state: parameter index %d, expected one in [0, %d)", param, L->n_params);
    const tdm_param *p = &ddp->t->p[param];
    if (L->bucket_of[param] < 0) return tdm_errorf(err, "optimizer state: parameter %s is frozen here", p->name);
    if (param_offset < 0 || count < 0 || param_offset > p->numel || count > p->numel - param_offset)
        return tdm_errorf(err,
                          "optimizer state: parameter %s: %lld elements from element %lld exceed its %lld elements",
                          p->name, (long long)count, (long long)param_offset, (long long)p->numel);
    int b = L->bucket_of[param];
    int64_t s, e;
    tdm_ddp_layout_shard(L, b, ddp->rank, &s, &e);
    int64_t lo = L->offset[param] + param_offset, hi = lo + count;
    int64_t a = lo > s ? lo : s, z = hi < e ? hi : e;
    if (a >= z) return 0;
    int64_t st = ddp->state_offset[b] + (a - s);
    memcpy(ddp->m + st, m + (a - lo), (size_t)(z - a) * sizeof(float));
    memcpy(ddp->v + st, v + (a - lo), (size_t)(z - a) * sizeof(float));
    return 0;
}
