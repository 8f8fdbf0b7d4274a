/* test_preprocess.c - image decoding, PIL parity of the bicubic resize, smart_resize, the
 * patch order and preprocessor_config.json.
 *
 * Reference values come from PIL and numpy (tests/data/pil_reference.py, run with
 * /usr/bin/python3 into a temporary folder). Tolerances:
 *   - decoding: exact (PIL uses the same libpng / libjpeg-turbo and the same conversions);
 *   - resize: max |ours - PIL| <= 1 level per channel, and >= 99% of values exact
 *     (we implement PIL's fixed-point algorithm, so we expect and usually see 100%);
 *   - smart_resize: exact, against a Python transcription and the spec's examples;
 *   - patches: exact float equality with numpy's reshape/transpose of the same image.
 */
#include <signal.h>
#include <stdio.h> /* before jpeglib.h, which needs FILE */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jpeglib.h>
#include <zlib.h>

#include "core/fs.h"
#include "data/image.h"
#include "data/preprocess.h"
#include "data/resize.h"
#include "harness.h"

static char refdir[256];

static uint8_t *read_all(const char *path, size_t *n) {
    tdm_error err;
    char *d = tdm_read_file(path, 1 << 28, n, &err);
    if (!d) fprintf(stderr, "  %s\n", err.msg);
    return (uint8_t *)d;
}

static void test_reference_generated(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/data/pil_reference.py %s", refdir);
    CHECK(system(cmd) == 0, "%s failed", cmd);
}

static void test_decode_and_resize_match_pil(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/manifest.txt", refdir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "no manifest");
    if (!f) return;
    char name[64], src[400];
    int w, h, tw, th, cases = 0;
    long total = 0, exact = 0;
    int worst = 0;
    while (fscanf(f, "%63s %399s %d %d %d %d", name, src, &w, &h, &tw, &th) == 6) {
        cases++;
        tdm_image img;
        tdm_error err;
        int rc = tdm_image_load(src, TDM_IMAGE_MAX_PIXELS, &img, &err);
        CHECK(rc == 0, "%s: %s", name, err.msg);
        if (rc) continue;
        CHECK(img.width == w && img.height == h, "%s: %dx%d, PIL %dx%d", name, img.width, img.height, w, h);
        int pw, ph;
        CHECK(tdm_image_probe(src, &pw, &ph, &err) == 0 && pw == w && ph == h, "%s: probe", name);
        size_t n;
        snprintf(path, sizeof path, "%s/%s.rgb", refdir, name);
        uint8_t *ref = read_all(path, &n);
        CHECK(ref && n == (size_t)w * h * 3 && !memcmp(ref, img.rgb, n), "%s: decoded pixels differ from PIL", name);
        free(ref);
        uint8_t *out = malloc((size_t)tw * th * 3);
        CHECK(tdm_resize_bicubic_u8(img.rgb, w, h, 3, out, tw, th, &err) == 0, "%s", err.msg);
        snprintf(path, sizeof path, "%s/%s.rs", refdir, name);
        ref = read_all(path, &n);
        CHECK(ref && n == (size_t)tw * th * 3, "%s: resized reference size", name);
        if (ref && n == (size_t)tw * th * 3) {
            int case_worst = 0;
            for (size_t i = 0; i < n; i++) {
                int d = abs((int)out[i] - (int)ref[i]);
                if (d > case_worst) case_worst = d;
                exact += d == 0;
            }
            total += (long)n;
            CHECK(case_worst <= 1, "%s: %dx%d -> %dx%d: max diff %d levels", name, w, h, tw, th, case_worst);
            if (case_worst > worst) worst = case_worst;
        }
        free(ref);
        free(out);
        tdm_image_free(&img);
    }
    fclose(f);
    CHECK(cases >= 16, "only %d cases", cases);
    CHECK(exact >= total * 99 / 100, "%ld of %ld exact", exact, total);
    printf("  PIL parity: %d images, %ld values, %.4f%% exact, max diff %d\n", cases, total,
           100.0 * (double)exact / (double)(total ? total : 1), worst);
}

static void test_smart_resize_matches_python(void) {
    int rh, rw;
    tdm_error err;
    /* spec examples */
    CHECK(tdm_smart_resize(480, 640, 32, 65536, 16777216, &rh, &rw, &err) == 0 && rh == 480 && rw == 640, "480x640");
    CHECK(tdm_smart_resize(224, 224, 32, 65536, 16777216, &rh, &rw, &err) == 0 && rh == 256 && rw == 256, "224");
    CHECK(tdm_smart_resize(1080, 1920, 32, 65536, 16777216, &rh, &rw, &err) == 0 && rh == 1088 && rw == 1920,
          "1080p: %dx%d", rh, rw);
    CHECK(tdm_smart_resize(1, 300, 32, 65536, 16777216, &rh, &rw, &err) != 0 && strstr(err.msg, "200"), "aspect ratio");
    char path[300];
    snprintf(path, sizeof path, "%s/smart.txt", refdir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "no smart.txt");
    if (!f) return;
    int h, w, eh, ew, n = 0, bad = 0;
    long long lo, hi;
    while (fscanf(f, "%d %d %lld %lld %d %d", &h, &w, &lo, &hi, &eh, &ew) == 6) {
        n++;
        int rc = tdm_smart_resize(h, w, 32, lo, hi, &rh, &rw, &err);
        int ok = eh < 0 ? rc != 0 : (rc == 0 && rh == eh && rw == ew);
        if (!ok && bad++ < 5) CHECK(0, "%dx%d [%lld,%lld]: ours %dx%d, python %dx%d", h, w, lo, hi, rh, rw, eh, ew);
    }
    fclose(f);
    CHECK(n > 900 && bad == 0, "%d cases, %d differ", n, bad);
}

/* A synthetic image whose pixel values encode (y, x, c) checks the row/column mapping
 * of every patch element exactly, independently of numpy. */
static void test_patch_order_synthetic(void) {
    tdm_preproc_config c;
    tdm_preproc_config_default(&c);
    c.patch_size = 4; /* small patches: P=4, T=2, m=2 */
    const int H = 16, W = 24, P = 4, T = 2, m = 2, gh = H / P, gw = W / P, D = 3 * T * P * P;
    uint8_t *rgb = malloc((size_t)H * W * 3);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int ch = 0; ch < 3; ch++) rgb[(y * W + x) * 3 + ch] = (uint8_t)((y * 7 + x * 3 + ch * 101) % 256);
    /* identity normalisation: mean 0, std 1/255 gives back the byte value */
    for (int i = 0; i < 3; i++) {
        c.image_mean[i] = 0;
        c.image_std[i] = 1.0 / 255.0;
    }
    float *out = malloc(sizeof(float) * gh * gw * D);
    tdm_preproc_patchify(&c, rgb, H, W, out);
    int bad = 0;
    for (int r = 0; r < gh * gw; r++) {
        int blk = r / (m * m), in = r % (m * m);
        int row = (blk / (gw / m)) * m + in / m, col = (blk % (gw / m)) * m + in % m;
        for (int ch = 0; ch < 3; ch++)
            for (int t = 0; t < T; t++)
                for (int py = 0; py < P; py++)
                    for (int px = 0; px < P; px++) {
                        int y = row * P + py, x = col * P + px;
                        float want = (float)((y * 7 + x * 3 + ch * 101) % 256);
                        float got = out[(size_t)r * D + ch * T * P * P + t * P * P + py * P + px];
                        if (fabsf(got - want) > 1e-3f) bad++;
                    }
    }
    CHECK(bad == 0, "%d patch elements in the wrong place", bad);
    free(rgb);
    free(out);
}

static void test_patches_match_numpy(void) {
    char path[300];
    size_t n;
    snprintf(path, sizeof path, "%s/patch_src.rgb", refdir);
    uint8_t *rgb = read_all(path, &n);
    snprintf(path, sizeof path, "%s/patches.f32", refdir);
    size_t nref;
    float *ref = (float *)read_all(path, &nref);
    CHECK(rgb && ref && n == 64 * 96 * 3 && nref == 24 * 1536 * sizeof(float), "reference files");
    if (rgb && ref && nref == 24 * 1536 * sizeof(float)) {
        tdm_preproc_config c;
        tdm_preproc_config_default(&c);
        tdm_image img = {.width = 96, .height = 64, .rgb = rgb};
        float *out = malloc(nref);
        int32_t grid[3];
        tdm_error err;
        c.min_pixels = 4096;
        c.max_pixels = 16384;
        CHECK(tdm_preproc_image(&c, &img, out, grid, &err) == 0, "%s", err.msg);
        CHECK(grid[0] == 1 && grid[1] == 4 && grid[2] == 6, "grid %d %d %d", grid[0], grid[1], grid[2]);
        int bad = 0;
        double worst = 0;
        for (size_t i = 0; i < nref / sizeof(float); i++) {
            double d = fabs((double)out[i] - (double)ref[i]);
            if (d > worst) worst = d;
            bad += d > 1.5e-7; /* numpy rounds to float32 twice; we round once: <= 1 ulp near 1 */
        }
        CHECK(bad == 0, "%d values differ (worst %.3g)", bad, worst);
        free(out);
    }
    free(rgb);
    free(ref);
}

/* LLaMA-Factory's --image-max-pixels / --image-min-pixels before the processor: the patches of
 * tdm_preproc_image equal those cut from PIL's pixels after both of its resizes (lf_prescale in
 * pil_reference.py), exactly; the grid is the processor's on the pre-scaled size. */
static void test_llamafactory_bounds_match_pil(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/lf.txt", refdir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "no lf.txt");
    if (!f) return;
    char name[64], src[400];
    long long maxp, minp, lo, hi;
    int pw, ph, rw, rh, cases = 0;
    while (fscanf(f, "%63s %399s %lld %lld %lld %lld %d %d %d %d", name, src, &maxp, &minp, &lo, &hi, &pw, &ph, &rw,
                  &rh) == 10) {
        cases++;
        tdm_preproc_config c;
        tdm_preproc_config_default(&c);
        c.min_pixels = lo, c.max_pixels = hi, c.pre_max_pixels = maxp, c.pre_min_pixels = minp;
        tdm_image img;
        tdm_error err;
        if (tdm_image_load(src, TDM_IMAGE_MAX_PIXELS, &img, &err) != 0) {
            CHECK(0, "%s: %s", name, err.msg);
            continue;
        }
        int32_t grid[3];
        int64_t n = (int64_t)(rh / c.patch_size) * (rw / c.patch_size) * tdm_preproc_patch_dim(&c);
        float *out = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n);
        CHECK(tdm_preproc_image(&c, &img, out, grid, &err) == 0, "%s: %s", name, err.msg);
        CHECK(grid[1] * c.patch_size == rh && grid[2] * c.patch_size == rw, "%s: grid %dx%d, PIL's %dx%d", name,
              grid[1] * c.patch_size, grid[2] * c.patch_size, rh, rw);
        size_t nb;
        snprintf(path, sizeof path, "%s/%s.lf", refdir, name);
        uint8_t *ref = read_all(path, &nb);
        if (ref && nb == (size_t)rh * rw * 3 && grid[1] * c.patch_size == rh && grid[2] * c.patch_size == rw) {
            tdm_preproc_patchify(&c, ref, rh, rw, want);
            CHECK(!memcmp(out, want, sizeof(float) * (size_t)n), "%s: patches differ from PIL's pixels", name);
        } else {
            CHECK(0, "%s: reference %zu bytes", name, ref ? nb : 0);
        }
        free(ref);
        free(out);
        free(want);
        tdm_image_free(&img);
    }
    fclose(f);
    CHECK(cases == 6, "%d cases", cases);
    /* a bound that leaves no pixel is refused, not resized to nothing */
    tdm_preproc_config c;
    tdm_preproc_config_default(&c);
    c.pre_max_pixels = 1;
    int32_t grid[3];
    tdm_error err;
    CHECK(tdm_preproc_grid(&c, 40, 3, grid, &err) != 0 && strstr(err.msg, "--image-max-pixels"), "%s", err.msg);
    /* the max bound truncates a 10000x1 strip to 1000x0; the min bound must not scale that by sqrt(N / 0) */
    c.pre_max_pixels = 100, c.pre_min_pixels = 50;
    CHECK(tdm_preproc_grid(&c, 1, 10000, grid, &err) != 0 && strstr(err.msg, "image of 10000x1 pixels") &&
              strstr(err.msg, "scale it to 1000x0"),
          "%s", err.msg);
}

static void test_broken_files(void) {
    char path[300];
    tdm_error err;
    tdm_image img;
    size_t n;
    snprintf(path, sizeof path, "%s/rgb_down.src.png", refdir);
    uint8_t *png = read_all(path, &n);
    snprintf(path, sizeof path, "%s/jpeg_rgb.src.jpg", refdir);
    size_t nj;
    uint8_t *jpg = read_all(path, &nj);
    CHECK(png && jpg, "inputs");
    if (!png || !jpg) return;
    for (size_t cut = 0; cut < n; cut += n / 7 + 1) {
        CHECK(tdm_image_decode(png, cut, "cut.png", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0, "cut at %zu", cut);
        CHECK(strstr(err.msg, "cut.png") != NULL, "message: %s", err.msg);
    }
    CHECK(tdm_image_decode(jpg, nj / 2, "half.jpg", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0, "truncated JPEG");
    CHECK(strstr(err.msg, "half.jpg") != NULL, "message: %s", err.msg);
    uint8_t junk[64] = "GIF89a......";
    CHECK(tdm_image_decode(junk, sizeof junk, "x.gif", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0 &&
              strstr(err.msg, "x.gif") && strstr(err.msg, "magic"),
          "wrong magic: %s", err.msg);
    /* corrupt the IDAT payload (CRC no longer matches) */
    uint8_t *bad = malloc(n);
    memcpy(bad, png, n);
    for (size_t i = n / 2; i < n / 2 + 16; i++) bad[i] ^= 0x5a;
    CHECK(tdm_image_decode(bad, n, "bad.png", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0, "corrupt PNG accepted");
    /* pixel limit checked from the header */
    CHECK(tdm_image_decode(png, n, "big.png", 1000, &img, &err) != 0 && strstr(err.msg, "limit"), "limit: %s", err.msg);
    CHECK(tdm_image_decode(jpg, nj, "big.jpg", 1000, &img, &err) != 0 && strstr(err.msg, "limit"), "limit: %s",
          err.msg);
    CHECK(tdm_image_load("/nonexistent/x.png", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0 &&
              strstr(err.msg, "/nonexistent/x.png"),
          "missing file: %s", err.msg);
    int w, h;
    CHECK(tdm_image_probe("/nonexistent/x.png", &w, &h, &err) != 0, "probe of a missing file");
    /* a broken PNG header is found by the probe (when the dataset is scanned), not mid-run */
    static const char *const broken[] = {"depth3", "ihdr_crc", "interlace2"};
    for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) {
        snprintf(path, sizeof path, "%s/broken_%s.png", refdir, broken[i]);
        CHECK(tdm_image_probe(path, &w, &h, &err) != 0 && strstr(err.msg, path) && strstr(err.msg, "corrupt PNG"),
              "%s: probe: %s", broken[i], err.msg);
        CHECK(tdm_image_load(path, TDM_IMAGE_MAX_PIXELS, &img, &err) != 0, "%s: decoded", broken[i]);
    }
    snprintf(path, sizeof path, "%s/broken_jpeg_progressive_cut.jpg", refdir);
    CHECK(tdm_image_load(path, TDM_IMAGE_MAX_PIXELS, &img, &err) != 0 && strstr(err.msg, "corrupt JPEG"),
          "progressive JPEG cut after its last scan: %s", err.msg);
    free(bad);
    free(png);
    free(jpg);
}

/* A grey progressive JPEG of w x h (flat but for one dark quarter, so a scan is a few bytes) whose
 * last scan is written `repeat` more times: the shape of a file built to stall a decoder. */
static uint8_t *progressive_jpeg(int w, int h, int repeat, size_t *n) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    unsigned char *buf = NULL;
    unsigned long len = 0;
    jpeg_mem_dest(&c, &buf, &len);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 1;
    c.in_color_space = JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    uint8_t *row = malloc((size_t)w);
    while (c.next_scanline < c.image_height) {
        for (int x = 0; x < w; x++) row[x] = x < w / 2 && (int)c.next_scanline < h / 2 ? 40 : 128;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    size_t last = 0; /* the last SOS marker; 0xFF in entropy-coded data is followed by 0x00 */
    for (size_t i = 0; i + 1 < len; i++)
        if (buf[i] == 0xFF && buf[i + 1] == 0xDA) last = i;
    size_t scan = len - 2 - last; /* up to EOI */
    uint8_t *out = malloc(len + scan * (size_t)repeat);
    memcpy(out, buf, len - 2);
    for (int r = 0; r < repeat; r++) memcpy(out + len - 2 + scan * (size_t)r, buf + last, scan);
    memcpy(out + len - 2 + scan * (size_t)repeat, buf + len - 2, 2);
    *n = len + scan * (size_t)repeat;
    free(buf);
    return out;
}

static void test_jpeg_decoding_work_bounded(void) {
    tdm_error err;
    tdm_image img;
    size_t n;
    uint8_t *ok = progressive_jpeg(512, 512, 0, &n);
    CHECK(tdm_image_decode(ok, n, "ok.jpg", TDM_IMAGE_MAX_PIXELS, &img, &err) == 0 && img.width == 512,
          "a plain progressive JPEG: %s", err.msg);
    tdm_image_free(&img);
    free(ok);
    /* many scans of a few bytes each over a tiny picture: the scan limit */
    uint8_t *many = progressive_jpeg(16, 16, TDM_JPEG_MAX_SCANS + 100, &n);
    CHECK(tdm_image_decode(many, n, "many.jpg", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0 &&
              strstr(err.msg, "many.jpg: JPEG of more than 1000 scans"),
          "%zu bytes: %s", n, err.msg);
    free(many);
    /* fewer scans, but each decodes every block again, for about 12 bytes: the work budget */
    uint8_t *work = progressive_jpeg(512, 512, 200, &n);
    CHECK(tdm_image_decode(work, n, "work.jpg", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0 &&
              strstr(err.msg, "work.jpg: JPEG whose first") && strstr(err.msg, "blocks, more than"),
          "%zu bytes: %s", n, err.msg);
    free(work);
}

/* A stop request ends a decode under way, naming the file; without one the same file decodes. */
static void test_decoding_stops_on_request(void) {
    tdm_error err;
    tdm_image img;
    size_t nj, np;
    uint8_t *jpg = progressive_jpeg(256, 256, 0, &nj), *png = NULL;
    uint8_t px[64 * 64 * 3] = {0};
    CHECK(tdm_image_encode_png(px, 64, 64, &png, &np, &err) == 0, "%s", err.msg);
    static volatile sig_atomic_t stop;
    tdm_image_set_stop_flag(&stop);
    stop = 1;
    CHECK(tdm_image_decode(jpg, nj, "s.jpg", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0 &&
              strstr(err.msg, "s.jpg: decoding given up: a stop was requested"),
          "JPEG: %s", err.msg);
    CHECK(tdm_image_decode(png, np, "s.png", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0 &&
              strstr(err.msg, "s.png: decoding given up: a stop was requested"),
          "PNG: %s", err.msg);
    stop = 0;
    CHECK(tdm_image_decode(jpg, nj, "s.jpg", TDM_IMAGE_MAX_PIXELS, &img, &err) == 0, "JPEG: %s", err.msg);
    tdm_image_free(&img);
    CHECK(tdm_image_decode(png, np, "s.png", TDM_IMAGE_MAX_PIXELS, &img, &err) == 0, "PNG: %s", err.msg);
    tdm_image_free(&img);
    tdm_image_set_stop_flag(NULL);
    free(jpg);
    free(png);
}

/* png with chunk `kind` (body b[0..nb)) inserted after IHDR. */
static uint8_t *png_with_chunk(const uint8_t *png, size_t n, const char *kind, const uint8_t *b, size_t nb,
                               size_t *out_n) {
    uint8_t *o = malloc(n + nb + 12), *c = o + 33;
    memcpy(o, png, 33);
    c[0] = (uint8_t)(nb >> 24), c[1] = (uint8_t)(nb >> 16), c[2] = (uint8_t)(nb >> 8), c[3] = (uint8_t)nb;
    memcpy(c + 4, kind, 4);
    memcpy(c + 8, b, nb);
    uLong crc = crc32(crc32(0, NULL, 0), c + 4, (uInt)(nb + 4));
    c[8 + nb] = (uint8_t)(crc >> 24), c[9 + nb] = (uint8_t)(crc >> 16), c[10 + nb] = (uint8_t)(crc >> 8),
          c[11 + nb] = (uint8_t)crc;
    memcpy(c + 12 + nb, png + 33, n - 33);
    *out_n = n + nb + 12;
    return o;
}

/* zlib data of `zeros` zero bytes after a header of h[0..nh) (keyword, flags): a chunk body. */
static uint8_t *zero_bomb(const char *h, size_t nh, size_t zeros, size_t *nb) {
    uint8_t *raw = calloc(zeros, 1);
    uLongf cap = compressBound((uLong)zeros);
    uint8_t *b = malloc(nh + cap);
    memcpy(b, h, nh);
    compress2(b + nh, &cap, raw, (uLong)zeros, 9);
    free(raw);
    *nb = nh + cap;
    return b;
}

/* Metadata chunks that inflate past 1 MiB are refused as PIL refuses them, when the file is probed
 * and when it is decoded; smaller ones and plain text (PIL's 64 MiB in all) are not. */
static void test_png_metadata_bombs(void) {
    uint8_t px[8 * 8 * 3] = {0}, *png;
    size_t n, nb, nc;
    tdm_error err;
    tdm_image img;
    CHECK(tdm_image_encode_png(px, 8, 8, &png, &n, &err) == 0, "%s", err.msg);
    static const struct {
        const char *kind, *head;
        size_t nh, zeros;
        int refused;
    } cases[] = {
        {"zTXt", "Comment\0\0", 9, 200u << 20, 1}, /* 200 MiB of text in 200 KB */
        {"zTXt", "Comment\0\0", 9, (1u << 20) + 1, 1},
        {"zTXt", "Comment\0\0", 9, 1u << 20, 0},
        {"iTXt", "Comment\0\1\0en\0Note\0", 18, 2u << 20, 1},
        {"iTXt", "Comment\0\1\0en\0Note\0", 18, 1000, 0},
        {"iCCP", "icc\0\0", 5, 2u << 20, 1},
    };
    char path[300];
    snprintf(path, sizeof path, "%s/bomb.png", refdir);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t *body = zero_bomb(cases[i].head, cases[i].nh, cases[i].zeros, &nb);
        uint8_t *f = png_with_chunk(png, n, cases[i].kind, body, nb, &nc);
        int rc = tdm_image_decode(f, nc, "bomb.png", TDM_IMAGE_MAX_PIXELS, &img, &err);
        if (rc == 0) tdm_image_free(&img);
        char want[64];
        snprintf(want, sizeof want, "bomb.png: PNG %s chunk inflates to more than 1 MiB", cases[i].kind);
        CHECK(cases[i].refused ? rc != 0 && strstr(err.msg, want) : rc == 0, "%s of %zu bytes: decode: %s",
              cases[i].kind, cases[i].zeros, rc ? err.msg : "accepted");
        tdm_write_file_atomic(path, f, nc, &err);
        int w, h;
        rc = tdm_image_probe(path, &w, &h, &err);
        CHECK(cases[i].refused ? rc != 0 && strstr(err.msg, "PNG") && strstr(err.msg, "inflates to more than 1 MiB")
                               : rc == 0 && w == 8 && h == 8,
              "%s of %zu bytes: probe: %s", cases[i].kind, cases[i].zeros, rc ? err.msg : "accepted");
        free(f);
        free(body);
    }
    /* plain text: 2 MiB in one chunk is read (and dropped) as PIL reads it; 65 MiB in all is not */
    size_t big = (size_t)65 << 20;
    uint8_t *text = malloc(big);
    memset(text, 'a', big);
    memcpy(text, "Comment", 8);
    uint8_t *f = png_with_chunk(png, n, "tEXt", text, (size_t)2 << 20, &nc);
    CHECK(tdm_image_decode(f, nc, "text.png", TDM_IMAGE_MAX_PIXELS, &img, &err) == 0, "2 MiB of text: %s", err.msg);
    tdm_image_free(&img);
    free(f);
    f = png_with_chunk(png, n, "tEXt", text, big, &nc);
    CHECK(tdm_image_decode(f, nc, "text.png", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0 &&
              strstr(err.msg, "text.png: PNG text chunks hold more than 64 MiB"),
          "65 MiB of text: %s", err.msg);
    free(f);
    free(text);
    free(png);
}

static void test_png_writer_roundtrip(void) {
    uint8_t px[5 * 3 * 3];
    for (int i = 0; i < (int)sizeof px; i++) px[i] = (uint8_t)(i * 17);
    char path[300];
    snprintf(path, sizeof path, "%s/written.png", refdir);
    tdm_error err;
    CHECK(tdm_image_write_png(path, px, 5, 3, &err) == 0, "%s", err.msg);
    tdm_image img;
    CHECK(tdm_image_load(path, TDM_IMAGE_MAX_PIXELS, &img, &err) == 0, "%s", err.msg);
    CHECK(img.width == 5 && img.height == 3 && !memcmp(img.rgb, px, sizeof px), "roundtrip");
    tdm_image_free(&img);
}

static void test_config_file(void) {
    tdm_preproc_config c;
    tdm_error err;
    CHECK(tdm_preproc_config_load("configs/tiny", &c, &err) == 0, "%s", err.msg);
    CHECK(c.patch_size == 16 && c.temporal_patch_size == 2 && c.merge_size == 2, "sizes");
    CHECK(c.min_pixels == 4096 && c.max_pixels == 16384, "pixels %lld %lld", (long long)c.min_pixels,
          (long long)c.max_pixels);
    CHECK(c.image_mean[1] == 0.5 && c.image_std[2] == 0.5, "mean/std");
    char path[300];
    snprintf(path, sizeof path, "%s/pp.json", refdir);
    const char *bad = "{\"patch_size\": \"16\"}";
    tdm_write_file_atomic(path, bad, strlen(bad), &err);
    CHECK(tdm_preproc_config_load(path, &c, &err) != 0 && strstr(err.msg, "patch_size") && strstr(err.msg, "pp.json"),
          "%s", err.msg);
    const char *sz = "{\"size\": {\"shortest_edge\": 100, \"longest_edge\": 2000}}";
    tdm_write_file_atomic(path, sz, strlen(sz), &err);
    CHECK(tdm_preproc_config_load(path, &c, &err) == 0 && c.min_pixels == 100 && c.max_pixels == 2000, "size keys");
    /* a "size" without Qwen's pixel bounds (another processor's) was ignored: the defaults resized */
    const char *nosize[] = {"{\"size\": {\"height\": 448, \"width\": 448}}", "{\"size\": 448}",
                            "{\"size\": {\"shortest_edge\": 100}, \"min_pixels\": 50}"};
    const char *nokey[] = {"\"size\" has no \"shortest_edge\"", "\"size\" must be an object",
                           "\"size\" has no \"longest_edge\""};
    for (int i = 0; i < 3; i++) {
        tdm_write_file_atomic(path, nosize[i], strlen(nosize[i]), &err);
        CHECK(tdm_preproc_config_load(path, &c, &err) != 0 && strstr(err.msg, nokey[i]) && strstr(err.msg, "pp.json"),
              "%s: %s", nosize[i], err.msg);
    }
    const char *oneedge = "{\"size\": {\"shortest_edge\": 100}, \"max_pixels\": 3000}";
    tdm_write_file_atomic(path, oneedge, strlen(oneedge), &err);
    CHECK(tdm_preproc_config_load(path, &c, &err) == 0 && c.min_pixels == 100 && c.max_pixels == 3000,
          "size with max_pixels: %s", err.msg);
    /* a null bound is absent, as in Hugging Face's processor (it was "must be an integer") */
    const char *nulls = "{\"size\": {\"shortest_edge\": 100, \"longest_edge\": 2000}, \"min_pixels\": null, "
                        "\"max_pixels\": null}";
    tdm_write_file_atomic(path, nulls, strlen(nulls), &err);
    CHECK(tdm_preproc_config_load(path, &c, &err) == 0 && c.min_pixels == 100 && c.max_pixels == 2000,
          "null min/max_pixels: %s", err.msg);
    const char *nulledge = "{\"size\": {\"shortest_edge\": null, \"longest_edge\": 2000}}";
    tdm_write_file_atomic(path, nulledge, strlen(nulledge), &err);
    CHECK(tdm_preproc_config_load(path, &c, &err) != 0 && strstr(err.msg, "\"size\" has no \"shortest_edge\""),
          "null shortest_edge: %s", err.msg);
    /* sizes that would resize every picture to terabytes of patches are refused, not allocated */
    const char *huge[] = {"{\"min_pixels\": 10000000000, \"max_pixels\": 20000000000}",
                          "{\"size\": {\"shortest_edge\": 100, \"longest_edge\": 1099511627776}}",
                          "{\"patch_size\": 1024}", "{\"merge_size\": 16}"};
    const char *key[] = {"min_pixels", "longest_edge", "patch_size", "merge_size"};
    for (int i = 0; i < 4; i++) {
        tdm_write_file_atomic(path, huge[i], strlen(huge[i]), &err);
        CHECK(tdm_preproc_config_load(path, &c, &err) != 0 && strstr(err.msg, key[i]) && strstr(err.msg, "pp.json"),
              "%s: %s", huge[i], err.msg);
    }
    /* steps done one way only: asking for another way is refused (it was preprocessed the usual way) */
    const char *fixed[] = {"{\"do_normalize\": false}",   "{\"do_rescale\": false}",   "{\"do_resize\": false}",
                           "{\"do_convert_rgb\": false}", "{\"rescale_factor\": 1.0}", "{\"resample\": 2}"};
    const char *fkey[] = {"do_normalize", "do_rescale", "do_resize", "do_convert_rgb", "rescale_factor", "resample"};
    for (int i = 0; i < 6; i++) {
        tdm_write_file_atomic(path, fixed[i], strlen(fixed[i]), &err);
        CHECK(tdm_preproc_config_load(path, &c, &err) != 0 && strstr(err.msg, fkey[i]) && strstr(err.msg, "pp.json"),
              "%s: %s", fixed[i], err.msg);
    }
    const char *usual = "{\"do_normalize\": true, \"rescale_factor\": 0.00392156862745098, \"resample\": 3}";
    tdm_write_file_atomic(path, usual, strlen(usual), &err);
    CHECK(tdm_preproc_config_load(path, &c, &err) == 0, "the usual settings: %s", err.msg);
    int32_t g[3];
    /* tiny config: a 64x128 image stays, 200x200 shrinks to 128x128 (16384 pixels) */
    tdm_preproc_config_load("configs/tiny", &c, &err);
    CHECK(tdm_preproc_grid(&c, 64, 128, g, &err) == 0 && g[1] == 4 && g[2] == 8, "grid %d %d", g[1], g[2]);
    CHECK(tdm_preproc_grid(&c, 200, 200, g, &err) == 0 && g[1] == 8 && g[2] == 8, "grid %d %d", g[1], g[2]);
}

int main(void) {
    snprintf(refdir, sizeof refdir, "/tmp/tdm_test_preprocess_XXXXXX");
    if (!mkdtemp(refdir)) return 1;
    RUN(test_reference_generated);
    RUN(test_decode_and_resize_match_pil);
    RUN(test_smart_resize_matches_python);
    RUN(test_patch_order_synthetic);
    RUN(test_patches_match_numpy);
    RUN(test_llamafactory_bounds_match_pil);
    RUN(test_broken_files);
    RUN(test_jpeg_decoding_work_bounded);
    RUN(test_decoding_stops_on_request);
    RUN(test_png_metadata_bombs);
    RUN(test_png_writer_roundtrip);
    RUN(test_config_file);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", refdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", refdir);
    return TEST_SUMMARY();
}
