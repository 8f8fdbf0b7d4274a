/* image.c - PNG (libpng) and JPEG (libjpeg-turbo) decoding to RGB8, PNG encoding.
 *
 * Both libraries report fatal errors through a callback that must not return; we
 * longjmp back to the decoding function, free what it allocated and turn the library's
 * message into a tdm_error. Pointers assigned after setjmp are `volatile` so they
 * survive the longjmp.
 */
#include "data/image.h"

#include <errno.h>
#include <stdio.h> /* before jpeglib.h, which needs FILE */

#include <jpeglib.h>
#include <jerror.h> /* JWRN_JPEG_EOF */
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "core/alloc.h"
#include "core/fs.h"

static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static int is_png(const uint8_t *d, size_t n) { return n >= 8 && memcmp(d, png_magic, 8) == 0; }
static int is_jpeg(const uint8_t *d, size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF; }

static const volatile sig_atomic_t *volatile g_stop_flag; /* tdm_image_set_stop_flag */

void tdm_image_set_stop_flag(const volatile sig_atomic_t *flag) { g_stop_flag = flag; }

static int check_size(const char *name, int64_t w, int64_t h, int64_t max_pixels, tdm_error *err) {
    if (w <= 0 || h <= 0)
        return tdm_errorf(err, "%s: image has an empty size %lldx%lld", name, (long long)w, (long long)h);
    if (w * h > max_pixels)
        return tdm_errorf(err, "%s: image is %lldx%lld = %lld pixels, more than the limit of %lld", name, (long long)w,
                          (long long)h, (long long)(w * h), (long long)max_pixels);
    return 0;
}

/* ---------------------------------------------------------------- PNG */

typedef struct png_io {
    const uint8_t *data;
    size_t len, pos;
    size_t cut_chunk;      /* offset of the IDAT chunk the file ends in; 0 when none */
    uint8_t cut_length[4]; /* what that chunk's length field reads as: the bytes it has */
    size_t after_idat;     /* offset of the chunk after the first run of IDAT chunks; SIZE_MAX if none */
    int ran_out;           /* a read went past the end of the file */
    int stopped;           /* a stop was requested (png_on_row) */
    char msg[256];
} png_io;

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Walks the chunks to the end of the first run of IDAT chunks. A file that ends inside an IDAT
 * chunk's data: that chunk is read as if it held just the bytes that are there, so zlib gets
 * every one of them and the rows they hold are decoded before the end of the file is met
 * (libpng asks for a chunk's data in one read, which would fail whole). */
static void png_scan_chunks(png_io *io) {
    size_t pos = 8;
    int in_idat = 0;
    io->after_idat = SIZE_MAX;
    while (io->len - pos >= 8) {
        uint32_t len = be32(io->data + pos);
        int idat = memcmp(io->data + pos + 4, "IDAT", 4) == 0;
        if (in_idat && !idat) {
            io->after_idat = pos;
            return;
        }
        in_idat = idat;
        if (len > io->len - pos - 8) {
            if (idat) {
                uint32_t have = (uint32_t)(io->len - pos - 8);
                io->cut_chunk = pos;
                for (int i = 0; i < 4; i++) io->cut_length[i] = (uint8_t)(have >> (24 - 8 * i));
            }
            return;
        }
        if (io->len - pos - 8 - len < 4) return; /* cut in the CRC */
        pos += 12 + (size_t)len;
    }
}

static void png_on_error(png_structp png, png_const_charp msg) {
    png_io *io = png_get_error_ptr(png);
    snprintf(io->msg, sizeof io->msg, "%s", msg);
    png_longjmp(png, 1);
}

/* After each row libpng decodes: a stop request ends the decoding. */
static void png_on_row(png_structp png, png_uint_32 row, int pass) {
    (void)row;
    (void)pass;
    if (g_stop_flag && *g_stop_flag) {
        ((png_io *)png_get_io_ptr(png))->stopped = 1;
        png_error(png, "decoding given up: a stop was requested");
    }
}

static void png_on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg; /* ancillary-chunk problems; PIL ignores them too */
}

static void png_read_mem(png_structp png, png_bytep out, png_size_t n) {
    png_io *io = png_get_io_ptr(png);
    if (n > io->len - io->pos) {
        io->ran_out = 1;
        png_error(png, "file is truncated");
    }
    memcpy(out, io->data + io->pos, n);
    for (size_t i = 0; io->cut_chunk && i < 4; i++)
        if (io->cut_chunk + i >= io->pos && io->cut_chunk + i < io->pos + n)
            out[io->cut_chunk + i - io->pos] = io->cut_length[i];
    io->pos += n;
}

/* PIL's guards against decompression bombs in a PNG's metadata, on the chunks before the image
 * data (the only ones read): a zTXt, iTXt or iCCP chunk that inflates to more than
 * TDM_PNG_MAX_INFLATED bytes ("Decompressed Data Too Large"), or text chunks of more than
 * TDM_PNG_MAX_TEXT bytes in all, refuse the file. The chunks come from memory or from a FILE
 * (the header probe, which reads no more than it must). */
typedef struct png_src {
    const uint8_t *mem; /* or */
    FILE *f;
    uint64_t len; /* of mem; UINT64_MAX for a FILE */
} png_src;

static size_t src_read(const png_src *s, uint64_t off, void *buf, size_t n) {
    if (s->f) return fseeko(s->f, (off_t)off, SEEK_SET) == 0 ? fread(buf, 1, n, s->f) : 0;
    if (off >= s->len) return 0;
    if (n > s->len - off) n = (size_t)(s->len - off);
    memcpy(buf, s->mem + off, n);
    return n;
}

/* The offset of the first NUL in [from, end), or end when there is none. */
static uint64_t src_find_nul(const png_src *s, uint64_t from, uint64_t end) {
    uint8_t buf[4096];
    while (from < end) {
        size_t want = end - from < sizeof buf ? (size_t)(end - from) : sizeof buf;
        size_t got = src_read(s, from, buf, want);
        if (got == 0) return end;
        const uint8_t *z = memchr(buf, 0, got);
        if (z) return from + (uint64_t)(z - buf);
        from += got;
    }
    return end;
}

/* How many bytes the zlib stream in [from, end) inflates to, counting no further than limit + 1. */
static uint64_t src_inflated_size(const png_src *s, uint64_t from, uint64_t end, uint64_t limit) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK) return 0;
    uint8_t in[16384], out[16384];
    uint64_t total = 0;
    int rc = Z_OK;
    while (rc == Z_OK && total <= limit) {
        if (z.avail_in == 0) {
            size_t want = end - from < sizeof in ? (size_t)(end - from) : sizeof in;
            size_t got = want ? src_read(s, from, in, want) : 0;
            if (got == 0) break; /* the data ends: as far as it goes */
            from += got;
            z.next_in = in;
            z.avail_in = (uInt)got;
        }
        z.next_out = out;
        z.avail_out = sizeof out;
        rc = inflate(&z, Z_NO_FLUSH);
        total += sizeof out - z.avail_out;
        if (rc == Z_BUF_ERROR && z.avail_in == 0) rc = Z_OK; /* wants more input */
    }
    inflateEnd(&z);
    return total;
}

static int png_check_metadata(const png_src *s, const char *name, tdm_error *err) {
    uint64_t pos = 8, text = 0;
    uint8_t h[8];
    while (src_read(s, pos, h, 8) == 8) {
        const uint64_t len = be32(h), body = pos + 8, end = body + len;
        if (!memcmp(h + 4, "IDAT", 4) || !memcmp(h + 4, "IEND", 4) || len > 0x7fffffffu) return 0;
        const int ztxt = !memcmp(h + 4, "zTXt", 4), itxt = !memcmp(h + 4, "iTXt", 4), iccp = !memcmp(h + 4, "iCCP", 4);
        uint64_t key = src_find_nul(s, body, end), z = end; /* the keyword's NUL; the zlib data */
        int compressed = 0;
        if (!memcmp(h + 4, "tEXt", 4)) {
            text += end - key;
        } else if ((ztxt || iccp) && key + 2 <= end) {
            compressed = 1, z = key + 2; /* the keyword's NUL, the compression method */
        } else if (itxt && key + 3 <= end) {
            uint8_t flag = 0;
            src_read(s, key + 1, &flag, 1);
            uint64_t lang = src_find_nul(s, key + 3, end), tkey = lang < end ? src_find_nul(s, lang + 1, end) : end;
            if (tkey < end) {
                compressed = flag != 0, z = tkey + 1;
                if (!compressed) text += end - z;
            }
        }
        if (compressed) {
            uint64_t n = src_inflated_size(s, z, end, TDM_PNG_MAX_INFLATED);
            if (n > TDM_PNG_MAX_INFLATED)
                return tdm_errorf(err,
                                  "%s: PNG %.4s chunk inflates to more than %d MiB, the limit (a "
                                  "decompression bomb?)",
                                  name, (const char *)h + 4, TDM_PNG_MAX_INFLATED >> 20);
            if (!iccp) text += n;
        }
        if (text > TDM_PNG_MAX_TEXT)
            return tdm_errorf(err, "%s: PNG text chunks hold more than %d MiB, the limit", name,
                              TDM_PNG_MAX_TEXT >> 20);
        pos = end + 4;
    }
    return 0;
}

/* libpng's own bounds on what it allocates for ancillary chunks (the metadata above is checked
 * first), set here whatever the library's build defaults: it skips a chunk past them. */
static void png_set_limits(png_structp png) {
    png_set_chunk_malloc_max(png, (png_alloc_size_t)8 << 20);
    png_set_chunk_cache_max(png, 1000);
}

/* Whether libpng has produced every row (of the last interlace pass): it counts a row once the
 * row is in the caller's buffer, before it reads what follows the image data. */
static int png_rows_done(png_structp png, png_infop info) {
    if (png_get_interlace_type(png, info) != PNG_INTERLACE_NONE) return png_get_current_pass_number(png) >= 7;
    return png_get_current_row_number(png) >= png_get_image_height(png, info);
}

static int decode_png(const uint8_t *data, size_t len, const char *name, int64_t max_pixels, tdm_image *out,
                      tdm_error *err) {
    png_src src = {.mem = data, .len = len};
    if (png_check_metadata(&src, name, err) != 0) return -1;
    png_io io = {.data = data, .len = len};
    png_scan_chunks(&io);
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return tdm_errorf(err, "%s: libpng could not start", name);
    }
    png_set_limits(png);
    uint8_t *volatile pixels = NULL;
    png_bytep *volatile rows = NULL;
    volatile int size_error = 0;
    if (setjmp(png_jmpbuf(png))) {
        free(pixels);
        free(rows);
        png_destroy_read_struct(&png, &info, NULL);
        if (size_error) return -1;
        return tdm_errorf(err, "%s: %s%s", name, io.stopped ? "" : "corrupt PNG: ", io.msg);
    }
    png_set_read_fn(png, &io, png_read_mem);
    png_set_read_status_fn(png, png_on_row);
    png_read_info(png, info);
    /* As PIL: the CRCs of the IDAT chunks are not checked (their data still goes through
     * zlib's own check), and nothing after the image data is read (no png_read_end). */
    png_set_crc_action(png, PNG_CRC_QUIET_USE, PNG_CRC_DEFAULT);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if (check_size(name, w, h, max_pixels, err) != 0) {
        size_error = 1;
        png_longjmp(png, 1);
    }
    int depth = png_get_bit_depth(png, info), ctype = png_get_color_type(png, info);
    /* 16-bit greyscale, as PIL does it: the file opens as a 16-bit integer image ("I;16") and
     * convert("RGB") clips each value to 255 (Pillow's I16_RGB / I_RGB), where the other 16-bit
     * types keep their high byte. Only values below 256 keep their grey: the usual 16-bit grey
     * picture comes out nearly white, as in any pipeline that loads images with PIL. */
    const int grey16 = ctype == PNG_COLOR_TYPE_GRAY && depth == 16;
    /* A palette shorter than its bit depth allows: libpng expands the missing entries to black,
     * PIL to its initial grey ramp, (i, i, i) for index i. */
    png_colorp plte;
    int n_plte;
    if (ctype == PNG_COLOR_TYPE_PALETTE && png_get_PLTE(png, info, &plte, &n_plte) == PNG_INFO_PLTE &&
        n_plte < (1 << depth)) {
        png_color full[256];
        for (int i = 0; i < (1 << depth); i++) full[i] = (png_color){(png_byte)i, (png_byte)i, (png_byte)i};
        memcpy(full, plte, sizeof(png_color) * (size_t)n_plte);
        png_set_PLTE(png, info, full, 1 << depth);
    }
    /* The transformations of PIL's convert("RGB") for the rest: expand, 8 bits, drop alpha,
     * grey -> RGB. png_set_palette_to_rgb also turns a tRNS chunk into alpha, which is
     * stripped again. */
    if (!grey16) {
        if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
        if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
        if (depth == 16) png_set_strip_16(png);
        if ((ctype & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS)) png_set_strip_alpha(png);
        if (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    const size_t row = (size_t)w * (grey16 ? 2 : 3), n = (size_t)w * h;
    if (png_get_rowbytes(png, info) != row) png_error(png, "unexpected row size after conversion");
    /* 16-bit grey rows are read behind the RGB image, then widened into it */
    pixels = tdm_xmalloc(3 * n + (grey16 ? 2 * n : 0));
    rows = tdm_xmalloc(sizeof(png_bytep) * h);
    for (png_uint_32 y = 0; y < h; y++) rows[y] = pixels + (grey16 ? 3 * n : 0) + (size_t)y * row;
    /* PIL stops reading once it has every row: a file that ends after that (in the zlib
     * checksum, the last CRC, before IEND), or whose zlib stream lacks its end (libpng then reads
     * the next chunk's header for more), opens there, and decodes here too. A checksum that is
     * present and wrong is still an error, in both. */
    if (setjmp(png_jmpbuf(png))) {
        int short_data = io.ran_out || (io.after_idat != SIZE_MAX && io.pos >= io.after_idat + 8);
        if (io.stopped || !short_data || !png_rows_done(png, info)) {
            free(pixels);
            free(rows);
            png_destroy_read_struct(&png, &info, NULL);
            return tdm_errorf(err, "%s: %s%s", name, io.stopped ? "" : "corrupt PNG: ", io.msg);
        }
    } else {
        png_read_image(png, rows);
    }
    const uint8_t *raw = pixels + 3 * n;
    for (size_t i = 0; grey16 && i < n; i++) { /* big-endian: raw[2i] is the high byte */
        uint8_t v = raw[2 * i] == 0 ? raw[2 * i + 1] : 255;
        pixels[3 * i] = pixels[3 * i + 1] = pixels[3 * i + 2] = v;
    }
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    out->width = (int)w;
    out->height = (int)h;
    out->rgb = grey16 ? tdm_xrealloc(pixels, 3 * n) : pixels;
    return 0;
}

/* ---------------------------------------------------------------- JPEG */

typedef struct jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    int rows_done; /* every scanline has been read */
    int eof;       /* the data ran out */
    char msg[JMSG_LENGTH_MAX];
    /* decode_jpeg's bound on the decoder's work (jpeg_on_progress) */
    struct jpeg_progress_mgr progress;
    int scans;              /* scans begun */
    int64_t blocks, budget; /* 8x8 blocks decoded by the scans begun (every scan decodes each block of its
                                components again); the most allowed */
    size_t len;             /* of the file, bytes */
    char refusal[256];      /* why the monitor stopped the decoder; "" when it did not */
} jpeg_err;

static void jpeg_on_error(j_common_ptr c) {
    jpeg_err *e = (jpeg_err *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jump, 1);
}

/* libjpeg only warns on a truncated file and pads it with grey; PIL refuses such a file
 * ("image file is truncated"), and so do we. Once every row is out, PIL stops where the data
 * runs out (in the markers after the last scan, before EOI) and keeps the image; so does
 * decode_jpeg. Other warnings are ignored, as in PIL. */
static void jpeg_on_message(j_common_ptr c, int level) {
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
        ((jpeg_err *)c->err)->eof = 1;
        jpeg_on_error(c);
    }
}

/* Called by libjpeg before each row of blocks it reads and each row it writes out. A progressive
 * JPEG may hold any number of scans, and every scan decodes each block of its components once
 * more: a small file that repeats one scan thousands of times keeps the decoder busy for
 * minutes. So the scans are counted and their blocks charged against a budget; past either
 * limit, or once a stop is requested, the decoder is left through the error jump. */
static void jpeg_on_progress(j_common_ptr c) {
    jpeg_err *e = (jpeg_err *)c->err;
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (g_stop_flag && *g_stop_flag) {
        snprintf(e->refusal, sizeof e->refusal, "decoding given up: a stop was requested");
        longjmp(e->jump, 1);
    }
    if (d->input_scan_number == e->scans) return;
    e->scans = d->input_scan_number; /* the header of a new scan has been read */
    for (int i = 0; i < d->comps_in_scan; i++)
        e->blocks += (int64_t)d->cur_comp_info[i]->width_in_blocks * d->cur_comp_info[i]->height_in_blocks;
    if (e->scans > TDM_JPEG_MAX_SCANS)
        snprintf(e->refusal, sizeof e->refusal,
                 "JPEG of more than %d scans, the limit (a file built to stall "
                 "the decoder?)",
                 TDM_JPEG_MAX_SCANS);
    else if (e->blocks > e->budget)
        snprintf(e->refusal, sizeof e->refusal,
                 "JPEG whose first %d scans decode %lld blocks, more than the %lld "
                 "allowed for a %ux%u picture in %zu bytes (a file built to stall the decoder?)",
                 e->scans, (long long)e->blocks, (long long)e->budget, d->image_width, d->image_height, e->len);
    if (e->refusal[0]) longjmp(e->jump, 1);
}

static int decode_jpeg(const uint8_t *data, size_t len, const char *name, int64_t max_pixels, tdm_image *out,
                       tdm_error *err) {
    struct jpeg_decompress_struct cinfo;
    jpeg_err jerr;
    cinfo.err = jpeg_std_error(&jerr.pub);
    jerr.pub.error_exit = jpeg_on_error;
    jerr.pub.emit_message = jpeg_on_message;
    jerr.rows_done = jerr.eof = 0;
    jerr.scans = 0;
    jerr.blocks = jerr.budget = 0;
    jerr.len = len;
    jerr.refusal[0] = 0;
    uint8_t *volatile pixels = NULL;
    if (setjmp(jerr.jump)) {
        if (jerr.rows_done && jerr.eof && !jerr.refusal[0]) goto done;
        free(pixels);
        jpeg_destroy_decompress(&cinfo);
        if (jerr.refusal[0]) return tdm_errorf(err, "%s: %s", name, jerr.refusal);
        return tdm_errorf(err, "%s: corrupt JPEG: %s", name, jerr.msg);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    if (check_size(name, cinfo.image_width, cinfo.image_height, max_pixels, err) != 0) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    /* The budget: TDM_JPEG_FREE_PASSES decodes of every block, which any real encoder's scans fit
     * in, plus TDM_JPEG_BLOCKS_PER_BYTE per byte of the file for files whose data is that rich. */
    int64_t all_blocks = 0;
    for (int i = 0; i < cinfo.num_components; i++)
        all_blocks += (int64_t)cinfo.comp_info[i].width_in_blocks * cinfo.comp_info[i].height_in_blocks;
    jerr.budget = TDM_JPEG_FREE_PASSES * all_blocks + TDM_JPEG_BLOCKS_PER_BYTE * (int64_t)len;
    jerr.progress.progress_monitor = jpeg_on_progress;
    cinfo.progress = &jerr.progress;
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&cinfo);
        return tdm_errorf(err, "%s: CMYK JPEG files are not supported (convert it to RGB first)", name);
    }
    /* Library defaults (ISLOW DCT, fancy upsampling) are what PIL uses too. */
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != 3) {
        jpeg_destroy_decompress(&cinfo);
        return tdm_errorf(err, "%s: JPEG decoded to %d channels, expected 3", name, cinfo.output_components);
    }
    size_t stride = (size_t)cinfo.output_width * 3;
    pixels = tdm_xmalloc(stride * cinfo.output_height);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = pixels + stride * cinfo.output_scanline;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jerr.rows_done = 1;
    jpeg_finish_decompress(&cinfo);
done:
    out->width = (int)cinfo.output_width;
    out->height = (int)cinfo.output_height;
    out->rgb = pixels;
    jpeg_destroy_decompress(&cinfo);
    return 0;
}

/* ---------------------------------------------------------------- public */

int tdm_image_decode(const uint8_t *data, size_t len, const char *name, int64_t max_pixels, tdm_image *out,
                     tdm_error *err) {
    memset(out, 0, sizeof *out);
    if (is_png(data, len)) return decode_png(data, len, name, max_pixels, out, err);
    if (is_jpeg(data, len)) return decode_jpeg(data, len, name, max_pixels, out, err);
    return tdm_errorf(err, "%s: not a PNG or JPEG file (unknown magic bytes)", name);
}

int tdm_image_load(const char *path, int64_t max_pixels, tdm_image *out, tdm_error *err) {
    size_t len;
    memset(out, 0, sizeof *out);
    char *data = tdm_read_file(path, TDM_IMAGE_MAX_FILE_BYTES, &len, err);
    if (!data) return -1;
    int rc = tdm_image_decode((const uint8_t *)data, len, path, max_pixels, out, err);
    free(data);
    return rc;
}

void tdm_image_free(tdm_image *img) {
    free(img->rgb);
    memset(img, 0, sizeof *img);
}

static int probe_jpeg(FILE *f, const char *path, int *width, int *height, tdm_error *err) {
    struct jpeg_decompress_struct cinfo;
    jpeg_err jerr;
    cinfo.err = jpeg_std_error(&jerr.pub);
    jerr.pub.error_exit = jpeg_on_error;
    jerr.pub.emit_message = jpeg_on_message;
    jerr.rows_done = jerr.eof = 0;
    if (setjmp(jerr.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return tdm_errorf(err, "%s: corrupt JPEG header: %s", path, jerr.msg);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_stdio_src(&cinfo, f); /* reads only up to the first scan */
    jpeg_read_header(&cinfo, TRUE);
    *width = (int)cinfo.image_width;
    *height = (int)cinfo.image_height;
    /* known from the header, so found when the data is scanned, not in the middle of training */
    int cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    jpeg_destroy_decompress(&cinfo);
    if (cmyk) return tdm_errorf(err, "%s: CMYK JPEG files are not supported (convert it to RGB first)", path);
    return 0;
}

/* The chunks up to the first IDAT, through libpng as the decoder reads them: a header that is
 * wrong (bad IHDR values or CRC, an unknown interlace method) is found here, when the dataset is
 * scanned, rather than when training reaches the picture. */
static int probe_png(FILE *f, const char *path, int *width, int *height, tdm_error *err) {
    png_src src = {.f = f, .len = UINT64_MAX};
    if (png_check_metadata(&src, path, err) != 0) return -1;
    rewind(f);
    png_io io = {0};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return tdm_errorf(err, "%s: libpng could not start", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        return tdm_errorf(err, "%s: corrupt PNG: %s", path, io.msg);
    }
    png_set_limits(png);
    png_init_io(png, f);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    png_destroy_read_struct(&png, &info, NULL);
    if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu)
        return tdm_errorf(err, "%s: corrupt PNG: size %ux%u", path, (unsigned)w, (unsigned)h);
    *width = (int)w;
    *height = (int)h;
    return 0;
}

int tdm_image_probe(const char *path, int *width, int *height, tdm_error *err) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) /* fopen opens a directory; its read fails */
        return tdm_errorf(err, "%s: not a regular file (expected a PNG or JPEG image)", path);
    FILE *f = fopen(path, "rb");
    if (!f) return tdm_errorf(err, "%s: cannot open image: %s", path, strerror(errno));
    uint8_t head[8];
    size_t n = fread(head, 1, sizeof head, f);
    int rc;
    if (is_png(head, n)) {
        rewind(f);
        rc = probe_png(f, path, width, height, err);
    } else if (is_jpeg(head, n)) {
        rewind(f);
        rc = probe_jpeg(f, path, width, height, err);
    } else {
        rc = tdm_errorf(err, "%s: not a PNG or JPEG file (unknown magic bytes)", path);
    }
    fclose(f);
    return rc;
}

/* ---------------------------------------------------------------- PNG writing */

typedef struct png_sink {
    uint8_t *data;
    size_t len, cap;
    char msg[256];
} png_sink;

static void png_write_mem(png_structp png, png_bytep in, png_size_t n) {
    png_sink *s = png_get_io_ptr(png);
    if (s->len + n > s->cap) {
        s->cap = (s->len + n) * 2;
        s->data = tdm_xrealloc(s->data, s->cap);
    }
    memcpy(s->data + s->len, in, n);
    s->len += n;
}

static void png_flush_mem(png_structp png) { (void)png; }

static void png_on_write_error(png_structp png, png_const_charp msg) {
    png_sink *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

int tdm_image_encode_png(const uint8_t *rgb, int width, int height, uint8_t **out, size_t *out_len, tdm_error *err) {
    png_sink sink = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, png_on_write_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return tdm_errorf(err, "libpng could not start");
    }
    png_bytep *volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        free(rows);
        free(sink.data);
        png_destroy_write_struct(&png, &info);
        return tdm_errorf(err, "PNG encoding failed: %s", sink.msg);
    }
    png_set_write_fn(png, &sink, png_write_mem, png_flush_mem);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    rows = tdm_xmalloc(sizeof(png_bytep) * (size_t)height);
    for (int y = 0; y < height; y++) rows[y] = (png_bytep)(rgb + (size_t)y * width * 3);
    png_write_image(png, rows);
    png_write_end(png, NULL);
    free(rows);
    png_destroy_write_struct(&png, &info);
    *out = sink.data;
    *out_len = sink.len;
    return 0;
}

int tdm_image_write_png(const char *path, const uint8_t *rgb, int width, int height, tdm_error *err) {
    uint8_t *buf;
    size_t len;
    if (tdm_image_encode_png(rgb, width, height, &buf, &len, err) != 0) return tdm_error_prefix(err, "%s", path);
    /* A plain write, not tdm_write_file_atomic: gen-data writes thousands of small files
     * and an fsync each would dominate its run time. */
    FILE *f = fopen(path, "wb");
    int rc = 0;
    if (!f || fwrite(buf, 1, len, f) != len) rc = tdm_errorf(err, "%s: cannot write", path);
    if (f && fclose(f) != 0 && rc == 0) rc = tdm_errorf(err, "%s: cannot write", path);
    free(buf);
    return rc;
}
