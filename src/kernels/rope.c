/* rope.c - rotary position embedding, rotate-half form, driven by angle tables. */
#include "kernels/kernels.h"

#include "kernels/vec.h"

/* Rotates every head of every token by the token's angles; sign = +1 forward, -1 for
 * the backward (rotation by -theta). The inner loop runs over the pair index i, so it
 * reads x, cos and sin contiguously (eight pairs per vector: GCC 12 at -O2 left it scalar). */
static void rope_rotate(float *x, const float *cos, const float *sin, int n, int heads, int hd, float sign) {
    int half = hd / 2;
    for (int t = 0; t < n; t++) {
        const float *c = cos + (int64_t)t * half;
        const float *s = sin + (int64_t)t * half;
        for (int h = 0; h < heads; h++) {
            float *a = x + ((int64_t)t * heads + h) * hd; /* first half */
            float *b = a + half;                          /* second half */
            int i = 0;
            for (; i + 8 <= half; i += 8) { /* the scalar loop below, eight pairs at a time */
                tdm_v8 ci = tdm_v8_load(c + i), si = sign * tdm_v8_load(s + i);
                tdm_v8 ai = tdm_v8_load(a + i), bi = tdm_v8_load(b + i);
                tdm_v8_store(a + i, ai * ci - bi * si);
                tdm_v8_store(b + i, bi * ci + ai * si);
            }
            for (; i < half; i++) {
                float si = sign * s[i];
                float ai = a[i], bi = b[i];
                a[i] = ai * c[i] - bi * si;
                b[i] = bi * c[i] + ai * si;
            }
        }
    }
}

void tdm_rope_forward(float *x, const float *cos, const float *sin, int n, int heads, int hd) {
    rope_rotate(x, cos, sin, n, heads, hd, 1.0f);
}

void tdm_rope_backward(float *dx, const float *cos, const float *sin, int n, int heads, int hd) {
    rope_rotate(dx, cos, sin, n, heads, hd, -1.0f);
}
