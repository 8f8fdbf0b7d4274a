/* resize.h - bicubic image resizing that reproduces PIL's Image.resize(size, Image.BICUBIC)
 * on 8-bit images (the "slow" Hugging Face image-processor path).
 *
 * PIL resizes in two separable passes, horizontal then vertical, each a convolution with
 * the Keys cubic kernel (a = -0.5, support 2) stretched by the downscale factor when
 * shrinking (that stretch is the antialiasing). Each output pixel's weights are
 * normalised to sum 1, converted to fixed point with 22 fractional bits, and every pass
 * rounds and clips its result to uint8, so the intermediate image is uint8 too. We do
 * exactly the same, so results match PIL bit for bit in the cases tests/data checks.
 */
#ifndef TDM_RESIZE_H
#define TDM_RESIZE_H

#include <stdint.h>

#include "core/error.h"

/* Resizes src [sh, sw, channels] (uint8, interleaved) to dst [dh, dw, channels].
 * Any sizes >= 1; channels 1..4. Allocates only a temporary of dw*sh*channels bytes. */
int tdm_resize_bicubic_u8(const uint8_t *src, int sw, int sh, int channels, uint8_t *dst, int dw, int dh,
                          tdm_error *err);

#endif
