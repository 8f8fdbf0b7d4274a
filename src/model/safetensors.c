/* safetensors.c - safetensors reader (single file or sharded) and writer; see safetensors.h. */
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "kernels/kernels.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c reads and writes little-endian data in place: a big-endian host needs byte swaps"
#endif

/* ---- dtypes and conversions ----------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [TDM_ST_F32] = {"F32", 4},   [TDM_ST_F16] = {"F16", 2},         [TDM_ST_BF16] = {"BF16", 2},
    [TDM_ST_F64] = {"F64", 8},   [TDM_ST_I64] = {"I64", 8},         [TDM_ST_I32] = {"I32", 4},
    [TDM_ST_I16] = {"I16", 2},   [TDM_ST_I8] = {"I8", 1},           [TDM_ST_U64] = {"U64", 8},
    [TDM_ST_U32] = {"U32", 4},   [TDM_ST_U16] = {"U16", 2},         [TDM_ST_U8] = {"U8", 1},
    [TDM_ST_BOOL] = {"BOOL", 1}, [TDM_ST_F8_E4M3] = {"F8_E4M3", 1}, [TDM_ST_F8_E5M2] = {"F8_E5M2", 1},
};
#define N_DTYPES ((int)(sizeof dtypes / sizeof *dtypes))

int tdm_st_dtype_from_name(const char *name) {
    for (int i = 0; i < N_DTYPES; i++)
        if (strcmp(dtypes[i].name, name) == 0) return i;
    return -1;
}
const char *tdm_st_dtype_name(tdm_st_dtype d) { return (int)d >= 0 && (int)d < N_DTYPES ? dtypes[d].name : "?"; }
size_t tdm_st_dtype_size(tdm_st_dtype d) { return (int)d >= 0 && (int)d < N_DTYPES ? dtypes[d].size : 0; }

uint16_t tdm_f32_to_bf16(float x) {
    uint16_t h;
    tdm_round_to_bf16(NULL, &h, &x, 1); /* nearest, ties to even; a NaN stays a quiet NaN */
    return h;
}

float tdm_bf16_to_f32(uint16_t h) {
    float x;
    tdm_widen_bf16(&x, &h, 1);
    return x;
}

float tdm_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13); /* inf or NaN (payload kept) */
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (man << 13); /* rebias 15 -> 127 */
    } else if (man == 0) {
        u = sign; /* +-0 */
    } else {
        /* subnormal: man * 2^-24, renormalised */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ---- the reader ------------------------------------------------------------------------- */

typedef struct st_file {
    char *path;
    int fd;
    tdm_json_doc *doc;   /* the header; tensor names point into it */
    uint64_t data_start; /* 8 + header length */
    uint64_t data_size;
} st_file;

struct tdm_safetensors {
    st_file *files;
    int n_files;
    tdm_st_tensor *t; /* sorted by name */
    int n, cap;
    const tdm_json *metadata; /* first file's __metadata__, or NULL */
    char *source;             /* the path given to open: names the checkpoint in messages */
};

/* Reads exactly n bytes at offset; 0, or -1 with errno (0 for a short file). */
static int pread_full(int fd, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0;
            return -1;
        }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const tdm_st_tensor *x = *(const tdm_st_tensor *const *)a, *y = *(const tdm_st_tensor *const *)b;
    if (x->file_offset != y->file_offset) return x->file_offset < y->file_offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const tdm_st_tensor *)a)->name, ((const tdm_st_tensor *)b)->name);
}

static int cmp_name_ptr(const void *a, const void *b) {
    return strcmp((*(const tdm_st_tensor *const *)a)->name, (*(const tdm_st_tensor *const *)b)->name);
}

/* One tensor's header entry: dtype, shape, offsets, checked against the data section. */
static int parse_entry(const char *path, const char *name, const tdm_json *e, uint64_t data_size, tdm_st_tensor *t,
                       tdm_error *err) {
    if (e->type != TDM_JSON_OBJECT)
        return tdm_errorf(err, "%s: tensor \"%s\": expected an object, found %s", path, name,
                          tdm_json_type_name(e->type));
    const tdm_json *dt = tdm_json_get(e, "dtype"), *sh = tdm_json_get(e, "shape"),
                   *of = tdm_json_get(e, "data_offsets");
    if (!dt || dt->type != TDM_JSON_STRING)
        return tdm_errorf(err, "%s: tensor \"%s\": missing string \"dtype\"", path, name);
    int d = tdm_st_dtype_from_name(dt->str);
    if (d < 0) return tdm_errorf(err, "%s: tensor \"%s\": unknown dtype \"%s\"", path, name, dt->str);
    if (!sh || sh->type != TDM_JSON_ARRAY)
        return tdm_errorf(err, "%s: tensor \"%s\": missing list \"shape\"", path, name);
    if (sh->len > TDM_ST_MAX_DIMS)
        return tdm_errorf(err, "%s: tensor \"%s\": %zu dimensions, at most %d supported", path, name, sh->len,
                          TDM_ST_MAX_DIMS);
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = (tdm_st_dtype)d;
    t->ndim = (int)sh->len;
    t->numel = 1;
    for (size_t i = 0; i < sh->len; i++) {
        const tdm_json *v = sh->items[i];
        if (v->type != TDM_JSON_NUMBER || !v->is_int || v->i64 < 0)
            return tdm_errorf(err, "%s: tensor \"%s\": shape entry %zu is not a non-negative integer", path, name, i);
        t->shape[i] = v->i64;
        if (__builtin_mul_overflow(t->numel, v->i64, &t->numel))
            return tdm_errorf(err, "%s: tensor \"%s\": shape's element count overflows 64 bits", path, name);
    }
    uint64_t nbytes;
    if (__builtin_mul_overflow((uint64_t)t->numel, (uint64_t)dtypes[d].size, &nbytes))
        return tdm_errorf(err, "%s: tensor \"%s\": byte size overflows 64 bits", path, name);
    if (!of || of->type != TDM_JSON_ARRAY || of->len != 2 || of->items[0]->type != TDM_JSON_NUMBER ||
        !of->items[0]->is_int || of->items[1]->type != TDM_JSON_NUMBER || !of->items[1]->is_int ||
        of->items[0]->i64 < 0 || of->items[1]->i64 < 0)
        return tdm_errorf(err, "%s: tensor \"%s\": \"data_offsets\" must be [begin, end] non-negative integers", path,
                          name);
    uint64_t b = (uint64_t)of->items[0]->i64, en = (uint64_t)of->items[1]->i64;
    if (b > en)
        return tdm_errorf(err, "%s: tensor \"%s\": data_offsets [%llu, %llu] end before they begin", path, name,
                          (unsigned long long)b, (unsigned long long)en);
    if (en > data_size)
        return tdm_errorf(err,
                          "%s: tensor \"%s\": data_offsets [%llu, %llu] run past the %llu-byte data section "
                          "(truncated file or lying header)",
                          path, name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)data_size);
    if (en - b != nbytes)
        return tdm_errorf(
            err, "%s: tensor \"%s\": data_offsets span %llu bytes, but %s shape of %lld elements needs %llu", path,
            name, (unsigned long long)(en - b), dtypes[d].name, (long long)t->numel, (unsigned long long)nbytes);
    t->file_offset = b; /* relative for now; made absolute by the caller */
    t->nbytes = nbytes;
    return 0;
}

/* Longer than most: every check of an untrusted header, in the order the file is read, each
 * with its own message.
 * Opens one .safetensors file, validates its header and appends its tensors as shard `shard`. */
static int open_file(tdm_safetensors *st, const char *path, tdm_error *err) {
    if (st->n_files >= TDM_ST_MAX_SHARDS) return tdm_errorf(err, "%s: more than %d files", path, TDM_ST_MAX_SHARDS);
    st->files = tdm_xrealloc(st->files, (size_t)(st->n_files + 1) * sizeof *st->files);
    st_file *f = &st->files[st->n_files];
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = tdm_xstrdup(path);
    st->n_files++; /* owned from here on: close() frees it whatever happens below */
    int shard = st->n_files - 1;

    uint64_t size;
    if ((f->fd = tdm_open_regular(path, &size, err)) < 0) return -1;
    unsigned char lenb[8];
    if (size < 8 || pread_full(f->fd, lenb, 8, 0) != 0)
        return tdm_errorf(err, "%s: %llu bytes, too short for the 8-byte header length", path,
                          (unsigned long long)size);
    /* A Hugging Face clone made without git-lfs leaves ~130-byte text pointers in place of the
     * weights; their first 8 bytes, "version ", would read as an absurd header length. */
    static const char lfs[] = "version https://git-lfs";
    char head[sizeof lfs - 1];
    if (size < 1024 && size >= sizeof head && pread_full(f->fd, head, sizeof head, 0) == 0 &&
        !memcmp(head, lfs, sizeof head))
        return tdm_errorf(err,
                          "%s: a Git LFS pointer of %llu bytes, not the tensor data (fetch the weights: "
                          "git lfs pull, or download the file)",
                          path, (unsigned long long)size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | lenb[i];
    if (hlen > TDM_ST_MAX_HEADER)
        return tdm_errorf(err, "%s: header length %llu bytes is above the limit of %llu (not a safetensors file?)",
                          path, (unsigned long long)hlen, (unsigned long long)TDM_ST_MAX_HEADER);
    if (hlen < 2 || 8 + hlen > size)
        return tdm_errorf(err, "%s: header of %llu bytes does not fit in the %llu-byte file (truncated?)", path,
                          (unsigned long long)hlen, (unsigned long long)size);
    char *text = tdm_xmalloc((size_t)hlen + 1);
    if (pread_full(f->fd, text, (size_t)hlen, 8) != 0) {
        free(text);
        return tdm_errorf(err, "%s: cannot read the %llu-byte header", path, (unsigned long long)hlen);
    }
    text[hlen] = 0;
    f->doc = tdm_json_parse(text, (size_t)hlen, path, err);
    free(text);
    if (!f->doc) {
        if (err) { /* the JSON message already starts with the path */
            size_t l = strlen(err->msg);
            snprintf(err->msg + l, sizeof err->msg - l, " (in the safetensors header; not a safetensors file?)");
        }
        return -1;
    }
    f->data_start = 8 + hlen;
    f->data_size = size - f->data_start;
    const tdm_json *root = tdm_json_root(f->doc);
    if (root->type != TDM_JSON_OBJECT) return tdm_errorf(err, "%s: header is not a JSON object", path);

    int first = st->n;
    for (size_t i = 0; i < root->len; i++) {
        const char *key = root->keys[i];
        const tdm_json *v = root->items[i];
        if (strcmp(key, "__metadata__") == 0) {
            if (v->type != TDM_JSON_OBJECT) return tdm_errorf(err, "%s: \"__metadata__\" is not an object", path);
            for (size_t k = 0; k < v->len; k++)
                if (v->items[k]->type != TDM_JSON_STRING)
                    return tdm_errorf(err, "%s: \"__metadata__\" value of \"%s\" is not a string", path, v->keys[k]);
            if (shard == 0) st->metadata = v;
            continue;
        }
        if (st->n == st->cap) {
            st->cap = st->cap ? 2 * st->cap : 256;
            st->t = tdm_xrealloc(st->t, (size_t)st->cap * sizeof *st->t);
        }
        tdm_st_tensor *t = &st->t[st->n];
        if (parse_entry(path, key, v, f->data_size, t, err)) return -1;
        t->shard = shard;
        st->n++;
    }

    /* A name written twice is reported as such, before it could read as two tensors that
     * overlap (the same entry repeated) or as a tensor "in both" this file and itself. */
    int cnt = st->n - first;
    tdm_st_tensor **by = tdm_xmalloc((size_t)(cnt ? cnt : 1) * sizeof *by);
    for (int i = 0; i < cnt; i++) by[i] = &st->t[first + i];
    qsort(by, (size_t)cnt, sizeof *by, cmp_name_ptr);
    for (int i = 1; i < cnt; i++)
        if (!strcmp(by[i]->name, by[i - 1]->name)) {
            tdm_errorf(err, "%s: tensor \"%s\" appears twice in the header", path, by[i]->name);
            free(by);
            return -1;
        }
    /* Sorted by position, the tensors must tile the data section: no overlap, no gap. */
    qsort(by, (size_t)cnt, sizeof *by, cmp_begin);
    uint64_t at = 0;
    int rc = 0;
    for (int i = 0; i < cnt && rc == 0; i++) {
        if (by[i]->file_offset < at)
            rc = tdm_errorf(err, "%s: tensor \"%s\" (bytes %llu..%llu) overlaps tensor \"%s\" (ending at %llu)", path,
                            by[i]->name, (unsigned long long)by[i]->file_offset,
                            (unsigned long long)(by[i]->file_offset + by[i]->nbytes), by[i - 1]->name,
                            (unsigned long long)at);
        else if (by[i]->file_offset > at)
            rc = tdm_errorf(err, "%s: bytes %llu..%llu of the data section belong to no tensor (before \"%s\")", path,
                            (unsigned long long)at, (unsigned long long)by[i]->file_offset, by[i]->name);
        at = by[i]->file_offset + by[i]->nbytes;
    }
    free(by);
    if (rc) return -1;
    if (at != f->data_size)
        return tdm_errorf(err, "%s: the tensors cover %llu bytes but the data section has %llu", path,
                          (unsigned long long)at, (unsigned long long)f->data_size);
    for (int i = first; i < st->n; i++) st->t[i].file_offset += f->data_start;
    return 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A sharded checkpoint: open each shard the weight map names, then check the map
 * against what the shards hold. */
static int open_index(tdm_safetensors *st, const char *index_path, tdm_error *err) {
    size_t len;
    char *text = tdm_read_file(index_path, (size_t)TDM_ST_MAX_HEADER, &len, err);
    if (!text) return -1;
    tdm_json_doc *doc = tdm_json_parse(text, len, index_path, err);
    free(text);
    if (!doc) return -1;
    int rc = -1;
    char dir[4096], shard_path[8192];
    const char **shards = NULL;
    int n_shards = 0;
    tdm_dirname(index_path, dir, sizeof dir);
    const tdm_json *wm = tdm_json_get(tdm_json_root(doc), "weight_map");
    if (!wm || wm->type != TDM_JSON_OBJECT) {
        tdm_errorf(err, "%s: missing object \"weight_map\"", index_path);
        goto out;
    }
    shards = tdm_xcalloc(wm->len ? wm->len : 1, sizeof *shards);
    for (size_t i = 0; i < wm->len; i++) {
        const tdm_json *v = wm->items[i];
        if (v->type != TDM_JSON_STRING) {
            tdm_errorf(err, "%s: weight_map: tensor \"%s\": file name is not a string", index_path, wm->keys[i]);
            goto out;
        }
        if (!v->str[0] || strchr(v->str, '/') || !strcmp(v->str, ".") || !strcmp(v->str, "..")) {
            tdm_errorf(err, "%s: weight_map: tensor \"%s\": \"%s\" is not a plain file name", index_path, wm->keys[i],
                       v->str);
            goto out;
        }
        int seen = 0;
        for (int s = 0; s < n_shards && !seen; s++) seen = !strcmp(shards[s], v->str);
        if (!seen) {
            if (n_shards >= TDM_ST_MAX_SHARDS) {
                tdm_errorf(err, "%s: more than %d shard files", index_path, TDM_ST_MAX_SHARDS);
                goto out;
            }
            shards[n_shards++] = v->str;
        }
    }
    if (n_shards == 0) {
        tdm_errorf(err, "%s: weight_map lists no tensors", index_path);
        goto out;
    }
    for (int s = 0; s < n_shards; s++) {
        snprintf(shard_path, sizeof shard_path, "%s/%s", dir, shards[s]);
        if (open_file(st, shard_path, err)) goto out;
    }
    qsort(st->t, (size_t)st->n, sizeof *st->t, cmp_name);
    for (int i = 1; i < st->n; i++)
        if (!strcmp(st->t[i].name, st->t[i - 1].name)) {
            tdm_errorf(err, "%s: tensor \"%s\" is in both %s and %s", index_path, st->t[i].name,
                       st->files[st->t[i - 1].shard].path, st->files[st->t[i].shard].path);
            goto out;
        }
    for (int i = 0; i < st->n; i++) {
        const tdm_json *v = tdm_json_get(wm, st->t[i].name);
        if (!v) {
            tdm_errorf(err, "%s: tensor \"%s\" of %s is missing from weight_map", index_path, st->t[i].name,
                       st->files[st->t[i].shard].path);
            goto out;
        }
    }
    for (size_t i = 0; i < wm->len; i++) {
        const tdm_st_tensor *t = tdm_safetensors_find(st, wm->keys[i]);
        const char *want = wm->items[i]->str;
        if (!t || strcmp(st->files[t->shard].path + strlen(dir) + 1, want) != 0) {
            tdm_errorf(err, "%s: weight_map places tensor \"%s\" in %s, which does not hold it", index_path,
                       wm->keys[i], want);
            goto out;
        }
    }
    rc = 0;
out:
    free(shards);
    tdm_json_free(doc);
    return rc;
}

tdm_safetensors *tdm_safetensors_open(const char *path, tdm_error *err) {
    tdm_safetensors *st = tdm_xcalloc(1, sizeof *st);
    st->source = tdm_xstrdup(path);
    char buf[4096];
    struct stat sb;
    int rc;
    if (stat(path, &sb) != 0) {
        tdm_errorf(err, "%s: cannot open: %s", path, strerror(errno));
        tdm_safetensors_close(st);
        return NULL;
    }
    if (S_ISDIR(sb.st_mode)) {
        snprintf(buf, sizeof buf, "%s/model.safetensors.index.json", path);
        if (tdm_file_exists(buf)) {
            rc = open_index(st, buf, err);
        } else {
            snprintf(buf, sizeof buf, "%s/model.safetensors", path);
            if (tdm_file_exists(buf)) {
                rc = open_file(st, buf, err);
            } else {
                rc = tdm_errorf(err, "%s: holds neither model.safetensors.index.json nor model.safetensors", path);
            }
        }
    } else if (ends_with(path, ".json")) {
        rc = open_index(st, path, err);
    } else {
        rc = open_file(st, path, err);
    }
    if (rc == 0 && st->n_files == 1) qsort(st->t, (size_t)st->n, sizeof *st->t, cmp_name);
    if (rc) {
        tdm_safetensors_close(st);
        return NULL;
    }
    return st;
}

void tdm_safetensors_close(tdm_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->n_files; i++) {
        if (st->files[i].fd >= 0) close(st->files[i].fd);
        tdm_json_free(st->files[i].doc);
        free(st->files[i].path);
    }
    free(st->files);
    free(st->t);
    free(st->source);
    free(st);
}

int tdm_safetensors_count(const tdm_safetensors *st) { return st->n; }
const tdm_st_tensor *tdm_safetensors_at(const tdm_safetensors *st, int i) {
    return i >= 0 && i < st->n ? &st->t[i] : NULL;
}

const tdm_st_tensor *tdm_safetensors_find(const tdm_safetensors *st, const char *name) {
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(st->t[mid].name, name);
        if (c == 0) return &st->t[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const char *tdm_safetensors_file(const tdm_safetensors *st, const tdm_st_tensor *t) { return st->files[t->shard].path; }

const char *tdm_safetensors_metadata(const tdm_safetensors *st, const char *key) {
    const tdm_json *v = tdm_json_get(st->metadata, key);
    return v && v->type == TDM_JSON_STRING ? v->str : NULL;
}

/* Reads tensor t into dst as fp32; 16-bit types go through a bounded staging buffer. */
static int read_tensor(tdm_safetensors *st, const tdm_st_tensor *t, float *dst, tdm_error *err) {
    const st_file *f = &st->files[t->shard];
    if (t->dtype == TDM_ST_F32) {
        if (pread_full(f->fd, dst, (size_t)t->nbytes, t->file_offset) != 0) goto short_read;
        return 0;
    }
    if (t->dtype != TDM_ST_BF16 && t->dtype != TDM_ST_F16)
        return tdm_errorf(err, "%s: tensor \"%s\": dtype %s cannot be loaded as fp32 (expected BF16, F16 or F32)",
                          f->path, t->name, tdm_st_dtype_name(t->dtype));
    enum { CHUNK = 1 << 16 }; /* elements per staging read (128 KiB) */
    uint16_t *buf = tdm_xmalloc(CHUNK * sizeof *buf);
    for (int64_t i = 0; i < t->numel; i += CHUNK) {
        int64_t n = t->numel - i < CHUNK ? t->numel - i : CHUNK;
        if (pread_full(f->fd, buf, (size_t)n * 2, t->file_offset + (uint64_t)i * 2) != 0) {
            free(buf);
            goto short_read;
        }
        if (t->dtype == TDM_ST_BF16) tdm_widen_bf16(dst + i, buf, n);
        else
            for (int64_t j = 0; j < n; j++) dst[i + j] = tdm_f16_to_f32(buf[j]);
    }
    free(buf);
    return 0;
short_read:
    return tdm_errorf(err, "%s: tensor \"%s\": read failed (%s)", f->path, t->name,
                      errno ? strerror(errno) : "file shorter than its header says; changed since it was opened?");
}

int tdm_safetensors_read_f32(tdm_safetensors *st, const char *name, float *dst, int64_t numel, tdm_error *err) {
    const tdm_st_tensor *t = tdm_safetensors_find(st, name);
    if (!t) return tdm_errorf(err, "%s: tensor \"%s\": not in the checkpoint", st->source, name);
    if (t->numel != numel)
        return tdm_errorf(err, "%s: tensor \"%s\": %lld elements, the caller expects %lld", st->files[t->shard].path,
                          name, (long long)t->numel, (long long)numel);
    return read_tensor(st, t, dst, err);
}

int tdm_st_check_finite(const float *x, int64_t n, const char *file, const char *tensor, tdm_error *err) {
    if (tdm_all_finite(x, n)) return 0;
    int64_t first = -1, count = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]) && count++ == 0) first = i;
    return tdm_errorf(err,
                      "%s: tensor \"%s\": %lld of its %lld values are not finite (element %lld is %s): weights "
                      "must be finite numbers",
                      file, tensor, (long long)count, (long long)n, (long long)first,
                      isnan(x[first]) ? "NaN"
                      : x[first] > 0  ? "inf"
                                      : "-inf");
}

static void shape_str(char *out, size_t cap, int ndim, const int64_t *shape) {
    size_t at = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < ndim && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < cap) snprintf(out + at, cap - at, "]");
}

int tdm_safetensors_load_params(tdm_safetensors *st, tdm_param_table *tab, int flags, tdm_st_load_report *report,
                                tdm_error *err) {
    static const char *const head = "lm_head.weight", *const embed = "model.language_model.embed_tokens.weight";
    tdm_st_load_report rep;
    memset(&rep, 0, sizeof rep);
    float *tmp = NULL;
    for (int i = 0; i < tab->n; i++) {
        tdm_param *p = &tab->p[i];
        const tdm_st_tensor *t = tdm_safetensors_find(st, p->name);
        if (!t && (flags & TDM_ST_TIED_LM_HEAD) && !strcmp(p->name, head)) {
            t = tdm_safetensors_find(st, embed);
            rep.lm_head_from_embedding = t != NULL;
        }
        if (!t)
            return free(tmp), tdm_errorf(err, "%s: tensor \"%s\": missing from the checkpoint", st->source, p->name);
        const char *file = st->files[t->shard].path;
        int same = t->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
        if (!same) {
            char have[160], want[160];
            shape_str(have, sizeof have, t->ndim, t->shape);
            shape_str(want, sizeof want, p->ndim, p->shape);
            return free(tmp), tdm_errorf(err, "%s: tensor \"%s\": shape %s in the file, the model expects %s", file,
                                         t->name, have, want);
        }
        if (!p->data && !p->bits)
            return free(tmp), tdm_errorf(err, "tensor \"%s\": no storage bound to load %s into", p->name, file);
        float *dst = p->data;
        if (p->bits) { /* bfloat16 storage: read as fp32, then rounded into the bits */
            if (!tmp) tmp = tdm_xmalloc(sizeof(float) * (size_t)tdm_param_table_max_numel(tab));
            dst = tmp;
        }
        if (read_tensor(st, t, dst, err) || tdm_st_check_finite(dst, p->numel, file, t->name, err)) {
            free(tmp);
            return -1;
        }
        if (p->bits) tdm_round_to_bf16(NULL, p->bits, dst, p->numel);
        rep.n_loaded++;
    }
    free(tmp);
    for (int i = 0; i < st->n; i++) {
        const char *name = st->t[i].name;
        if (tdm_param_table_find(tab, name) >= 0) continue;
        if ((flags & TDM_ST_TIED_LM_HEAD) && !strcmp(name, head)) continue;
        if (flags & TDM_ST_STRICT)
            return tdm_errorf(err, "%s: tensor \"%s\": not a parameter of this model", st->files[st->t[i].shard].path,
                              name);
        if (rep.n_extra++ == 0) snprintf(rep.first_extra, sizeof rep.first_extra, "%s", name);
    }
    if (report) *report = rep;
    return 0;
}

/* ---- the writer --------------------------------------------------------------------------- */

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Writes buf[n] and shows it to the observer, in pieces of at most 4 MiB so that what the
 * observer reads is still in the cache the write left it in. */
static int put(int fd, const void *buf, size_t n, const char *path, tdm_st_write_observer observe, void *ctx,
               tdm_error *err) {
    const char *p = buf;
    while (n > 0) {
        size_t k = !observe || n < ((size_t)4 << 20) ? n : (size_t)4 << 20;
        if (tdm_write_all(fd, p, k, path, err) != 0) return -1;
        if (observe) observe(ctx, p, k);
        p += k;
        n -= k;
    }
    return 0;
}

/* Writes data[n] as BF16 through a bounded staging buffer. */
static int write_bf16(int fd, const float *data, int64_t n, const char *path, tdm_st_write_observer observe, void *ctx,
                      tdm_error *err) {
    enum { CHUNK = 1 << 16 };
    uint16_t *buf = tdm_xmalloc(CHUNK * sizeof *buf);
    int rc = 0;
    for (int64_t i = 0; i < n && rc == 0; i += CHUNK) {
        int64_t m = n - i < CHUNK ? n - i : CHUNK;
        tdm_round_to_bf16(NULL, buf, data + i, m);
        rc = put(fd, buf, (size_t)m * 2, path, observe, ctx, err);
    }
    free(buf);
    return rc;
}

int tdm_safetensors_write(const char *path, const tdm_st_entry *ts, int n, tdm_st_dtype dtype, const char *const *meta,
                          int n_meta, tdm_error *err) {
    return tdm_safetensors_write_observed(path, ts, n, dtype, meta, n_meta, NULL, NULL, err);
}

int tdm_safetensors_write_observed(const char *path, const tdm_st_entry *ts, int n, tdm_st_dtype dtype,
                                   const char *const *meta, int n_meta, tdm_st_write_observer observe, void *ctx,
                                   tdm_error *err) {
    return tdm_safetensors_write_stream(path, ts, n, dtype, meta, n_meta, NULL, NULL, observe, ctx, err);
}

/* Longer than most: the checks, the header and the atomic write (temporary file, fsync,
 * rename) are one sequence, with the cleanup each stage needs on failure. */
int tdm_safetensors_write_stream(const char *path, const tdm_st_entry *ts, int n, tdm_st_dtype dtype,
                                 const char *const *meta, int n_meta, tdm_st_provider provide, void *pctx,
                                 tdm_st_write_observer observe, void *ctx, tdm_error *err) {
    if (dtype != TDM_ST_F32 && dtype != TDM_ST_BF16)
        return tdm_errorf(err, "%s: writing %s is not supported (F32 or BF16)", path, tdm_st_dtype_name(dtype));
    if (n < 0 || n_meta < 0) return tdm_errorf(err, "%s: negative tensor or metadata count", path);
    size_t esz = tdm_st_dtype_size(dtype);

    /* Names: non-empty, not the metadata key, unique. */
    const char **names = tdm_xmalloc((size_t)(n ? n : 1) * sizeof *names);
    for (int i = 0; i < n; i++) names[i] = ts[i].name ? ts[i].name : "";
    qsort(names, (size_t)n, sizeof *names, cmp_str_ptr);
    int bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        if (!names[i][0] || !strcmp(names[i], "__metadata__"))
            bad = tdm_errorf(err, "%s: tensor name \"%s\" is not allowed", path, names[i]);
        else if (i > 0 && !strcmp(names[i], names[i - 1]))
            bad = tdm_errorf(err, "%s: tensor \"%s\" given twice", path, names[i]);
    }
    free(names);
    if (bad) return -1;

    tdm_strbuf h;
    tdm_sb_init(&h);
    tdm_sb_putc(&h, '{');
    if (n_meta > 0) {
        tdm_sb_puts(&h, "\"__metadata__\":{");
        for (int k = 0; k < n_meta; k++) {
            if (k) tdm_sb_putc(&h, ',');
            tdm_sb_json_string(&h, meta[2 * k], strlen(meta[2 * k]));
            tdm_sb_putc(&h, ':');
            tdm_sb_json_string(&h, meta[2 * k + 1], strlen(meta[2 * k + 1]));
        }
        tdm_sb_putc(&h, '}');
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const tdm_st_entry *e = &ts[i];
        int64_t numel = 1;
        if (e->ndim < 0 || e->ndim > TDM_ST_MAX_DIMS) {
            tdm_sb_free(&h);
            return tdm_errorf(err, "%s: tensor \"%s\": %d dimensions", path, e->name, e->ndim);
        }
        for (int d = 0; d < e->ndim; d++)
            if (e->shape[d] < 0 || __builtin_mul_overflow(numel, e->shape[d], &numel)) {
                tdm_sb_free(&h);
                return tdm_errorf(err, "%s: tensor \"%s\": bad shape", path, e->name);
            }
        if (numel > 0 && !e->data && !provide) {
            tdm_sb_free(&h);
            return tdm_errorf(err, "%s: tensor \"%s\": no data", path, e->name);
        }
        uint64_t nb = (uint64_t)numel * esz;
        if (n_meta > 0 || i > 0) tdm_sb_putc(&h, ',');
        tdm_sb_json_string(&h, e->name, strlen(e->name));
        tdm_sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", tdm_st_dtype_name(dtype));
        for (int d = 0; d < e->ndim; d++) tdm_sb_printf(&h, "%s%lld", d ? "," : "", (long long)e->shape[d]);
        tdm_sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + nb));
        off += nb;
    }
    tdm_sb_putc(&h, '}');
    while ((8 + h.len) % 8) tdm_sb_putc(&h, ' '); /* data section starts 8-byte aligned */
    if (h.len > TDM_ST_MAX_HEADER) {
        tdm_sb_free(&h);
        return tdm_errorf(err, "%s: header would be %zu bytes, above the limit", path, h.len);
    }

    char tmp[4096], dir[4096];
    /* a cut-short temporary name could be another file, or PATH itself */
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp) {
        tdm_sb_free(&h);
        return tdm_errorf(err, "a path of %zu bytes is too long to write through a temporary file beside it: %s",
                          strlen(path), path);
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        tdm_sb_free(&h);
        return tdm_errorf(err, "%s: cannot create: %s", tmp, strerror(errno));
    }
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    int rc = put(fd, lenb, 8, tmp, observe, ctx, err);
    if (rc == 0) rc = put(fd, h.data, h.len, tmp, observe, ctx, err);
    tdm_sb_free(&h);
    for (int i = 0; i < n && rc == 0; i++) {
        int64_t numel = 1;
        for (int d = 0; d < ts[i].ndim; d++) numel *= ts[i].shape[d];
        if (numel == 0) continue;
        const float *data = ts[i].data;
        if (!data && !(data = provide(pctx, i, err))) {
            tdm_error_prefix(err, "%s: tensor \"%s\"", path, ts[i].name);
            rc = -1;
            break;
        }
        if (dtype == TDM_ST_F32) rc = put(fd, data, (size_t)numel * 4, tmp, observe, ctx, err);
        else rc = write_bf16(fd, data, numel, tmp, observe, ctx, err);
    }
    if (rc == 0 && fsync(fd) != 0) rc = tdm_errorf(err, "%s: fsync failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == 0) rc = tdm_errorf(err, "%s: close failed: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0) rc = tdm_errorf(err, "%s: rename failed: %s", path, strerror(errno));
    if (rc) {
        unlink(tmp);
        return -1;
    }
    tdm_dirname(path, dir, sizeof dir);
    return tdm_fsync_dir(dir, err);
}

int tdm_safetensors_save_params(const char *path, const tdm_param_table *t, tdm_st_dtype dtype, const char *const *meta,
                                int n_meta, tdm_error *err) {
    tdm_st_entry *e = tdm_xmalloc((size_t)(t->n ? t->n : 1) * sizeof *e);
    for (int i = 0; i < t->n; i++) {
        e[i].name = t->p[i].name;
        e[i].ndim = t->p[i].ndim;
        e[i].shape = t->p[i].shape;
        e[i].data = t->p[i].data;
    }
    int rc = tdm_safetensors_write(path, e, t->n, dtype, meta, n_meta, err);
    free(e);
    return rc;
}
