/* rope_tables.c - per-token position tables: the text decoder's M-RoPE angles, and for
 * the vision tower the 2D RoPE angles, the bilinear taps into the learned position
 * table, and the per-frame attention segments. Angles are computed in double and
 * rounded once, so the tables are as exact as fp32 allows. */
#include <math.h>

#include "model/qwen3vl_impl.h"

/* Which position axis (0 = t, 1 = h, 2 = w) drives frequency i of the text RoPE.
 * Interleaved (Qwen3-VL): THW THW ... then T for the rest; chunked (Qwen2-VL): T..T H..H W..W. */
static int mrope_axis(int i, const tdm_text_config *tc) {
    const int *s = tc->mrope_section;
    if (tc->mrope_interleaved) {
        if (i % 3 == 1 && i < 3 * s[1]) return 1;
        if (i % 3 == 2 && i < 3 * s[2]) return 2;
        return 0;
    }
    if (i < s[0]) return 0;
    if (i < s[0] + s[1]) return 1;
    return 2;
}

void tdm_mrope_tables(float *cos_t, float *sin_t, const int32_t *position_ids, int T, const tdm_text_config *tc) {
    int half = tc->head_dim / 2;
    for (int i = 0; i < half; i++) {
        double inv_freq = pow(tc->rope_theta, -2.0 * i / tc->head_dim);
        const int32_t *pos = position_ids + (int64_t)mrope_axis(i, tc) * T;
        for (int t = 0; t < T; t++) {
            double ang = (double)pos[t] * inv_freq;
            cos_t[(int64_t)t * half + i] = (float)cos(ang);
            sin_t[(int64_t)t * half + i] = (float)sin(ang);
        }
    }
}

/* torch.linspace(0, end, steps) in float32: symmetric, the first half counted up from
 * the start and the second half down from the end. */
static float linspace_at(float end, int steps, int idx) {
    if (steps == 1) return 0.0f;
    float step = end / (float)(steps - 1);
    if (idx < steps / 2) return step * (float)idx;
    return end - step * (float)(steps - 1 - idx);
}

int tdm_vision_tables(float *cos_t, float *sin_t, int32_t *pos_idx, float *pos_w, int32_t *cu, const int32_t *grid_thw,
                      int n_images, const tdm_vision_config *vc) {
    int hv = vc->hidden_size / vc->num_heads, quarter = hv / 4, half = hv / 2, sm = vc->spatial_merge_size;
    int S = (int)lround(sqrt((double)vc->num_position_embeddings));
    int64_t p = 0;
    int nseg = 0;
    cu[0] = 0;
    for (int j = 0; j < n_images; j++) {
        int gt = grid_thw[3 * j], gh = grid_thw[3 * j + 1], gw = grid_thw[3 * j + 2];
        for (int ti = 0; ti < gt; ti++) {
            /* patches in merge-block order: (bh, bw) raster, then (mh, mw) inside the block */
            for (int bh = 0; bh < gh / sm; bh++)
                for (int bw = 0; bw < gw / sm; bw++)
                    for (int mh = 0; mh < sm; mh++)
                        for (int mw = 0; mw < sm; mw++, p++) {
                            int row = bh * sm + mh, col = bw * sm + mw;
                            for (int k = 0; k < quarter; k++) {
                                double inv_freq = pow(10000.0, -2.0 * k / half);
                                double ar = row * inv_freq, ac = col * inv_freq;
                                cos_t[p * half + k] = (float)cos(ar);
                                sin_t[p * half + k] = (float)sin(ar);
                                cos_t[p * half + quarter + k] = (float)cos(ac);
                                sin_t[p * half + quarter + k] = (float)sin(ac);
                            }
                            float ys = linspace_at((float)(S - 1), gh, row);
                            float xs = linspace_at((float)(S - 1), gw, col);
                            int y0 = (int)ys, x0 = (int)xs;
                            int y1 = y0 + 1 < S ? y0 + 1 : S - 1, x1 = x0 + 1 < S ? x0 + 1 : S - 1;
                            float dy = ys - (float)y0, dx = xs - (float)x0;
                            pos_idx[4 * p + 0] = y0 * S + x0;
                            pos_idx[4 * p + 1] = y0 * S + x1;
                            pos_idx[4 * p + 2] = y1 * S + x0;
                            pos_idx[4 * p + 3] = y1 * S + x1;
                            pos_w[4 * p + 0] = (1 - dy) * (1 - dx);
                            pos_w[4 * p + 1] = (1 - dy) * dx;
                            pos_w[4 * p + 2] = dy * (1 - dx);
                            pos_w[4 * p + 3] = dy * dx;
                        }
            cu[nseg + 1] = (int32_t)p;
            nseg++;
        }
    }
    return nseg;
}
