/* checkpoint.c - atomic checkpoint directories (see checkpoint.h). */
#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "kernels/kernels.h"

#define PATH_CAP 4096
/* the files whose size and checksum trainer_state.json records */
static const char *const CKPT_FILES[] = {"model.safetensors", "optimizer.safetensors", "config.json",
                                         "preprocessor_config.json"};
#define N_CKPT_FILES 4

void tdm_ckpt_iter_name(int64_t iteration, char *out, size_t cap) {
    snprintf(out, cap, "iter_%07lld", (long long)iteration);
}

uint64_t tdm_ckpt_model_fingerprint(const tdm_param_table *t) {
    XXH3_state_t *s = XXH3_createState();
    XXH3_64bits_reset(s);
    for (int i = 0; i < t->n; i++) {
        const tdm_param *p = &t->p[i];
        XXH3_64bits_update(s, p->name, strlen(p->name) + 1);
        XXH3_64bits_update(s, &p->ndim, sizeof p->ndim);
        XXH3_64bits_update(s, p->shape, sizeof(int64_t) * (size_t)p->ndim);
    }
    uint64_t h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return h;
}

/* XXH3 and size of a file, streamed in 1 MiB reads. */
static int hash_file(const char *path, uint64_t *hash, int64_t *size, tdm_error *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return tdm_errorf(err, "%s: cannot open: %s", path, strerror(errno));
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

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* rm -rf; a missing path is fine. */
static void remove_tree(const char *path) {
    if (tdm_file_exists(path)) nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Removes what earlier saves of this iteration left when they were killed (any pid):
 * <name>.tmp.* (a half-written checkpoint, or the replaced one after a swap) and <name>.old.*,
 * each as large as a checkpoint. Loading ignores them; without this every save killed by a
 * scheduler's time limit kept one on the disk for good. */
static void remove_leftovers(const char *save_dir, const char *name) {
    DIR *d = opendir(save_dir);
    if (!d) return;
    size_t n = strlen(name);
    char path[PATH_CAP];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, name, n) != 0) continue;
        if (strncmp(e->d_name + n, ".tmp.", 5) != 0 && strncmp(e->d_name + n, ".old.", 5) != 0) continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", save_dir, e->d_name) < sizeof path) remove_tree(path);
    }
    closedir(d);
}

/* Copies src to dst; *hash and *size are of the bytes written. */
static int copy_file(const char *src, const char *dst, uint64_t *hash, int64_t *size, tdm_error *err) {
    size_t len;
    char *data = tdm_read_file(src, (size_t)64 << 20, &len, err);
    if (!data) return -1;
    int rc = tdm_write_file_atomic(dst, data, len, err);
    *hash = XXH3_64bits(data, len);
    *size = (int64_t)len;
    free(data);
    return rc;
}

/* A file's XXH3 and size taken from the bytes as tdm_safetensors_write_observed writes them:
 * the checksum trainer_state.json records costs no read of the file (tens of GB at 8B). */
typedef struct write_hash {
    XXH3_state_t *s;
    int64_t bytes;
    /* and, when block > 0, the XXH3 of every `block` bytes (the last block may be shorter) */
    uint64_t block;
    XXH3_state_t *bs;
    uint64_t in_block;
    uint64_t *blocks;
    int64_t n_blocks, cap_blocks;
} write_hash;

static void end_block(write_hash *w) {
    if (w->n_blocks == w->cap_blocks) {
        w->cap_blocks = w->cap_blocks ? 2 * w->cap_blocks : 64;
        w->blocks = tdm_xrealloc(w->blocks, sizeof *w->blocks * (size_t)w->cap_blocks);
    }
    w->blocks[w->n_blocks++] = XXH3_64bits_digest(w->bs);
    XXH3_64bits_reset(w->bs);
    w->in_block = 0;
}

static void observe_write(void *ctx, const void *bytes, size_t n) {
    write_hash *w = ctx;
    XXH3_64bits_update(w->s, bytes, n);
    w->bytes += (int64_t)n;
    const char *p = bytes;
    while (w->block && n > 0) {
        size_t k = w->block - w->in_block < n ? (size_t)(w->block - w->in_block) : n;
        XXH3_64bits_update(w->bs, p, k);
        w->in_block += k;
        p += k;
        n -= k;
        if (w->in_block == w->block) end_block(w);
    }
}

/* Writes a safetensors file, hashing it as it is written; with block > 0 also each block of
 * it (*blocks[*n_blocks], the caller frees). */
static int write_hashed(const char *path, const tdm_st_entry *ents, int n, tdm_st_dtype dtype, const char *const *meta,
                        int n_meta, tdm_st_provider provide, void *pctx, uint64_t block, uint64_t *hash,
                        int64_t *size, uint64_t **blocks, int64_t *n_blocks, tdm_error *err) {
    write_hash w = {.s = XXH3_createState(), .block = block};
    XXH3_64bits_reset(w.s);
    if (block) {
        w.bs = XXH3_createState();
        XXH3_64bits_reset(w.bs);
    }
    int rc = tdm_safetensors_write_stream(path, ents, n, dtype, meta, n_meta, provide, pctx, observe_write, &w, err);
    if (block && w.in_block) end_block(&w);
    *hash = XXH3_64bits_digest(w.s);
    *size = w.bytes;
    XXH3_freeState(w.s);
    if (block) {
        XXH3_freeState(w.bs);
        *blocks = w.blocks;
        *n_blocks = w.n_blocks;
    }
    return rc;
}

/* The block size of optimizer.safetensors' checksums for a file of about `bytes`: at most
 * TDM_CKPT_MAX_BLOCKS blocks (their hex digits stay a small part of trainer_state.json), at
 * least 4 KiB each, a power of two. A rank that loads only its shard of the Adam state reads
 * the blocks that hold it, so smaller blocks waste less at the shard's two ends. */
#define TDM_CKPT_MAX_BLOCKS 16384
static uint64_t block_bytes_for(uint64_t bytes) {
    uint64_t b = 4096;
    while (b * TDM_CKPT_MAX_BLOCKS < bytes) b *= 2;
    return b;
}

/* optimizer.safetensors holds, per trainable parameter, its exp_avg, exp_avg_sq and (--bf16)
 * fp32_param: entry k is kind k % kinds of parameter param[k / kinds], asked of spec->optim_state. */
static const char *const OPTIM_KIND[3] = {"exp_avg", "exp_avg_sq", "fp32_param"};
typedef struct optim_entries {
    const tdm_ckpt_save_spec *spec;
    int *param;
    int kinds;
} optim_entries;

static const float *provide_optim(void *ctx, int index, tdm_error *err) {
    const optim_entries *o = ctx;
    return o->spec->optim_state(o->spec->optim_ctx, o->param[index / o->kinds], index % o->kinds, err);
}

static void state_json(tdm_strbuf *sb, const tdm_ckpt_state *s, const uint64_t *hashes, const int64_t *sizes,
                       const int *present, uint64_t opt_block, const uint64_t *opt_blocks, int64_t n_opt_blocks) {
    tdm_sb_printf(sb, "{\n  \"format_version\": %d,\n", TDM_CKPT_FORMAT_VERSION);
    tdm_sb_printf(sb, "  \"iteration\": %lld,\n  \"consumed_samples\": %lld,\n", (long long)s->iteration,
                  (long long)s->consumed_samples);
    tdm_sb_printf(sb, "  \"scheduler\": {\"num_steps\": %lld, \"max_lr\": %.17g, \"min_lr\": %.17g, "
                      "\"decay_style\": ",
                  (long long)s->scheduler_num_steps, s->lr, s->min_lr);
    tdm_sb_json_string(sb, s->lr_decay_style, strlen(s->lr_decay_style));
    tdm_sb_printf(sb, ", \"warmup_init\": %.17g, \"warmup_steps\": %.17g, \"decay_steps\": %lld", s->lr_warmup_init,
                  s->lr_warmup_steps, (long long)s->lr_decay_steps);
    if (s->has_wd_schedule) {
        tdm_sb_printf(sb, ", \"start_wd\": %.17g, \"end_wd\": %.17g, \"wd_incr_steps\": %lld, \"wd_incr_style\": ",
                      s->start_wd, s->end_wd, (long long)s->wd_incr_steps);
        tdm_sb_json_string(sb, s->wd_incr_style, strlen(s->wd_incr_style));
    }
    tdm_sb_printf(sb, "},\n  \"seed\": \"%" PRIu64 "\",\n  \"adam_step\": %lld,\n", s->seed, (long long)s->adam_step);
    tdm_sb_printf(sb, "  \"data_parallel_size\": %d,\n  \"distributed_optimizer\": %s,\n  \"has_optimizer\": %s,\n",
                  s->dp, s->distributed_optimizer ? "true" : "false", s->has_optimizer ? "true" : "false");
    if (s->params_bf16) tdm_sb_puts(sb, "  \"params_dtype\": \"bfloat16\",\n"); /* absent: float32 */
    tdm_sb_printf(sb, "  \"args_fingerprint\": \"%016" PRIx64 "\",\n  \"model_fingerprint\": \"%016" PRIx64 "\",\n",
                  s->args_fingerprint, s->model_fingerprint);
    tdm_sb_puts(sb, "  \"files\": {");
    int first = 1;
    for (int i = 0; i < N_CKPT_FILES; i++) {
        if (!present[i]) continue;
        tdm_sb_printf(sb, "%s\n    \"%s\": {\"bytes\": %lld, \"xxh3\": \"%016" PRIx64 "\"", first ? "" : ",",
                      CKPT_FILES[i], (long long)sizes[i], hashes[i]);
        if (i == 1 && opt_block) { /* each block's XXH3, 16 hex digits after 16 */
            tdm_sb_printf(sb, ",\n      \"block_bytes\": %llu, \"block_xxh3\": \"", (unsigned long long)opt_block);
            for (int64_t j = 0; j < n_opt_blocks; j++) tdm_sb_printf(sb, "%016" PRIx64, opt_blocks[j]);
            tdm_sb_puts(sb, "\"");
        }
        tdm_sb_puts(sb, "}");
        first = 0;
    }
    tdm_sb_puts(sb, "\n  }\n}\n");
}

int tdm_ckpt_save(const char *save_dir, const tdm_ckpt_save_spec *spec, char *out_dir, size_t cap, tdm_error *err) {
    const tdm_ckpt_state *st = spec->state;
    const tdm_param_table *t = spec->params;
    char name[64], final_dir[PATH_CAP - 256], tmp_dir[PATH_CAP - 128], old_dir[PATH_CAP - 128], path[PATH_CAP];
    if (strlen(save_dir) > PATH_CAP - 256) return tdm_errorf(err, "--save %.64s...: path too long", save_dir);
    tdm_ckpt_iter_name(st->iteration, name, sizeof name);
    if (tdm_mkdirs(save_dir, err) != 0) return -1;
    snprintf(final_dir, sizeof final_dir, "%s/%s", save_dir, name);
    snprintf(tmp_dir, sizeof tmp_dir, "%s.tmp.%d", final_dir, (int)getpid());
    snprintf(old_dir, sizeof old_dir, "%s.old.%d", final_dir, (int)getpid());
    remove_leftovers(save_dir, name);
    if (mkdir(tmp_dir, 0755) != 0) return tdm_errorf(err, "%s: cannot create directory: %s", tmp_dir, strerror(errno));

    uint64_t hashes[N_CKPT_FILES] = {0};
    int64_t sizes[N_CKPT_FILES] = {0};
    int present[N_CKPT_FILES] = {0};
    tdm_st_entry *ents = NULL;
    char **names = NULL;
    int n_ent = 0;
    char meta_iter[32];
    snprintf(meta_iter, sizeof meta_iter, "%lld", (long long)st->iteration);
    const char *meta[] = {"format", "pt", "iteration", meta_iter};

    /* 1. weights, Hugging Face names, fp32 (BF16 with --bf16: their values are bfloat16), in table
     * order (loading reads them in file order) */
    ents = tdm_xcalloc((size_t)t->n * 3 + 1, sizeof *ents);
    for (int i = 0; i < t->n; i++)
        ents[i] = (tdm_st_entry){.name = t->p[i].name, .ndim = t->p[i].ndim, .shape = t->p[i].shape,
                                 .data = t->p[i].data};
    snprintf(path, sizeof path, "%s/model.safetensors", tmp_dir);
    uint64_t opt_block = 0, *opt_blocks = NULL;
    int64_t n_opt_blocks = 0;
    if (write_hashed(path, ents, t->n, spec->params_bf16 ? TDM_ST_BF16 : TDM_ST_F32, meta, 2, NULL, NULL, 0, &hashes[0],
                     &sizes[0], NULL, NULL, err) != 0)
        goto fail;
    present[0] = 1;

    /* 2. Adam state in parameter shape, from the arrays or asked for tensor by tensor */
    int streamed = spec->optim_state != NULL;
    if (spec->params_bf16 && !streamed && spec->exp_avg && !spec->fp32_param) {
        tdm_errorf(err, "%s: bfloat16 parameters need their fp32 main copy saved beside the Adam state", final_dir);
        goto fail;
    }
    if (streamed || (spec->exp_avg && spec->exp_avg_sq)) {
        const int kinds = spec->params_bf16 ? 3 : 2;
        names = tdm_xcalloc((size_t)t->n * 3, sizeof *names);
        optim_entries oe = {spec, tdm_xcalloc((size_t)t->n + 1, sizeof(int)), kinds};
        const float *const *arr[3] = {spec->exp_avg, spec->exp_avg_sq, spec->fp32_param}; /* array mode */
        for (int i = 0; i < t->n; i++) {
            if (streamed ? !t->p[i].trainable : !spec->exp_avg[i]) continue;
            for (int k = 0; k < kinds; k++) {
                size_t n = strlen(t->p[i].name) + 16;
                names[n_ent] = tdm_xmalloc(n);
                snprintf(names[n_ent], n, "%s.%s", OPTIM_KIND[k], t->p[i].name);
                ents[n_ent].name = names[n_ent];
                ents[n_ent].ndim = t->p[i].ndim;
                ents[n_ent].shape = t->p[i].shape;
                ents[n_ent].data = streamed ? NULL : arr[k][i];
                oe.param[n_ent / kinds] = i;
                n_ent++;
            }
        }
        uint64_t approx = 0;
        for (int k = 0; k < n_ent; k++) approx += 4 * (uint64_t)t->p[oe.param[k / kinds]].numel;
        opt_block = block_bytes_for(approx);
        snprintf(path, sizeof path, "%s/optimizer.safetensors", tmp_dir);
        int wrc = write_hashed(path, ents, n_ent, TDM_ST_F32, meta, 2, streamed ? provide_optim : NULL, &oe, opt_block,
                               &hashes[1], &sizes[1], &opt_blocks, &n_opt_blocks, err);
        free(oe.param);
        if (wrc != 0) goto fail;
        present[1] = 1;
    }

    /* 3. config.json */
    if (spec->config_json_path) {
        snprintf(path, sizeof path, "%s/config.json", tmp_dir);
        if (copy_file(spec->config_json_path, path, &hashes[2], &sizes[2], err) != 0) goto fail;
        present[2] = 1;
    }

    if (spec->preprocessor_json_path) { /* as a Hugging Face model folder has it */
        snprintf(path, sizeof path, "%s/preprocessor_config.json", tmp_dir);
        if (copy_file(spec->preprocessor_json_path, path, &hashes[3], &sizes[3], err) != 0) goto fail;
        present[3] = 1;
    }

    /* 4. trainer state, with the checksums of what was just written (taken as it was written) */
    tdm_ckpt_state s2 = *st;
    s2.has_optimizer = present[1];
    s2.model_fingerprint = tdm_ckpt_model_fingerprint(t);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    state_json(&sb, &s2, hashes, sizes, present, opt_block, opt_blocks, n_opt_blocks);
    snprintf(path, sizeof path, "%s/trainer_state.json", tmp_dir);
    int rc = tdm_write_file_atomic(path, sb.data, sb.len, err);
    tdm_sb_free(&sb);
    if (rc != 0) goto fail;
    if (tdm_fsync_dir(tmp_dir, err) != 0) goto fail;

    /* 5. publish: rename the directory into place, then move the tracker. An existing
     * directory of this iteration (the tracker may name it) is swapped with the new one in one
     * step, so that no crash leaves the tracker naming a missing directory; only where the file
     * system cannot swap is it moved aside first. */
    int had_old = 0;
    const char *old_at = old_dir;
    if (tdm_file_exists(final_dir) && renameat2(AT_FDCWD, tmp_dir, AT_FDCWD, final_dir, RENAME_EXCHANGE) == 0) {
        had_old = 1;
        old_at = tmp_dir; /* the replaced checkpoint, under the temporary name */
    } else {
        if (tdm_file_exists(final_dir)) {
            remove_tree(old_dir);
            if (rename(final_dir, old_dir) != 0) {
                tdm_errorf(err, "%s: cannot move the existing checkpoint aside: %s", final_dir, strerror(errno));
                goto fail;
            }
            had_old = 1;
        }
        if (rename(tmp_dir, final_dir) != 0) {
            tdm_errorf(err, "%s: rename to %s failed: %s", tmp_dir, final_dir, strerror(errno));
            if (had_old) rename(old_dir, final_dir);
            goto fail;
        }
    }
    if (tdm_fsync_dir(save_dir, err) != 0) goto fail_published;
    char tracker[PATH_CAP], text[32];
    snprintf(tracker, sizeof tracker, "%s/%s", save_dir, TDM_CKPT_TRACKER);
    int n = snprintf(text, sizeof text, "%lld\n", (long long)st->iteration);
    if (tdm_write_file_atomic(tracker, text, (size_t)n, err) != 0) goto fail_published;
    if (had_old) remove_tree(old_at);
    free(opt_blocks);
    for (int i = 0; i < n_ent; i++) free(names[i]);
    free(names);
    free(ents);
    if (out_dir) snprintf(out_dir, cap, "%s", final_dir);
    return 0;

fail:
    remove_tree(tmp_dir);
fail_published:
    free(opt_blocks);
    for (int i = 0; i < n_ent; i++) free(names[i]);
    free(names);
    free(ents);
    return tdm_error_prefix(err, "saving checkpoint %s", final_dir);
}

int tdm_ckpt_check_save_dir(const char *save_dir, tdm_error *err) {
    if (tdm_mkdirs(save_dir, err) != 0) return tdm_error_prefix(err, "--save");
    char probe[PATH_CAP];
    if ((size_t)snprintf(probe, sizeof probe, "%s/iter_probe.tmp.%d", save_dir, (int)getpid()) >= sizeof probe)
        return tdm_errorf(err, "--save %.64s...: path too long", save_dir);
    if (mkdir(probe, 0755) != 0 && errno != EEXIST)
        return tdm_errorf(err, "--save %s: cannot write a checkpoint there: %s", save_dir, strerror(errno));
    rmdir(probe);
    return 0;
}

/* ------------------------------------------------------------------ loading */

int tdm_ckpt_resolve(const char *load, char *iter_dir, size_t cap, tdm_error *err) {
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/trainer_state.json", load);
    if (tdm_file_exists(path)) {
        snprintf(iter_dir, cap, "%s", load);
        return 0;
    }
    struct stat stt;
    if (stat(load, &stt) != 0 || !S_ISDIR(stt.st_mode))
        return tdm_errorf(err, "--load %s: not a directory", load);
    snprintf(path, sizeof path, "%s/%s", load, TDM_CKPT_TRACKER);
    if (!tdm_file_exists(path))
        return tdm_errorf(err, "--load %s: no %s (not a checkpoint directory, or no checkpoint was completed there)",
                          load, TDM_CKPT_TRACKER);
    size_t len;
    char *text = tdm_read_file(path, 64, &len, err);
    if (!text) return -1;
    char *end;
    errno = 0;
    long long it = strtoll(text, &end, 10);
    while (*end == '\n' || *end == ' ' || *end == '\r') end++;
    int bad = end == text || *end || errno || it < 0;
    free(text);
    if (bad) return tdm_errorf(err, "%s: expected an iteration number", path);
    char name[64];
    tdm_ckpt_iter_name(it, name, sizeof name);
    snprintf(iter_dir, cap, "%s/%s", load, name);
    snprintf(path, sizeof path, "%s/trainer_state.json", iter_dir);
    if (!tdm_file_exists(path))
        return tdm_errorf(err, "--load %s: the tracker names iteration %lld but %s/trainer_state.json is missing", load,
                          it, iter_dir);
    return 0;
}

static int get_hex64(const tdm_json *obj, const char *key, uint64_t *out, const char *file, tdm_error *err) {
    const char *s = tdm_json_get_str(obj, key, err);
    if (!s) return tdm_error_prefix(err, "%s", file);
    char *end;
    *out = strtoull(s, &end, 16);
    if (*end || end == s) return tdm_errorf(err, "%s: %s: expected 16 hex digits", file, key);
    return 0;
}

/* Per-block checksums of optimizer.safetensors (checkpoints of before 2026-11-30 have none:
 * block == 0, the file is verified whole). */
typedef struct block_sums {
    uint64_t block;
    int64_t n;
    uint64_t *hash;
} block_sums;

static int parse_blocks(const tdm_json *f, const char *file, int64_t size, block_sums *b, tdm_error *err) {
    double d;
    if (tdm_json_get_num(f, "block_bytes", &d, err) != 0) return tdm_error_prefix(err, "%s", file);
    if (!(d >= 1 && d <= 9.0e15)) return tdm_errorf(err, "%s: block_bytes %g: expected a positive byte count", file, d);
    b->block = (uint64_t)d;
    b->n = size > 0 ? (int64_t)(((uint64_t)size + b->block - 1) / b->block) : 0;
    const char *hex = tdm_json_get_str(f, "block_xxh3", err);
    if (!hex) return tdm_error_prefix(err, "%s", file);
    if (strlen(hex) != (size_t)b->n * 16)
        return tdm_errorf(err, "%s: block_xxh3 holds %zu hex digits, %lld blocks of %llu bytes need %lld", file,
                          strlen(hex), (long long)b->n, (unsigned long long)b->block, (long long)b->n * 16);
    b->hash = tdm_xmalloc(sizeof *b->hash * (size_t)(b->n ? b->n : 1));
    for (int64_t j = 0; j < b->n; j++) {
        char digits[17];
        memcpy(digits, hex + 16 * j, 16);
        digits[16] = 0;
        char *end;
        b->hash[j] = strtoull(digits, &end, 16);
        if (*end) {
            free(b->hash);
            b->hash = NULL;
            return tdm_errorf(err, "%s: block_xxh3: block %lld is not 16 hex digits", file, (long long)j);
        }
    }
    return 0;
}

static int parse_state(const char *file, const char *text, size_t len, tdm_ckpt_state *s, uint64_t *hashes,
                       int64_t *sizes, int *present, block_sums *ob, tdm_error *err) {
    tdm_json_doc *doc = tdm_json_parse(text, len, file, err);
    if (!doc) return -1;
    const tdm_json *r = tdm_json_root(doc);
    int64_t v, ver;
    int b;
    double d;
    memset(s, 0, sizeof *s);
    if (tdm_json_get_int(r, "format_version", &ver, err) != 0) goto bad;
    if (ver != TDM_CKPT_FORMAT_VERSION) {
        tdm_errorf(err, "%s: format_version %lld, this build reads %d", file, (long long)ver, TDM_CKPT_FORMAT_VERSION);
        goto out_err;
    }
    if (tdm_json_get_int(r, "iteration", &s->iteration, err) != 0) goto bad;
    if (tdm_json_get_int(r, "consumed_samples", &s->consumed_samples, err) != 0) goto bad;
    const tdm_json *sch = tdm_json_get(r, "scheduler");
    if (tdm_json_get_int(sch, "num_steps", &s->scheduler_num_steps, err) != 0) goto bad;
    if (tdm_json_get_num(sch, "max_lr", &s->lr, err) != 0) goto bad;
    if (tdm_json_get_num(sch, "min_lr", &s->min_lr, err) != 0) goto bad;
    const char *style = tdm_json_get_str(sch, "decay_style", err);
    if (!style) goto bad;
    snprintf(s->lr_decay_style, sizeof s->lr_decay_style, "%s", style);
    if (tdm_json_get(sch, "decay_steps")) { /* the whole schedule (not in checkpoints of before 2026-11-30) */
        if (tdm_json_get_num(sch, "warmup_init", &s->lr_warmup_init, err) != 0 ||
            tdm_json_get_num(sch, "warmup_steps", &s->lr_warmup_steps, err) != 0 ||
            tdm_json_get_int(sch, "decay_steps", &s->lr_decay_steps, err) != 0)
            goto bad;
        s->has_schedule = 1;
    }
    if (tdm_json_get(sch, "wd_incr_style")) { /* the weight-decay schedule (likewise) */
        const char *wds = tdm_json_get_str(sch, "wd_incr_style", err);
        if (!wds || tdm_json_get_num(sch, "start_wd", &s->start_wd, err) != 0 ||
            tdm_json_get_num(sch, "end_wd", &s->end_wd, err) != 0 ||
            tdm_json_get_int(sch, "wd_incr_steps", &s->wd_incr_steps, err) != 0)
            goto bad;
        snprintf(s->wd_incr_style, sizeof s->wd_incr_style, "%s", wds);
        s->has_wd_schedule = 1;
    }
    const char *seed = tdm_json_get_str(r, "seed", err);
    if (!seed) goto bad;
    s->seed = strtoull(seed, NULL, 10);
    if (tdm_json_get_int(r, "adam_step", &s->adam_step, err) != 0) goto bad;
    if (tdm_json_get_int(r, "data_parallel_size", &v, err) != 0) goto bad;
    s->dp = (int)v;
    if (tdm_json_get_bool(r, "distributed_optimizer", &b, err) != 0) goto bad;
    s->distributed_optimizer = b;
    if (tdm_json_get_bool(r, "has_optimizer", &b, err) != 0) goto bad;
    s->has_optimizer = b;
    if (tdm_json_get(r, "params_dtype")) { /* written with --bf16 only */
        const char *pd = tdm_json_get_str(r, "params_dtype", err);
        if (!pd) goto bad;
        if (strcmp(pd, "bfloat16") != 0 && strcmp(pd, "float32") != 0) {
            tdm_errorf(err, "%s: params_dtype \"%s\", expected \"bfloat16\" or \"float32\"", file, pd);
            goto out_err;
        }
        s->params_bf16 = !strcmp(pd, "bfloat16");
    }
    if (get_hex64(r, "args_fingerprint", &s->args_fingerprint, file, err) != 0) goto out_err;
    if (get_hex64(r, "model_fingerprint", &s->model_fingerprint, file, err) != 0) goto out_err;
    const tdm_json *files = tdm_json_get(r, "files");
    for (int i = 0; i < N_CKPT_FILES; i++) {
        const tdm_json *f = tdm_json_get(files, CKPT_FILES[i]);
        present[i] = f != NULL;
        if (!f) continue;
        if (tdm_json_get_num(f, "bytes", &d, err) != 0) goto bad;
        sizes[i] = (int64_t)d;
        if (get_hex64(f, "xxh3", &hashes[i], file, err) != 0) goto out_err;
        if (i == 1 && ob && tdm_json_get(f, "block_bytes") && parse_blocks(f, file, sizes[i], ob, err) != 0)
            goto out_err;
    }
    if (!present[0]) {
        tdm_errorf(err, "%s: files: model.safetensors is not listed", file);
        goto out_err;
    }
    /* the file is not checksummed itself: a hand-edited count would start the loop, the
     * sampler or Adam's bias correction somewhere that does not exist */
    const struct { const char *key; int64_t v, min; } counts[] = {
        {"iteration", s->iteration, 0}, {"consumed_samples", s->consumed_samples, 0},
        {"scheduler.num_steps", s->scheduler_num_steps, 0}, {"adam_step", s->adam_step, 0},
        {"data_parallel_size", s->dp, 1}};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
        if (counts[k].v < counts[k].min) {
            tdm_errorf(err, "%s: %s is %lld, expected at least %lld", file, counts[k].key, (long long)counts[k].v,
                       (long long)counts[k].min);
            goto out_err;
        }
    tdm_json_free(doc);
    return 0;
bad:
    tdm_error_prefix(err, "%s", file);
out_err:
    tdm_json_free(doc);
    return -1;
}

/* A folder named for an iteration (iter_0000010) must hold that iteration's state: one copied or
 * renamed over another would resume at another step than the folder says. Other names pass. */
static int check_folder_iteration(const char *dir, int64_t iteration, const char *file, tdm_error *err) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    const char *base = dir + b;
    const size_t len = n - b;
    if (len < 6 || len > 5 + 18 || strncmp(base, "iter_", 5) != 0) return 0;
    for (size_t i = 5; i < len; i++)
        if (base[i] < '0' || base[i] > '9') return 0;
    long long named = strtoll(base + 5, NULL, 10);
    if (named == iteration) return 0;
    return tdm_errorf(err, "%s: iteration %lld, but its folder %.*s is named for iteration %lld (a state copied "
                      "from another checkpoint, or a renamed folder?)",
                      file, (long long)iteration, (int)len, base, named);
}

/* Resolves `load` into ck->dir and reads its trainer_state.json into ck->state and ck->state_hash. */
static int read_state(const char *load, tdm_ckpt *ck, uint64_t *hashes, int64_t *sizes, int *present,
                      block_sums *ob, tdm_error *err) {
    memset(ck, 0, sizeof *ck);
    if (tdm_ckpt_resolve(load, ck->dir, sizeof ck->dir, err) != 0) return -1;
    char path[PATH_CAP + 64];
    snprintf(path, sizeof path, "%s/trainer_state.json", ck->dir);
    size_t len;
    char *text = tdm_read_file(path, 1 << 20, &len, err);
    if (!text) return -1;
    int rc = parse_state(path, text, len, &ck->state, hashes, sizes, present, ob, err);
    ck->state_hash = XXH3_64bits(text, len);
    free(text);
    if (rc == 0) rc = check_folder_iteration(ck->dir, ck->state.iteration, path, err);
    return rc;
}

int tdm_ckpt_read_state(const char *load, tdm_ckpt *ck, tdm_error *err) {
    uint64_t hashes[N_CKPT_FILES];
    int64_t sizes[N_CKPT_FILES];
    int present[N_CKPT_FILES];
    return read_state(load, ck, hashes, sizes, present, NULL, err);
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
    return tdm_errorf(err, "%s: checksum %016" PRIx64 " does not match trainer_state.json's %016" PRIx64
                           ": the file is corrupted",
                      path, have, want);
}

struct tdm_ckpt_stream {
    int fd;
    char path[PATH_CAP + 64];
    XXH3_state_t *h;
    uint64_t at;   /* bytes hashed so far, from the start: where the stream reads next */
    uint64_t size; /* bytes, as trainer_state.json records them */
    uint64_t want; /* its XXH3, likewise */
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
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tdm_errorf(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
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
            return tdm_errorf(err, "%s: ends at byte %llu, trainer_state.json says %llu bytes: the file is truncated "
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
        return tdm_errorf(err, "%s: bytes %llu-%llu (block %lld of %lld): checksum %016" PRIx64 " does not match "
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
        return tdm_errorf(err, "%s: longer than the %llu bytes trainer_state.json says: the file changed while it "
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
    if (read_state(load, ck, hashes, sizes, present, ob, err) != 0) return -1;
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
        if (rc == 0 && x->dtype == TDM_ST_BF16)
            tdm_widen_bf16(dst + i, buf, n);
        else
            for (int64_t j = 0; rc == 0 && j < n; j++) dst[i + j] = tdm_f16_to_f32(buf[j]);
    }
    free(buf);
    return rc;
}

static void shape_str(int ndim, const int64_t *shape, char *out, size_t cap) {
    size_t o = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < ndim && o < cap; i++) o += (size_t)snprintf(out + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
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
    for (int i = 0; i < t->n && rc == 0; i++) {
        tdm_param *p = &t->p[order[i].param];
        if (!p->data)
            rc = tdm_errorf(err, "tensor \"%s\": no storage bound to load %s into", p->name, ck->model_in->path);
        else
            rc = read_tensor(ck->model_in, order[i].x, p->data, err);
    }
    if (rc == 0) rc = stream_finish(ck->model_in, err);
    for (int i = 0; rc == 0 && i < t->n; i++) /* a checksum vouches for the bytes, not for the numbers */
        rc = tdm_st_check_finite(t->p[i].data, t->p[i].numel, ck->model_in->path, t->p[i].name, err);
    /* the values went straight into the table (a second copy of the weights would not fit): what
     * the file's checksum did not vouch for is wiped, so no caller can train on it */
    for (int i = 0; rc != 0 && i < t->n; i++)
        if (t->p[i].data) memset(t->p[i].data, 0, sizeof(float) * (size_t)t->p[i].numel);
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
        tdm_errorf(err, "%s: tensor \"%s\": not in the checkpoint (was %s frozen when it was saved? then add "
                        "--no-load-optim)", ck->optimizer_in->path, name, param);
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
        return tdm_errorf(err, "--load %s: the checkpoint was saved with float32 parameters and holds no fp32 main "
                               "copy of bfloat16 ones", ck->dir);
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
