/* libFuzzer target: PNG/JPEG decoding of arbitrary bytes, then the bicubic resize and the
 * Qwen image processor on whatever decodes. A decoded image must have the size its
 * header promised within the pixel limit; resizing to sizes chosen by the input and
 * preprocessing must stay inside their buffers.
 * fuzz-modules: data tokenizer prof core */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/image.h"
#include "data/preprocess.h"
#include "data/resize.h"

#define MAX_PIXELS (1 << 18) /* keeps each run fast; the limit path itself is what we test */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_error err;
    tdm_image img = {0};
    if (tdm_image_decode(data, size, "fuzz.img", MAX_PIXELS, &img, &err) != 0) return 0;
    if (img.width < 1 || img.height < 1 || (int64_t)img.width * img.height > MAX_PIXELS || !img.rgb) abort();
    /* output size from the last input bytes: 1..64 per side */
    int dw = 1 + (size ? data[size - 1] % 64 : 0), dh = 1 + (size > 1 ? data[size - 2] % 64 : 0);
    uint8_t *dst = malloc((size_t)dw * dh * 3);
    (void)tdm_resize_bicubic_u8(img.rgb, img.width, img.height, 3, dst, dw, dh, &err);
    free(dst);

    tdm_preproc_config pp;
    tdm_preproc_config_default(&pp);
    pp.min_pixels = 32 * 32;
    pp.max_pixels = 128 * 128; /* small, so the patch buffer stays small */
    int32_t grid[3];
    if (tdm_preproc_grid(&pp, img.height, img.width, grid, &err) == 0) {
        size_t rows = (size_t)grid[0] * grid[1] * grid[2];
        float *pix = malloc(sizeof(float) * rows * (size_t)tdm_preproc_patch_dim(&pp));
        int32_t g2[3];
        if (tdm_preproc_image(&pp, &img, pix, g2, &err) == 0 && memcmp(grid, g2, sizeof grid)) abort();
        free(pix);
    }
    tdm_image_free(&img);
    return 0;
}
