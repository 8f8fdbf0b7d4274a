/* safetensors.h - reading and writing Hugging Face safetensors checkpoints.
 *
 *   tdm_error err;
 *   tdm_safetensors *st = tdm_safetensors_open("Qwen3-VL-8B-Instruct", &err);  // dir, file or index
 *   if (!st) { ... err.msg: "m/model-00002-of-00004.safetensors: tensor "x": data_offsets ..." ... }
 *   tdm_st_load_report rep;
 *   tdm_safetensors_load_params(st, tdm_model_params(m), TDM_ST_TIED_LM_HEAD, &rep, &err);
 *   tdm_safetensors_close(st);
 *
 * File format (one file): 8 bytes little-endian u64 N, then N bytes of JSON header
 *   {"__metadata__": {"format": "pt"},
 *    "name": {"dtype": "BF16", "shape": [d0, d1], "data_offsets": [begin, end]}, ...}
 * then the data section; offsets are relative to its start (file offset 8 + N), data is
 * little-endian and row-major. A sharded checkpoint adds model.safetensors.index.json,
 * {"metadata": {...}, "weight_map": {"name": "model-00001-of-00004.safetensors", ...}}.
 *
 * Opening validates every header completely before any tensor is read: header length at
 * most TDM_ST_MAX_HEADER bytes, known dtypes, shapes whose element count does not overflow,
 * end - begin == numel * dtype size, every tensor inside the data section, no two tensors
 * overlapping, and the tensors covering the data section exactly (as the reference
 * implementation requires). Every error names the file and, where there is one, the tensor.
 * Tensor data is read with pread, straight into the caller's fp32 destination.
 */
#ifndef TDM_SAFETENSORS_H
#define TDM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/params.h"

#define TDM_ST_MAX_HEADER ((uint64_t)100 << 20) /* bytes of JSON header per file */
#define TDM_ST_MAX_DIMS   8
#define TDM_ST_MAX_SHARDS 4096

typedef enum tdm_st_dtype {
    TDM_ST_F32,
    TDM_ST_F16,
    TDM_ST_BF16,
    /* Recognised so a header that uses them validates; loading them as fp32 is refused. */
    TDM_ST_F64,
    TDM_ST_I64,
    TDM_ST_I32,
    TDM_ST_I16,
    TDM_ST_I8,
    TDM_ST_U64,
    TDM_ST_U32,
    TDM_ST_U16,
    TDM_ST_U8,
    TDM_ST_BOOL,
    TDM_ST_F8_E4M3,
    TDM_ST_F8_E5M2,
} tdm_st_dtype;

/* "BF16" -> TDM_ST_BF16; -1 when unknown. */
int tdm_st_dtype_from_name(const char *name);
const char *tdm_st_dtype_name(tdm_st_dtype d);
size_t tdm_st_dtype_size(tdm_st_dtype d);

typedef struct tdm_st_tensor {
    const char *name; /* owned by the tdm_safetensors */
    tdm_st_dtype dtype;
    int ndim;
    int64_t shape[TDM_ST_MAX_DIMS];
    int64_t numel;
    uint64_t file_offset; /* absolute byte offset of the data in its file */
    uint64_t nbytes;
    int shard; /* index of the file holding it */
} tdm_st_tensor;

typedef struct tdm_safetensors tdm_safetensors;

/* Opens `path`: a .safetensors file, a model.safetensors.index.json, or a directory
 * holding one of those (the index wins when both are present). Every header is read and
 * validated (see above); for a sharded checkpoint, every shard named in weight_map is
 * opened, and a tensor the index places in a shard that does not hold it, a shard tensor
 * the index does not list, or a name held by two shards are errors. Shard file names must
 * be plain names in the index's directory. */
tdm_safetensors *tdm_safetensors_open(const char *path, tdm_error *err);
void tdm_safetensors_close(tdm_safetensors *st);

/* The tensors, sorted by name. */
int tdm_safetensors_count(const tdm_safetensors *st);
const tdm_st_tensor *tdm_safetensors_at(const tdm_safetensors *st, int i);
/* NULL when absent. */
const tdm_st_tensor *tdm_safetensors_find(const tdm_safetensors *st, const char *name);
/* The file that holds tensor t (for messages). */
const char *tdm_safetensors_file(const tdm_safetensors *st, const tdm_st_tensor *t);
/* A value of the first file's "__metadata__" map, or NULL. */
const char *tdm_safetensors_metadata(const tdm_safetensors *st, const char *key);

/* Reads tensor `name` into dst[numel] as fp32, converting from BF16 (exact), F16 (exact)
 * or F32. `numel` must equal the tensor's element count. A missing tensor, another
 * dtype, a count mismatch or a short read are errors naming the file and the tensor. */
int tdm_safetensors_read_f32(tdm_safetensors *st, const char *name, float *dst, int64_t numel, tdm_error *err);

enum {
    /* The model ties lm_head to the embedding: a "lm_head.weight" in the table that the
     * file lacks is read from model.language_model.embed_tokens.weight, and a
     * "lm_head.weight" in the file that the table lacks (HF sometimes saves the tied
     * copy) does not count as extra. */
    TDM_ST_TIED_LM_HEAD = 1,
    /* Tensors in the file that the table does not have are an error instead of counted. */
    TDM_ST_STRICT = 2,
};

typedef struct tdm_st_load_report {
    int n_loaded;               /* table tensors filled */
    int n_extra;                /* file tensors nothing in the table asked for */
    char first_extra[128];      /* the first of them by name ("" when none) */
    int lm_head_from_embedding; /* 1 when the tied fallback filled lm_head.weight */
} tdm_st_load_report;

/* 0 when the n values of x are all finite; otherwise -1 with an error naming file and tensor, how
 * many are not and the first of them (NaN, inf or -inf). Every loader of weights calls it. */
int tdm_st_check_finite(const float *x, int64_t n, const char *file, const char *tensor, tdm_error *err);

/* Fills every tensor of the table (its `data`, which must be bound) from the file by its
 * Hugging Face name. The shape must match exactly (ndim and every dimension); a missing
 * tensor, a shape mismatch, an unsupported dtype or a value that is not finite (NaN, inf) is
 * an error naming file and tensor, and nothing is guaranteed about the tensors filled before
 * it. Extra tensors in the file are counted in *report (callers warn) unless TDM_ST_STRICT
 * makes them an error. report may be NULL. */
int tdm_safetensors_load_params(tdm_safetensors *st, tdm_param_table *t, int flags, tdm_st_load_report *report,
                                tdm_error *err);

/* One tensor to write: fp32 values, row-major. */
typedef struct tdm_st_entry {
    const char *name;
    int ndim;
    const int64_t *shape;
    const float *data; /* [prod(shape)] */
} tdm_st_entry;

/* Writes the tensors to `path` as F32 or BF16 (round to nearest even; NaN stays NaN), in
 * the order given, with an optional "__metadata__" map of n_meta (key, value) string
 * pairs, meta[2k] = key, meta[2k+1] = value, written in the order given. The same input
 * gives the same bytes: no timestamps, the header padded with spaces so the data starts at
 * a multiple of 8 bytes. Atomic: written to PATH.tmp.<pid>, fsynced, renamed over PATH,
 * directory fsynced; a failure leaves PATH as it was. Duplicate or empty names, dtypes
 * other than F32/BF16 and headers above TDM_ST_MAX_HEADER are refused. */
int tdm_safetensors_write(const char *path, const tdm_st_entry *tensors, int n, tdm_st_dtype dtype,
                          const char *const *meta, int n_meta, tdm_error *err);

/* Sees every byte tdm_safetensors_write_observed writes, in file order, once it is written
 * (e.g. a checksum of the file computed as it is written instead of by reading it back). */
typedef void (*tdm_st_write_observer)(void *ctx, const void *bytes, size_t n);

/* tdm_safetensors_write, showing the file's bytes to observe(ctx, ...) as they are written;
 * observe == NULL is tdm_safetensors_write. After a failure the observer has seen a prefix of
 * the bytes (PATH is left as it was). */
int tdm_safetensors_write_observed(const char *path, const tdm_st_entry *tensors, int n, tdm_st_dtype dtype,
                                   const char *const *meta, int n_meta, tdm_st_write_observer observe, void *ctx,
                                   tdm_error *err);

/* The values of tensor `index` of a tdm_safetensors_write_stream call whose entry has data ==
 * NULL: [numel] floats, valid until the next call; NULL after setting *err, which stops the
 * write (PATH is left as it was). */
typedef const float *(*tdm_st_provider)(void *ctx, int index, tdm_error *err);

/* tdm_safetensors_write_observed, where an entry with data == NULL gets its values from
 * provide(pctx, index, ...) when the writer reaches it, in file order: a file larger than
 * memory can be written one tensor at a time (a checkpoint's optimizer state, gathered from
 * the ranks parameter by parameter). The header is written first, from names and shapes. */
int tdm_safetensors_write_stream(const char *path, const tdm_st_entry *tensors, int n, tdm_st_dtype dtype,
                                 const char *const *meta, int n_meta, tdm_st_provider provide, void *pctx,
                                 tdm_st_write_observer observe, void *ctx, tdm_error *err);

/* Writes every tensor of the table (its `data`) in table order; see tdm_safetensors_write. */
int tdm_safetensors_save_params(const char *path, const tdm_param_table *t, tdm_st_dtype dtype, const char *const *meta,
                                int n_meta, tdm_error *err);

/* Conversions (exposed for tests and kernels): fp32 -> bf16 rounds to nearest even. */
uint16_t tdm_f32_to_bf16(float x);
float tdm_bf16_to_f32(uint16_t h);
float tdm_f16_to_f32(uint16_t h);

#endif
