/* rope_index.h - image-token expansion and Qwen3-VL's 3D position ids (get_rope_index,
 * spec qwen3vl.md section 4), for one sequence.
 *
 * Positions walk the tokens with a next-free position p (starting at 0):
 *   - a text token (including <|vision_start|>/<|vision_end|>) gets (p, p, p), then p += 1;
 *   - the run of <|image_pad|> tokens of image j, grid (t, h, w) with merged grid
 *     H = h/m, W = w/m, gets (s + ti, s + row, s + col) over ti < t, row < H, col < W in
 *     raster order, where s = p; afterwards p = s + max(t, H, W) (max position + 1).
 * Example (spec): <|im_start|>user\n<|vision_start|> are 0..3, the pads run from (4,4,4) to
 * (4, 4+H-1, 4+W-1), and <|vision_end|> gets 4 + max(H, W).
 */
#ifndef TDM_ROPE_INDEX_H
#define TDM_ROPE_INDEX_H

#include <stdint.h>

#include "core/error.h"

/* Tokens after expansion: every image_pad id counts grid_t*grid_h*grid_w/merge^2 times.
 * -1 when the number of pads differs from n_images or a grid is not divisible by merge. */
int64_t tdm_rope_expanded_len(const int32_t *ids, int64_t n, int32_t image_pad, const int32_t *grids, int n_images,
                              int merge);

/* Copies ids (and labels, when both are non-NULL) into out_ids/out_labels, replacing the
 * i-th image_pad by its run of copies (their labels are the pad's label, -100).
 * out arrays must hold tdm_rope_expanded_len() entries. */
int tdm_rope_expand_pads(const int32_t *ids, const int32_t *labels, int64_t n, int32_t image_pad, const int32_t *grids,
                         int n_images, int merge, int32_t *out_ids, int32_t *out_labels, tdm_error *err);

/* 3D positions of an expanded sequence: pos[a * stride + i] for axis a in (t, h, w).
 * Returns the next free position (max + 1), or -1 when the pad runs do not match the grids. */
int64_t tdm_rope_index(const int32_t *ids, int64_t n, int32_t image_pad, const int32_t *grids, int n_images, int merge,
                       int32_t *pos, int64_t stride, tdm_error *err);

#endif
