/* checkpoint_load.c - opening a checkpoint and loading its weights and Adam state, each tensor
 * file read once through a stream that checks its checksum on the way (checkpoint.h). */
#include "train/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "kernels/kernels.h"
#include "model/safetensors.h"
#include "train/checkpoint_internal.h"

/* XXH3 and size of a file, streamed in 1 MiB reads. */
static int hash_file(const char *path, uint64_t *hash, int64_t *size, tdm_error *err) {
    uint64_t bytes;
    int fd = tdm_open_regular(path, &bytes, err); /* a FIFO in a checkpoint folder must not block */
    if (fd < 0) return -1;
    XXH3_state_t *s = XXH3_createState();
    XXH3_64bits_reset(s);
    char *buf = tdm_xmalloc(1 << 20);
    int64_t total = 0;
    int rc = 0;
    for (;;) {
        ssize_t r = read(fd, buf, 1 << 20);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = tdm_errorf(err, "%s: read failed: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        XXH3_64bits_update(s, buf, (size_t)r);
        total += r;
    }
    *hash = XXH3_64bits_digest(s);
    *size = total;
    XXH3_freeState(s);
    free(buf);
    close(fd);
    return rc;
}

/* ---- reading a file once: its checksum from the bytes as they are loaded
 *
 * model.safetensors and optimizer.safetensors are read through a stream that hashes every byte
 * it reads, in file order: a tensor further on first hashes the bytes before it (the header, or
 * tensors nobody asked for, through a bounded buffer), and the end of the load hashes what is
 * left and compares size and checksum with trainer_state.json. So a file is read once, and its
 * values are known good only when that comparison passed: tdm_ckpt_load_weights and
 * tdm_ckpt_finish_optimizer do it before they return 0. A tensor asked for out of file order
 * (a table in another order than the file) was hashed already when the stream passed it, and is
 * read a second time with pread: correct, only slower. The safetensors header is read twice:
 * once by tdm_safetensors_open to parse it, once here to hash it (8 + N bytes: 100-200 KB at 8B). */
/* The two refusals of a file that is not what trainer_state.json recorded. Return -1. */
static int size_mismatch(const char *path, long long have, long long want, tdm_error *err) {
    return tdm_errorf(err, "%s: %lld bytes, trainer_state.json says %lld: the file is truncated or was replaced", path,
                      have, want);
}

static int checksum_mismatch(const char *path, uint64_t have, uint64_t want, tdm_error *err) {
    return tdm_errorf(
        err, "%s: checksum %016" PRIx64 " does not match trainer_state.json's %016" PRIx64 ": the file is corrupted",
        path, have, want);
}

struct tdm_ckpt_stream {
    int fd;
    char path[PATH_CAP + 64];
    XXH3_state_t *h;
    uint64_t at;         /* bytes hashed so far, from the start: where the stream reads next */
    uint64_t size;       /* bytes, as trainer_state.json records them */
    uint64_t want;       /* its XXH3, likewise */
    uint64_t bytes_read; /* bytes read from the file so far */
    /* Block mode (b.block > 0: trainer_state.json has a checksum per block): a read verifies
     * the blocks it touches, whole, the first time, and nothing else; the finish verifies the
     * blocks asked for. A rank that loads only its shard reads about its share of the file. */
    block_sums b;
    unsigned char *verified; /* [b.n] */
    char *cache;             /* [min(b.block, size)]: the bytes of block `cached`, the last one verified */
    int64_t cached;
};

/* bytes per read: hashed while still in the core's cache (64 KiB to 4 MiB measured the same
 * within noise on the 2-core VM, 3 GB checkpoint) */
#define STREAM_CHUNK ((size_t)256 << 10)

static void stream_close(struct tdm_ckpt_stream *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    XXH3_freeState(s->h);
    free(s->b.hash);
    free(s->verified);
    free(s->cache);
    free(s);
}

/* Opens path for reading and checks its size against trainer_state.json's (a truncated file is
 * refused here, before anything is read). */
static struct tdm_ckpt_stream *stream_open(const char *path, int64_t size, uint64_t want, tdm_error *err) {
    uint64_t bytes;
    int fd = tdm_open_regular(path, &bytes, err);
    if (fd < 0) return NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        tdm_errorf(err, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (sb.st_size != size) {
        size_mismatch(path, (long long)sb.st_size, size, err);
        close(fd);
        return NULL;
    }
    struct tdm_ckpt_stream *s = tdm_xcalloc(1, sizeof *s);
    s->fd = fd;
    snprintf(s->path, sizeof s->path, "%s", path);
    s->h = XXH3_createState();
    XXH3_64bits_reset(s->h);
    s->size = (uint64_t)size;
    s->want = want;
    return s;
}

/* pread of exactly n bytes at off; a file that ends sooner is an error naming it. */
static int stream_pread(struct tdm_ckpt_stream *s, void *dst, size_t n, uint64_t off, tdm_error *err) {
    char *p = dst;
    while (n > 0) {
        ssize_t r = pread(s->fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return tdm_errorf(err, "%s: read failed: %s", s->path, strerror(errno));
        if (r == 0)
            return tdm_errorf(err,
                              "%s: ends at byte %llu, trainer_state.json says %llu bytes: the file is truncated "
                              "or changed while it was read",
                              s->path, (unsigned long long)off, (unsigned long long)s->size);
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
        s->bytes_read += (uint64_t)r;
    }
    return 0;
}

/* Block mode: reads block j whole into the cache and compares its checksum. */
static int verify_block(struct tdm_ckpt_stream *s, int64_t j, tdm_error *err) {
    uint64_t b0 = (uint64_t)j * s->b.block, len = s->size - b0 < s->b.block ? s->size - b0 : s->b.block;
    s->cached = -1;
    if (stream_pread(s, s->cache, (size_t)len, b0, err) != 0) return -1;
    uint64_t h = XXH3_64bits(s->cache, (size_t)len);
    if (h != s->b.hash[j])
        return tdm_errorf(err,
                          "%s: bytes %llu-%llu (block %lld of %lld): checksum %016" PRIx64 " does not match "
                          "trainer_state.json's %016" PRIx64 ": the file is corrupted",
                          s->path, (unsigned long long)b0, (unsigned long long)(b0 + len - 1), (long long)j,
                          (long long)s->b.n, h, s->b.hash[j]);
    s->verified[j] = 1;
    s->cached = j;
    return 0;
}

/* Block mode: bytes [off, off + n) of the file into dst, through verified blocks. */
static int block_read(struct tdm_ckpt_stream *s, uint64_t off, void *dst, size_t n, tdm_error *err) {
    char *p = dst;
    while (n > 0) {
        int64_t j = (int64_t)(off / s->b.block);
        uint64_t b0 = (uint64_t)j * s->b.block, end = b0 + s->b.block < s->size ? b0 + s->b.block : s->size;
        if (off >= end)
            return tdm_errorf(err, "%s: a read at byte %llu, past its end", s->path, (unsigned long long)off);
        size_t k = end - off < n ? (size_t)(end - off) : n;
        if (s->cached != j && s->verified[j]) { /* vouched for once already: read the part again */
            if (stream_pread(s, p, k, off, err) != 0) return -1;
        } else {
            if (s->cached != j && verify_block(s, j, err) != 0) return -1;
            memcpy(p, s->cache + (off - b0), k);
        }
        p += k, off += k, n -= k;
    }
    return 0;
}

/* Block mode: verifies every block j not verified yet for which want == NULL or want[j]. */
static int verify_blocks(struct tdm_ckpt_stream *s, const unsigned char *want, tdm_error *err) {
    for (int64_t j = 0; j < s->b.n; j++)
        if (!s->verified[j] && (!want || want[j]) && verify_block(s, j, err) != 0) return -1;
    return 0;
}

/* Reads n bytes at the stream's position into dst, hashing them. */
static int stream_take(struct tdm_ckpt_stream *s, void *dst, size_t n, tdm_error *err) {
    char *p = dst;
    while (n > 0) {
        size_t k = n < STREAM_CHUNK ? n : STREAM_CHUNK;
        if (stream_pread(s, p, k, s->at, err) != 0) return -1;
        XXH3_64bits_update(s->h, p, k);
        s->at += k;
        p += k;
        n -= k;
    }
    return 0;
}

/* Hashes the bytes from the stream's position up to `to` (nobody loads them). */
static int stream_skip(struct tdm_ckpt_stream *s, uint64_t to, tdm_error *err) {
    if (s->at >= to) return 0;
    char *buf = tdm_xmalloc(STREAM_CHUNK);
    int rc = 0;
    while (rc == 0 && s->at < to) {
        uint64_t k = to - s->at < STREAM_CHUNK ? to - s->at : STREAM_CHUNK;
        rc = stream_take(s, buf, (size_t)k, err);
    }
    free(buf);
    return rc;
}

/* Reads bytes [off, off + n) of the file into dst, hashing those the stream has not passed yet. */
static int stream_read(struct tdm_ckpt_stream *s, uint64_t off, void *dst, size_t n, tdm_error *err) {
    if (s->b.block) return block_read(s, off, dst, n, err);
    char *p = dst;
    if (off < s->at) { /* hashed already: out of file order, read again */
        size_t k = s->at - off < n ? (size_t)(s->at - off) : n;
        if (stream_pread(s, p, k, off, err) != 0) return -1;
        p += k, off += k, n -= k;
    }
    if (n == 0) return 0;
    if (stream_skip(s, off, err) != 0) return -1;
    return stream_take(s, p, n, err);
}

/* Hashes the rest of the file and compares size and checksum with trainer_state.json. */
static int stream_finish(struct tdm_ckpt_stream *s, tdm_error *err) {
    if (s->b.block ? verify_blocks(s, NULL, err) != 0 : stream_skip(s, s->size, err) != 0) return -1;
    char extra;
    ssize_t r = pread(s->fd, &extra, 1, (off_t)s->size);
    if (r > 0)
        return tdm_errorf(err,
                          "%s: longer than the %llu bytes trainer_state.json says: the file changed while it "
                          "was read",
                          s->path, (unsigned long long)s->size);
    if (s->b.block) return 0; /* every block matched */
    uint64_t h = XXH3_64bits_digest(s->h);
    return h == s->want ? 0 : checksum_mismatch(s->path, h, s->want, err);
}

/* For an error the file's header may have caused (it does not parse, names a tensor the model
 * lacks, another shape): a corrupted file is the likelier cause in a checkpoint, and the
 * message should say so. So the rest of the file is hashed (only on this error path) and a
 * checksum mismatch replaces *err. Returns -1. */
static int corrupted_instead(struct tdm_ckpt_stream *s, tdm_error *err) {
    tdm_error e2;
    if (s && stream_finish(s, &e2) != 0) *err = e2;
    return -1;
}

/* Opens a checkpoint's safetensors file: its stream (size checked) and its parsed header. */
static int open_tensors(const char *path, int64_t size, uint64_t want, block_sums *b, struct tdm_ckpt_stream **s,
                        tdm_safetensors **st, tdm_error *err) {
    *s = stream_open(path, size, want, err);
    if (!*s) return -1;
    if (b && b->block) { /* block mode: the header's blocks are verified before it is parsed */
        struct tdm_ckpt_stream *x = *s;
        x->b = *b;
        *b = (block_sums){0};
        x->verified = tdm_xcalloc((size_t)(x->b.n ? x->b.n : 1), 1);
        /* (a hand-edited block_bytes beyond the file allocates no more than the file) */
        x->cache = tdm_xmalloc((size_t)(x->b.block < (uint64_t)size ? x->b.block : (uint64_t)(size ? size : 1)));
        x->cached = -1;
        unsigned char lenb[8] = {0};
        uint64_t hlen = 0;
        int rc = stream_pread(x, lenb, size < 8 ? (size_t)size : 8, 0, err);
        for (int i = 0; i < 8; i++) hlen |= (uint64_t)lenb[i] << (8 * i);
        uint64_t hend = hlen < (uint64_t)size - 8 ? 8 + hlen : (uint64_t)size;
        for (int64_t j = 0; rc == 0 && j < x->b.n && (uint64_t)j * x->b.block < hend; j++) rc = verify_block(x, j, err);
        if (rc != 0) {
            stream_close(x);
            *s = NULL;
            return -1;
        }
    }
    *st = tdm_safetensors_open(path, err);
    if (*st) return 0;
    corrupted_instead(*s, err);
    stream_close(*s);
    *s = NULL;
    return -1;
}

static int ckpt_open_blocks(const char *load, int with_optimizer, tdm_ckpt *ck, uint64_t *hashes, int64_t *sizes,
                            int *present, block_sums *ob, tdm_error *err);

static int ckpt_open(const char *load, int with_optimizer, tdm_ckpt *ck, tdm_error *err) {
    uint64_t hashes[N_CKPT_FILES];
    int64_t sizes[N_CKPT_FILES];
    int present[N_CKPT_FILES];
    block_sums ob = {0};
    int rc = ckpt_open_blocks(load, with_optimizer, ck, hashes, sizes, present, &ob, err);
    free(ob.hash); /* NULL when the optimizer's stream took it */
    return rc;
}

static int ckpt_open_blocks(const char *load, int with_optimizer, tdm_ckpt *ck, uint64_t *hashes, int64_t *sizes,
                            int *present, block_sums *ob, tdm_error *err) {
    if (tdm_ckpt__read_state(load, ck, hashes, sizes, present, ob, err) != 0) return -1;
    if (ck->state.has_optimizer != present[1])
        return tdm_errorf(err, "%s/trainer_state.json: has_optimizer disagrees with the files listed", ck->dir);
    char path[PATH_CAP + 64];
    /* the JSON copies are not loaded (the run reads --model's): verified whole, they are kilobytes */
    for (int i = 2; i < N_CKPT_FILES; i++) {
        if (!present[i]) continue;
        snprintf(path, sizeof path, "%s/%s", ck->dir, CKPT_FILES[i]);
        uint64_t h = 0;
        int64_t n = 0;
        if (hash_file(path, &h, &n, err) != 0) return -1;
        if (n != sizes[i]) return size_mismatch(path, n, sizes[i], err);
        if (h != hashes[i]) return checksum_mismatch(path, h, hashes[i], err);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", ck->dir);
    if (open_tensors(path, sizes[0], hashes[0], NULL, &ck->model_in, &ck->model, err) != 0) return -1;
    if (present[1] && with_optimizer) {
        snprintf(path, sizeof path, "%s/optimizer.safetensors", ck->dir);
        if (open_tensors(path, sizes[1], hashes[1], ob, &ck->optimizer_in, &ck->optimizer, err) != 0) {
            tdm_ckpt_close(ck);
            return -1;
        }
    }
    return 0;
}

int tdm_ckpt_open(const char *load, tdm_ckpt *ck, tdm_error *err) { return ckpt_open(load, 1, ck, err); }

int tdm_ckpt_open_weights(const char *load, tdm_ckpt *ck, tdm_error *err) { return ckpt_open(load, 0, ck, err); }

void tdm_ckpt_close(tdm_ckpt *ck) {
    if (ck->model) tdm_safetensors_close(ck->model);
    if (ck->optimizer) tdm_safetensors_close(ck->optimizer);
    stream_close(ck->model_in);
    stream_close(ck->optimizer_in);
    ck->model = ck->optimizer = NULL;
    ck->model_in = ck->optimizer_in = NULL;
}

/* Reads tensor x of a checkpoint file through its stream into dst[x->numel] as fp32 (F32 straight
 * into dst; BF16 and F16, which tandem does not write but a hand-made file may hold, through a
 * bounded staging buffer). */
static int read_tensor(struct tdm_ckpt_stream *s, const tdm_st_tensor *x, float *dst, tdm_error *err) {
    if (x->dtype == TDM_ST_F32) return stream_read(s, x->file_offset, dst, (size_t)x->nbytes, err);
    if (x->dtype != TDM_ST_BF16 && x->dtype != TDM_ST_F16)
        return tdm_errorf(err, "%s: tensor \"%s\": dtype %s cannot be loaded as fp32 (expected BF16, F16 or F32)",
                          s->path, x->name, tdm_st_dtype_name(x->dtype));
    enum { CHUNK = 1 << 16 }; /* elements per staging read (128 KiB) */
    uint16_t *buf = tdm_xmalloc(CHUNK * sizeof *buf);
    int rc = 0;
    for (int64_t i = 0; i < x->numel && rc == 0; i += CHUNK) {
        int64_t n = x->numel - i < CHUNK ? x->numel - i : CHUNK;
        rc = stream_read(s, x->file_offset + (uint64_t)i * 2, buf, (size_t)n * 2, err);
        if (rc == 0 && x->dtype == TDM_ST_BF16) tdm_widen_bf16(dst + i, buf, n);
        else
            for (int64_t j = 0; rc == 0 && j < n; j++) dst[i + j] = tdm_f16_to_f32(buf[j]);
    }
    free(buf);
    return rc;
}

static void shape_str(int ndim, const int64_t *shape, char *out, size_t cap) {
    size_t o = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < cap) snprintf(out + o, cap - o, "]");
}

typedef struct in_file {
    const tdm_st_tensor *x;
    int param; /* its index in the table */
} in_file;

static int cmp_offset(const void *a, const void *b) {
    uint64_t x = ((const in_file *)a)->x->file_offset, y = ((const in_file *)b)->x->file_offset;
    return (x > y) - (x < y);
}

int tdm_ckpt_load_weights(tdm_ckpt *ck, tdm_param_table *t, tdm_error *err) {
    /* a friendly shape check first: name the first tensor that differs */
    for (int i = 0; i < t->n; i++) {
        const tdm_param *p = &t->p[i];
        const tdm_st_tensor *x = tdm_safetensors_find(ck->model, p->name);
        if (!x) {
            tdm_errorf(err, "--load %s: saved from another model: it has no tensor %s", ck->dir, p->name);
            return corrupted_instead(ck->model_in, err);
        }
        int same = x->ndim == p->ndim;
        for (int k = 0; same && k < p->ndim; k++) same = x->shape[k] == p->shape[k];
        if (!same) {
            char a[128], b[128];
            shape_str(x->ndim, x->shape, a, sizeof a);
            shape_str(p->ndim, p->shape, b, sizeof b);
            tdm_errorf(err, "--load %s: saved from another model shape: %s is %s there, %s in --model's config",
                       ck->dir, p->name, a, b);
            return corrupted_instead(ck->model_in, err);
        }
    }
    if (tdm_safetensors_count(ck->model) != t->n) {
        tdm_errorf(err, "--load %s: saved from another model: %d tensors there, %d in --model's config", ck->dir,
                   tdm_safetensors_count(ck->model), t->n);
        return corrupted_instead(ck->model_in, err);
    }
    /* every file tensor is a table tensor (same count, every table name found): reading them in
     * file order reads the whole file once, hashing it on the way */
    in_file *order = tdm_xmalloc(sizeof *order * (size_t)(t->n ? t->n : 1));
    for (int i = 0; i < t->n; i++) order[i] = (in_file){tdm_safetensors_find(ck->model, t->p[i].name), i};
    qsort(order, (size_t)t->n, sizeof *order, cmp_offset);
    int rc = 0;
    /* bfloat16 storage (--bf16): each tensor is read into an fp32 scratch and rounded into its bits;
     * the first one that is not finite is remembered for after the checksum */
    float *tmp = NULL;
    int nonfinite = -1;
    tdm_error nf_err;
    for (int i = 0; i < t->n && rc == 0; i++) {
        tdm_param *p = &t->p[order[i].param];
        if (!p->data && !p->bits) {
            rc = tdm_errorf(err, "tensor \"%s\": no storage bound to load %s into", p->name, ck->model_in->path);
        } else if (p->bits) {
            if (!tmp) tmp = tdm_xmalloc(sizeof(float) * (size_t)tdm_param_table_max_numel(t));
            rc = read_tensor(ck->model_in, order[i].x, tmp, err);
            if (rc == 0 && (nonfinite < 0 || order[i].param < nonfinite) &&
                tdm_st_check_finite(tmp, p->numel, ck->model_in->path, p->name, &nf_err) != 0)
                nonfinite = order[i].param;
            if (rc == 0) tdm_round_to_bf16(NULL, p->bits, tmp, p->numel);
        } else {
            rc = read_tensor(ck->model_in, order[i].x, p->data, err);
        }
    }
    free(tmp);
    if (rc == 0) rc = stream_finish(ck->model_in, err);
    for (int i = 0; rc == 0 && i < t->n; i++) /* a checksum vouches for the bytes, not for the numbers */
        if (i == nonfinite) rc = (*err = nf_err, -1);
        else if (t->p[i].data)
            rc = tdm_st_check_finite(t->p[i].data, t->p[i].numel, ck->model_in->path, t->p[i].name, err);
    /* the values went straight into the table (a second copy of the weights would not fit): what
     * the file's checksum did not vouch for is wiped, so no caller can train on it */
    for (int i = 0; rc != 0 && i < t->n; i++) {
        if (t->p[i].data) memset(t->p[i].data, 0, sizeof(float) * (size_t)t->p[i].numel);
        if (t->p[i].bits) memset(t->p[i].bits, 0, sizeof(uint16_t) * (size_t)t->p[i].numel);
    }
    free(order);
    return rc;
}

/* One Adam tensor's entry, checked as tdm_safetensors_read_f32 would (same messages). A tensor
 * missing from an intact file is the state of a parameter that was frozen when it was
 * saved (param names it); from a damaged file, the damage is said instead. */
static int find_adam(tdm_ckpt *ck, const char *param, const char *name, int64_t numel, const tdm_st_tensor **out,
                     tdm_error *err) {
    const tdm_st_tensor *x = *out = tdm_safetensors_find(ck->optimizer, name);
    if (!x) {
        tdm_errorf(err,
                   "%s: tensor \"%s\": not in the checkpoint (was %s frozen when it was saved? then add "
                   "--no-load-optim)",
                   ck->optimizer_in->path, name, param);
        return corrupted_instead(ck->optimizer_in, err);
    }
    if (x->numel != numel) {
        tdm_errorf(err, "%s: tensor \"%s\": %lld elements, the caller expects %lld", ck->optimizer_in->path, name,
                   (long long)x->numel, (long long)numel);
        return corrupted_instead(ck->optimizer_in, err);
    }
    return 0;
}

int tdm_ckpt_read_optimizer(tdm_ckpt *ck, const tdm_param_table *t, int i, float *m, float *v, tdm_error *err) {
    return tdm_ckpt_read_optimizer_range(ck, t, i, 0, t->p[i].numel, m, v, err);
}

/* Elements [offset, offset + count) of the optimizer file's tensor OPTIM_KIND[kind].<name of i> into dst. */
static int read_optim_kind(tdm_ckpt *ck, const tdm_param_table *t, int i, int kind, int64_t offset, int64_t count,
                           float *dst, tdm_error *err) {
    if (!ck->optimizer) return tdm_errorf(err, "--load %s: the checkpoint holds no optimizer state", ck->dir);
    if (offset < 0 || count < 0 || offset + count > t->p[i].numel)
        return tdm_errorf(err, "%s: elements %lld..%lld of %s: it has %lld", ck->optimizer_in->path, (long long)offset,
                          (long long)(offset + count), t->p[i].name, (long long)t->p[i].numel);
    char name[TDM_PARAM_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s.%s", OPTIM_KIND[kind], t->p[i].name);
    const tdm_st_tensor *x = NULL;
    if (find_adam(ck, t->p[i].name, name, t->p[i].numel, &x, err) != 0) return -1;
    if (x->dtype != TDM_ST_F32 && (offset != 0 || count != x->numel))
        return tdm_errorf(err, "%s: tensor \"%s\": %s; a part of a parameter loads from F32 only",
                          ck->optimizer_in->path, name, tdm_st_dtype_name(x->dtype));
    return x->dtype == TDM_ST_F32
               ? stream_read(ck->optimizer_in, x->file_offset + 4 * (uint64_t)offset, dst, 4 * (size_t)count, err)
               : read_tensor(ck->optimizer_in, x, dst, err);
}

int tdm_ckpt_read_optimizer_range(tdm_ckpt *ck, const tdm_param_table *t, int i, int64_t offset, int64_t count,
                                  float *m, float *v, tdm_error *err) {
    if (read_optim_kind(ck, t, i, 0, offset, count, m, err) != 0) return -1;
    return read_optim_kind(ck, t, i, 1, offset, count, v, err);
}

int tdm_ckpt_read_main_params_range(tdm_ckpt *ck, const tdm_param_table *t, int i, int64_t offset, int64_t count,
                                    float *out, tdm_error *err) {
    if (ck->optimizer && !ck->state.params_bf16)
        return tdm_errorf(err,
                          "--load %s: the checkpoint was saved with float32 parameters and holds no fp32 main "
                          "copy of bfloat16 ones",
                          ck->dir);
    return read_optim_kind(ck, t, i, 2, offset, count, out, err);
}

int tdm_ckpt_finish_optimizer(tdm_ckpt *ck, tdm_error *err) { return tdm_ckpt_finish_optimizer_part(ck, NULL, err); }

int tdm_ckpt_finish_optimizer_part(tdm_ckpt *ck, const unsigned char *blocks, tdm_error *err) {
    if (!ck->optimizer) return tdm_errorf(err, "--load %s: the checkpoint holds no optimizer state", ck->dir);
    struct tdm_ckpt_stream *s = ck->optimizer_in;
    if (s->b.block && blocks) return verify_blocks(s, blocks, err);
    return stream_finish(s, err);
}

int64_t tdm_ckpt_optimizer_blocks(const tdm_ckpt *ck, const unsigned char **verified) {
    const struct tdm_ckpt_stream *s = ck->optimizer_in;
    if (verified) *verified = s ? s->verified : NULL;
    return s ? s->b.n : 0;
}

void tdm_ckpt_optimizer_io(const tdm_ckpt *ck, uint64_t *bytes_read, uint64_t *file_bytes) {
    const struct tdm_ckpt_stream *s = ck->optimizer_in;
    *bytes_read = s ? s->bytes_read : 0;
    *file_bytes = s ? s->size : 0;
}
