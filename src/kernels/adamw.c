/* adamw.c - the AdamW update, following torch.optim.AdamW (single-tensor path). */
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/vec.h"

/* The shortest decimal that rounds to x: the value the user wrote (0.9f -> 0.9).
 * PyTorch keeps lr, betas and weight decay as Python floats (double) and derives
 * 1 - beta, 1 - lr wd and the bias corrections from them in double before the float
 * tensor ops; recomputing them from the decimal rather than from the float argument
 * is what makes the update agree with torch.optim.AdamW to a few ulps (1 - 0.9f is
 * 0.100000024, while PyTorch multiplies by (float)(1 - 0.9) = 0.1). */
static double user_decimal(float x) {
    char buf[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)x);
        double d = strtod(buf, NULL);
        if ((float)d == x) return d;
    }
    return x;
}

/* torch.optim.AdamW, single-tensor path: p *= 1 - lr wd; m = b1 m + (1 - b1) g;
 * v = b2 v + (1 - b2) g^2; p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps).
 * grad_scale lets the caller fold 1 / (number of tokens) or a clipping factor into the
 * read of the gradient without another pass over it. */
void tdm_adamw_step(float *p, const float *grad, float *m, float *v, int64_t n, float lr, float beta1, float beta2,
                    float eps, float weight_decay, int64_t step, float grad_scale) {
    double lr_d = user_decimal(lr), b1 = user_decimal(beta1), b2 = user_decimal(beta2);
    double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
    float decay = (float)(1.0 - lr_d * user_decimal(weight_decay));
    float step_size = (float)(lr_d / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    float one_m_b1 = (float)(1.0 - b1), one_m_b2 = (float)(1.0 - b2);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        tdm_v8 g = tdm_v8_load(grad + i) * grad_scale;
        tdm_v8 mi = tdm_v8_load(m + i) * beta1 + g * one_m_b1;
        tdm_v8 vi = tdm_v8_load(v + i) * beta2 + g * g * one_m_b2;
        tdm_v8_store(m + i, mi);
        tdm_v8_store(v + i, vi);
        tdm_v8 denom = tdm_v8_sqrt(vi) / bc2_sqrt + eps;
        tdm_v8_store(p + i, tdm_v8_load(p + i) * decay - step_size * mi / denom);
    }
    for (; i < n; i++) {
        float g = grad[i] * grad_scale;
        float mi = m[i] * beta1 + g * one_m_b1;
        float vi = v[i] * beta2 + g * g * one_m_b2;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = p[i] * decay - step_size * mi / denom;
    }
}

/* x - x is +0 for every finite x and NaN for an infinity or a NaN, and a NaN stays in a
 * sum: the four sums are zero exactly when every element is finite. Four vectors of
 * independent adds (one load, one subtract, one add per eight elements), against the
 * latency-bound chains of a sum of squares in double. */
int tdm_all_finite(const float *x, int64_t n) {
    tdm_v8 a0 = tdm_v8_set1(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        tdm_v8 x0 = tdm_v8_load(x + i), x1 = tdm_v8_load(x + i + 8);
        tdm_v8 x2 = tdm_v8_load(x + i + 16), x3 = tdm_v8_load(x + i + 24);
        a0 += x0 - x0;
        a1 += x1 - x1;
        a2 += x2 - x2;
        a3 += x3 - x3;
    }
    float s = tdm_v8_sum((a0 + a1) + (a2 + a3));
    for (; i < n; i++) s += x[i] - x[i];
    return s == 0.0f;
}
