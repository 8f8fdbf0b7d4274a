/* checkpoint_save.c - writing a checkpoint directory atomically, each file hashed as it is
 * written (checkpoint.h). */
#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/strbuf.h"
#include "train/checkpoint_internal.h"

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* rm -rf; a missing path is fine. */
static void remove_tree(const char *path) {
    if (tdm_file_exists(path)) nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* 1 when the process that named a leftover <name>.tmp.<pid> / .old.<pid> is gone: no process of
 * that pid on this host (this process's own are gone too: a save removes what it leaves).
 * Another live job's half-written checkpoint stays (the --save lock keeps a second job out;
 * a pid alive here that belonged to a job on another host keeps its leftover until it ends). */
static int owner_gone(const char *pid_text) {
    char *end;
    errno = 0;
    long pid = strtol(pid_text, &end, 10);
    if (errno || end == pid_text || *end || pid <= 0 || pid > 0x7fffffff) return 0; /* not ours to judge */
    if ((pid_t)pid == getpid()) return 1;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Removes what earlier saves of this iteration left when they were killed: <name>.tmp.<pid>
 * (a half-written checkpoint, or the replaced one after a swap) and <name>.old.<pid>, each as
 * large as a checkpoint, when their process is gone. Loading ignores them; without this every
 * save killed by a scheduler's time limit kept one on the disk for good. */
static void remove_leftovers(const char *save_dir, const char *name) {
    DIR *d = opendir(save_dir);
    if (!d) return;
    size_t n = strlen(name);
    char path[PATH_CAP];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, name, n) != 0) continue;
        if (strncmp(e->d_name + n, ".tmp.", 5) != 0 && strncmp(e->d_name + n, ".old.", 5) != 0) continue;
        if (!owner_gone(e->d_name + n + 5)) continue;
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
                        int n_meta, tdm_st_provider provide, void *pctx, uint64_t block, uint64_t *hash, int64_t *size,
                        uint64_t **blocks, int64_t *n_blocks, tdm_error *err) {
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

/* The entries of optimizer.safetensors and the parameter of each (OPTIM_KIND). */
typedef struct optim_entries {
    const tdm_ckpt_save_spec *spec;
    int *param;
    int kinds;
} optim_entries;

static const float *provide_optim(void *ctx, int index, tdm_error *err) {
    const optim_entries *o = ctx;
    return o->spec->optim_state(o->spec->optim_ctx, o->param[index / o->kinds], index % o->kinds, err);
}

/* What one save has written so far: each file's checksum and size, and the entries of the two
 * safetensors files (names of the optimizer's, allocated). */
typedef struct saved_files {
    uint64_t hashes[N_CKPT_FILES];
    int64_t sizes[N_CKPT_FILES];
    int present[N_CKPT_FILES];
    tdm_st_entry *ents; /* [3 * params + 1] */
    char **names;
    int n_ent;
    uint64_t opt_block, *opt_blocks; /* optimizer.safetensors' block size and block checksums */
    int64_t n_opt_blocks;
} saved_files;

/* 1. weights, Hugging Face names, fp32 (BF16 with --bf16: their values are bfloat16), in table
 * order (loading reads them in file order) */
typedef struct widened {
    const tdm_param_table *t;
    float *scratch;
} widened;

/* bfloat16 storage: a tensor's values widened, as the writer asks for them */
static const float *provide_widened(void *ctx, int index, tdm_error *err) {
    (void)err;
    widened *w = ctx;
    return tdm_param_values(&w->t->p[index], w->scratch);
}

static int write_weights(saved_files *f, const tdm_ckpt_save_spec *spec, const char *tmp_dir, const char *const *meta,
                         tdm_error *err) {
    const tdm_param_table *t = spec->params;
    char path[PATH_CAP];
    widened w = {t, NULL};
    for (int i = 0; i < t->n; i++) {
        f->ents[i] =
            (tdm_st_entry){.name = t->p[i].name, .ndim = t->p[i].ndim, .shape = t->p[i].shape, .data = t->p[i].data};
        if (t->p[i].bits && !w.scratch) w.scratch = tdm_xmalloc(sizeof(float) * (size_t)tdm_param_table_max_numel(t));
    }
    snprintf(path, sizeof path, "%s/model.safetensors", tmp_dir);
    int rc = write_hashed(path, f->ents, t->n, spec->params_bf16 ? TDM_ST_BF16 : TDM_ST_F32, meta, 2,
                          w.scratch ? provide_widened : NULL, &w, 0, &f->hashes[0], &f->sizes[0], NULL, NULL, err);
    free(w.scratch);
    if (rc != 0) return -1;
    f->present[0] = 1;
    return 0;
}

/* 2. Adam state in parameter shape, from the arrays or asked for tensor by tensor */
static int write_optimizer(saved_files *f, const tdm_ckpt_save_spec *spec, const char *tmp_dir, const char *final_dir,
                           const char *const *meta, tdm_error *err) {
    const tdm_param_table *t = spec->params;
    char path[PATH_CAP];
    int streamed = spec->optim_state != NULL;
    if (spec->params_bf16 && !streamed && spec->exp_avg && !spec->fp32_param)
        return tdm_errorf(err, "%s: bfloat16 parameters need their fp32 main copy saved beside the Adam state",
                          final_dir);
    if (!streamed && !(spec->exp_avg && spec->exp_avg_sq)) return 0;
    const int kinds = spec->params_bf16 ? 3 : 2;
    f->names = tdm_xcalloc((size_t)t->n * 3, sizeof *f->names);
    optim_entries oe = {spec, tdm_xcalloc((size_t)t->n + 1, sizeof(int)), kinds};
    const float *const *arr[3] = {spec->exp_avg, spec->exp_avg_sq, spec->fp32_param}; /* array mode */
    for (int i = 0; i < t->n; i++) {
        if (streamed ? !t->p[i].trainable : !spec->exp_avg[i]) continue;
        for (int k = 0; k < kinds; k++) {
            size_t n = strlen(t->p[i].name) + 16;
            f->names[f->n_ent] = tdm_xmalloc(n);
            snprintf(f->names[f->n_ent], n, "%s.%s", OPTIM_KIND[k], t->p[i].name);
            f->ents[f->n_ent].name = f->names[f->n_ent];
            f->ents[f->n_ent].ndim = t->p[i].ndim;
            f->ents[f->n_ent].shape = t->p[i].shape;
            f->ents[f->n_ent].data = streamed ? NULL : arr[k][i];
            oe.param[f->n_ent / kinds] = i;
            f->n_ent++;
        }
    }
    uint64_t approx = 0;
    for (int k = 0; k < f->n_ent; k++) approx += 4 * (uint64_t)t->p[oe.param[k / kinds]].numel;
    f->opt_block = block_bytes_for(approx);
    snprintf(path, sizeof path, "%s/optimizer.safetensors", tmp_dir);
    int wrc = write_hashed(path, f->ents, f->n_ent, TDM_ST_F32, meta, 2, streamed ? provide_optim : NULL, &oe,
                           f->opt_block, &f->hashes[1], &f->sizes[1], &f->opt_blocks, &f->n_opt_blocks, err);
    free(oe.param);
    if (wrc != 0) return -1;
    f->present[1] = 1;
    return 0;
}

/* The tokenizer and generation files of a Hugging Face model folder (hf_export.h); loading does not
 * read them, so trainer_state.json records no checksum of them. */
static int write_hf_files(const tdm_ckpt_save_spec *spec, const char *tmp_dir, tdm_error *err) {
    char path[PATH_CAP];
    if (spec->tokenizer_json_path) {
        uint64_t hash;
        int64_t size;
        snprintf(path, sizeof path, "%s/tokenizer.json", tmp_dir);
        if (copy_file(spec->tokenizer_json_path, path, &hash, &size, err) != 0) return -1;
    }
    const char *texts[2] = {spec->tokenizer_config_json, spec->generation_config_json};
    const char *names[2] = {"tokenizer_config.json", "generation_config.json"};
    for (int i = 0; i < 2; i++) {
        if (!texts[i]) continue;
        snprintf(path, sizeof path, "%s/%s", tmp_dir, names[i]);
        if (tdm_write_file_atomic(path, texts[i], strlen(texts[i]), err) != 0) return -1;
    }
    return 0;
}

/* 3. config.json, the preprocessor's, the tokenizer and generation config as a Hugging Face model
 * folder has them */
static int copy_configs(saved_files *f, const tdm_ckpt_save_spec *spec, const char *tmp_dir, tdm_error *err) {
    char path[PATH_CAP];
    if (spec->config_json_path) {
        snprintf(path, sizeof path, "%s/config.json", tmp_dir);
        if (copy_file(spec->config_json_path, path, &f->hashes[2], &f->sizes[2], err) != 0) return -1;
        f->present[2] = 1;
    }
    if (spec->preprocessor_json_path) { /* as a Hugging Face model folder has it */
        snprintf(path, sizeof path, "%s/preprocessor_config.json", tmp_dir);
        if (copy_file(spec->preprocessor_json_path, path, &f->hashes[3], &f->sizes[3], err) != 0) return -1;
        f->present[3] = 1;
    }
    return write_hf_files(spec, tmp_dir, err);
}

/* 4. trainer state, with the checksums of what was just written (taken as it was written) */
static int write_state(saved_files *f, const tdm_ckpt_save_spec *spec, const char *tmp_dir, tdm_error *err) {
    char path[PATH_CAP];
    tdm_ckpt_state s2 = *spec->state;
    s2.has_optimizer = f->present[1];
    s2.model_fingerprint = tdm_ckpt_model_fingerprint(spec->params);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_ckpt__state_json(&sb, &s2, f->hashes, f->sizes, f->present, f->opt_block, f->opt_blocks, f->n_opt_blocks);
    snprintf(path, sizeof path, "%s/trainer_state.json", tmp_dir);
    int rc = tdm_write_file_atomic(path, sb.data, sb.len, err);
    tdm_sb_free(&sb);
    if (rc != 0) return -1;
    return tdm_fsync_dir(tmp_dir, err) != 0 ? -1 : 0;
}

/* 5. publish: rename the directory into place, then move the tracker. An existing
 * directory of this iteration (the tracker may name it) is swapped with the new one in one
 * step, so that no crash leaves the tracker naming a missing directory; only where the file
 * system cannot swap is it moved aside first. Returns 0; -1 when nothing was published (tmp_dir
 * is still there); -2 when the directory is in place but the tracker was not moved. */
static int publish(const char *save_dir, const char *final_dir, const char *tmp_dir, const char *old_dir,
                   int64_t iteration, tdm_error *err) {
    int had_old = 0;
    const char *old_at = old_dir;
    if (tdm_file_exists(final_dir) && renameat2(AT_FDCWD, tmp_dir, AT_FDCWD, final_dir, RENAME_EXCHANGE) == 0) {
        had_old = 1;
        old_at = tmp_dir; /* the replaced checkpoint, under the temporary name */
    } else {
        if (tdm_file_exists(final_dir)) {
            remove_tree(old_dir);
            if (rename(final_dir, old_dir) != 0)
                return tdm_errorf(err, "%s: cannot move the existing checkpoint aside: %s", final_dir, strerror(errno));
            had_old = 1;
        }
        if (rename(tmp_dir, final_dir) != 0) {
            tdm_errorf(err, "%s: rename to %s failed: %s", tmp_dir, final_dir, strerror(errno));
            if (had_old) rename(old_dir, final_dir);
            return -1;
        }
    }
    if (tdm_fsync_dir(save_dir, err) != 0) return -2;
    char tracker[PATH_CAP], text[32];
    snprintf(tracker, sizeof tracker, "%s/%s", save_dir, TDM_CKPT_TRACKER);
    int n = snprintf(text, sizeof text, "%lld\n", (long long)iteration);
    if (tdm_write_file_atomic(tracker, text, (size_t)n, err) != 0) return -2;
    if (had_old) remove_tree(old_at);
    return 0;
}

int tdm_ckpt_save(const char *save_dir, const tdm_ckpt_save_spec *spec, char *out_dir, size_t cap, tdm_error *err) {
    const tdm_ckpt_state *st = spec->state;
    const tdm_param_table *t = spec->params;
    char name[64], final_dir[PATH_CAP - 256], tmp_dir[PATH_CAP - 128], old_dir[PATH_CAP - 128];
    if (strlen(save_dir) > PATH_CAP - 256) return tdm_errorf(err, "--save %.64s...: path too long", save_dir);
    tdm_ckpt_iter_name(st->iteration, name, sizeof name);
    if (tdm_mkdirs(save_dir, err) != 0) return -1;
    snprintf(final_dir, sizeof final_dir, "%s/%s", save_dir, name);
    snprintf(tmp_dir, sizeof tmp_dir, "%s.tmp.%d", final_dir, (int)getpid());
    snprintf(old_dir, sizeof old_dir, "%s.old.%d", final_dir, (int)getpid());
    remove_leftovers(save_dir, name);
    if (mkdir(tmp_dir, 0755) != 0) return tdm_errorf(err, "%s: cannot create directory: %s", tmp_dir, strerror(errno));

    saved_files f = {0};
    char meta_iter[32];
    snprintf(meta_iter, sizeof meta_iter, "%lld", (long long)st->iteration);
    const char *meta[] = {"format", "pt", "iteration", meta_iter};
    f.ents = tdm_xcalloc((size_t)t->n * 3 + 1, sizeof *f.ents);
    int rc = write_weights(&f, spec, tmp_dir, meta, err);
    if (rc == 0) rc = write_optimizer(&f, spec, tmp_dir, final_dir, meta, err);
    if (rc == 0) rc = copy_configs(&f, spec, tmp_dir, err);
    if (rc == 0) rc = write_state(&f, spec, tmp_dir, err);
    if (rc == 0) rc = publish(save_dir, final_dir, tmp_dir, old_dir, st->iteration, err);
    if (rc == -1) remove_tree(tmp_dir); /* not published: the half-written directory goes */
    free(f.opt_blocks);
    for (int i = 0; i < f.n_ent; i++) free(f.names[i]);
    free(f.names);
    free(f.ents);
    if (rc != 0) return tdm_error_prefix(err, "saving checkpoint %s", final_dir);
    if (out_dir) snprintf(out_dir, cap, "%s", final_dir);
    return 0;
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
