/* adamw.c - the AdamW update, following torch.optim.AdamW (single-tensor path). */
#include "kernels/kernels.h"

#include <math.h>

#include "kernels/vec.h"

/* PyTorch computes the bias corrections as Python floats (double) and hands the
 * per-step scalars to float tensor ops; we do the same so the updates agree to float
 * rounding. grad_scale lets the caller fold 1/(number of tokens) or a clipping factor
 * into the read of the gradient without another pass. */
void tdm_adamw_step(float *p, const float *grad, float *m, float *v, int64_t n, float lr, float beta1, float beta2,
                    float eps, float weight_decay, int64_t step, float grad_scale) {
    double bc1 = 1.0 - pow((double)beta1, (double)step);
    double bc2 = 1.0 - pow((double)beta2, (double)step);
    float decay = (float)(1.0 - (double)lr * (double)weight_decay);
    float step_size = (float)((double)lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    float one_m_b1 = 1.0f - beta1, one_m_b2 = 1.0f - beta2;
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
