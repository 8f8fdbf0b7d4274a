/* elementwise.c - plain elementwise array arithmetic (residual adds). */
#include "kernels/kernels.h"

#include "kernels/vec.h"

/* GCC 12 at -O2 leaves a plain `y[i] += x[i]` loop with a runtime length scalar (vec.h);
 * eight lanes at a time it is the same additions, so the same bits. */
void tdm_add_into(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        tdm_v8 a = tdm_v8_load(y + i) + tdm_v8_load(x + i), b = tdm_v8_load(y + i + 8) + tdm_v8_load(x + i + 8);
        tdm_v8_store(y + i, a);
        tdm_v8_store(y + i + 8, b);
    }
    for (; i + 8 <= n; i += 8) tdm_v8_store(y + i, tdm_v8_load(y + i) + tdm_v8_load(x + i));
    for (; i < n; i++) y[i] += x[i];
}
