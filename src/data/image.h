/* image.h - PNG and JPEG files to 8-bit RGB pixels, and PNG writing.
 *
 *   tdm_image img;
 *   if (tdm_image_load("cat.jpg", TDM_IMAGE_MAX_PIXELS, &img, &err) != 0) ... err.msg names the file ...
 *   ... img.rgb[(y * img.width + x) * 3 + c] ...
 *   tdm_image_free(&img);
 *
 * Every colour type is converted the way PIL's Image.convert("RGB") does it: grey is
 * replicated to three channels, palettes are expanded, alpha (including a PNG tRNS
 * chunk) is dropped without compositing. 16-bit PNG samples keep their high byte (as
 * PIL does for 16-bit RGB; PIL's own 16-bit grey path clips instead, which we do not copy).
 * The pixel count is checked against the caller's limit from the header, before any
 * pixel buffer is allocated. Truncated or corrupt files and files that are neither PNG
 * nor JPEG are errors naming the file; libpng and libjpeg never abort the process. As in
 * PIL, a PNG is read only until every row is decoded and its IDAT/IEND CRCs are not
 * checked: a file cut short after its last row (in the zlib checksum, a CRC, no IEND), or
 * whose zlib stream lacks its end, still decodes; one cut before its last row does not.
 * Likewise a JPEG whose data runs out only after its last row (in the markers after the
 * scan, before EOI) decodes, as in PIL.
 */
#ifndef TDM_IMAGE_H
#define TDM_IMAGE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* The decoding work a JPEG may ask for (a progressive file may repeat a scan thousands of times,
 * each decoding every block again): at most this many scans, and at most FREE_PASSES decodes of
 * every 8x8 block plus BLOCKS_PER_BYTE block decodes per byte of the file. Real encoders write
 * 1 to about 20 scans; a file past either limit is refused, naming it. */
#define TDM_JPEG_MAX_SCANS       1000
#define TDM_JPEG_FREE_PASSES     32
#define TDM_JPEG_BLOCKS_PER_BYTE 8

/* PNG metadata, as PIL bounds it (a decompression bomb in a text chunk): a zTXt, iTXt or iCCP
 * chunk may inflate to at most MAX_INFLATED bytes, and the text chunks before the image data
 * hold at most MAX_TEXT bytes in all. A file past either is refused, naming it. */
#define TDM_PNG_MAX_INFLATED (1 << 20)
#define TDM_PNG_MAX_TEXT     (64 << 20)

/* A generous default limit: 64 Mpixel (192 MiB of RGB). */
#define TDM_IMAGE_MAX_PIXELS     (64ll * 1024 * 1024)
/* Image files larger than this are refused before being read. */
#define TDM_IMAGE_MAX_FILE_BYTES ((size_t)512 << 20)

typedef struct tdm_image {
    int width, height;
    uint8_t *rgb; /* [height, width, 3], rows top to bottom */
} tdm_image;

/* Reads only the header: width and height in pixels. Errors name the file (missing,
 * not PNG/JPEG, corrupt header). Cheap enough to call for every sample at start-up. */
int tdm_image_probe(const char *path, int *width, int *height, tdm_error *err);

/* Decodes a whole file to RGB8. Fails, naming the file, when width*height > max_pixels. */
int tdm_image_load(const char *path, int64_t max_pixels, tdm_image *out, tdm_error *err);

/* Same, from bytes already in memory; `name` is used in error messages. */
int tdm_image_decode(const uint8_t *data, size_t len, const char *name, int64_t max_pixels, tdm_image *out,
                     tdm_error *err);

/* Once *flag reads non-zero, a decode under way gives up with an error naming the file: a
 * program that turns SIGTERM into a flag (the trainer) points this at it, so that no picture
 * holds a stop up. NULL, the default, turns the check off. Set it before decoding starts. */
void tdm_image_set_stop_flag(const volatile sig_atomic_t *flag);

/* Frees the pixels and zeroes the struct (safe on a zeroed struct). */
void tdm_image_free(tdm_image *img);

/* Encodes RGB8 pixels ([h, w, 3]) as an 8-bit RGB PNG (no extra chunks, so the bytes are a
 * pure function of the pixels) and writes it to path (not fsynced). */
int tdm_image_write_png(const char *path, const uint8_t *rgb, int width, int height, tdm_error *err);

/* Encodes into a malloc'ed buffer (*out, *out_len); free() it. */
int tdm_image_encode_png(const uint8_t *rgb, int width, int height, uint8_t **out, size_t *out_len, tdm_error *err);

#endif
