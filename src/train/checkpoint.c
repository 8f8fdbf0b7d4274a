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

static int copy_file(const char *src, const char *dst, tdm_error *err) {
    size_t len;
    char *data = tdm_read_file(src, (size_t)64 << 20, &len, err);
    if (!data) return -1;
    int rc = tdm_write_file_atomic(dst, data, len, err);
    free(data);
    return rc;
}

static void state_json(tdm_strbuf *sb, const tdm_ckpt_state *s, const uint64_t *hashes, const int64_t *sizes,
                       const int *present) {
    tdm_sb_printf(sb, "{\n  \"format_version\": %d,\n", TDM_CKPT_FORMAT_VERSION);
    tdm_sb_printf(sb, "  \"iteration\": %lld,\n  \"consumed_samples\": %lld,\n", (long long)s->iteration,
                  (long long)s->consumed_samples);
    tdm_sb_printf(sb, "  \"scheduler\": {\"num_steps\": %lld, \"max_lr\": %.17g, \"min_lr\": %.17g, "
                      "\"decay_style\": ",
                  (long long)s->scheduler_num_steps, s->lr, s->min_lr);
    tdm_sb_json_string(sb, s->lr_decay_style, strlen(s->lr_decay_style));
    tdm_sb_printf(sb, ", \"warmup_init\": %.17g, \"warmup_steps\": %.17g, \"decay_steps\": %lld", s->lr_warmup_init,
                  s->lr_warmup_steps, (long long)s->lr_decay_steps);
    tdm_sb_printf(sb, "},\n  \"seed\": \"%" PRIu64 "\",\n  \"adam_step\": %lld,\n", s->seed, (long long)s->adam_step);
    tdm_sb_printf(sb, "  \"data_parallel_size\": %d,\n  \"distributed_optimizer\": %s,\n  \"has_optimizer\": %s,\n",
                  s->dp, s->distributed_optimizer ? "true" : "false", s->has_optimizer ? "true" : "false");
    tdm_sb_printf(sb, "  \"args_fingerprint\": \"%016" PRIx64 "\",\n  \"model_fingerprint\": \"%016" PRIx64 "\",\n",
                  s->args_fingerprint, s->model_fingerprint);
    tdm_sb_puts(sb, "  \"files\": {");
    int first = 1;
    for (int i = 0; i < N_CKPT_FILES; i++) {
        if (!present[i]) continue;
        tdm_sb_printf(sb, "%s\n    \"%s\": {\"bytes\": %lld, \"xxh3\": \"%016" PRIx64 "\"}", first ? "" : ",",
                      CKPT_FILES[i], (long long)sizes[i], hashes[i]);
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

    /* 1. weights, Hugging Face names, fp32 */
    snprintf(path, sizeof path, "%s/model.safetensors", tmp_dir);
    if (tdm_safetensors_save_params(path, t, TDM_ST_F32, meta, 2, err) != 0) goto fail;
    present[0] = 1;

    /* 2. Adam state in parameter shape */
    if (spec->exp_avg && spec->exp_avg_sq) {
        ents = tdm_xcalloc((size_t)t->n * 2, sizeof *ents);
        names = tdm_xcalloc((size_t)t->n * 2, sizeof *names);
        for (int i = 0; i < t->n; i++) {
            if (!spec->exp_avg[i]) continue;
            for (int k = 0; k < 2; k++) {
                size_t n = strlen(t->p[i].name) + 16;
                names[n_ent] = tdm_xmalloc(n);
                snprintf(names[n_ent], n, "%s.%s", k ? "exp_avg_sq" : "exp_avg", t->p[i].name);
                ents[n_ent].name = names[n_ent];
                ents[n_ent].ndim = t->p[i].ndim;
                ents[n_ent].shape = t->p[i].shape;
                ents[n_ent].data = k ? spec->exp_avg_sq[i] : spec->exp_avg[i];
                n_ent++;
            }
        }
        snprintf(path, sizeof path, "%s/optimizer.safetensors", tmp_dir);
        if (tdm_safetensors_write(path, ents, n_ent, TDM_ST_F32, meta, 2, err) != 0) goto fail;
        present[1] = 1;
    }

    /* 3. config.json */
    if (spec->config_json_path) {
        snprintf(path, sizeof path, "%s/config.json", tmp_dir);
        if (copy_file(spec->config_json_path, path, err) != 0) goto fail;
        present[2] = 1;
    }

    if (spec->preprocessor_json_path) { /* as a Hugging Face model folder has it */
        snprintf(path, sizeof path, "%s/preprocessor_config.json", tmp_dir);
        if (copy_file(spec->preprocessor_json_path, path, err) != 0) goto fail;
        present[3] = 1;
    }

    /* 4. trainer state, with the checksums of what was just written */
    for (int i = 0; i < N_CKPT_FILES; i++) {
        if (!present[i]) continue;
        snprintf(path, sizeof path, "%s/%s", tmp_dir, CKPT_FILES[i]);
        if (hash_file(path, &hashes[i], &sizes[i], err) != 0) goto fail;
    }
    tdm_ckpt_state s2 = *st;
    s2.has_optimizer = present[1];
    s2.model_fingerprint = tdm_ckpt_model_fingerprint(t);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    state_json(&sb, &s2, hashes, sizes, present);
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
    for (int i = 0; i < n_ent; i++) free(names[i]);
    free(names);
    free(ents);
    if (out_dir) snprintf(out_dir, cap, "%s", final_dir);
    return 0;

fail:
    remove_tree(tmp_dir);
fail_published:
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

static int parse_state(const char *file, const char *text, size_t len, tdm_ckpt_state *s, uint64_t *hashes,
                       int64_t *sizes, int *present, tdm_error *err) {
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

/* Resolves `load` into ck->dir and reads its trainer_state.json into ck->state and ck->state_hash. */
static int read_state(const char *load, tdm_ckpt *ck, uint64_t *hashes, int64_t *sizes, int *present,
                      tdm_error *err) {
    memset(ck, 0, sizeof *ck);
    if (tdm_ckpt_resolve(load, ck->dir, sizeof ck->dir, err) != 0) return -1;
    char path[PATH_CAP + 64];
    snprintf(path, sizeof path, "%s/trainer_state.json", ck->dir);
    size_t len;
    char *text = tdm_read_file(path, 1 << 20, &len, err);
    if (!text) return -1;
    int rc = parse_state(path, text, len, &ck->state, hashes, sizes, present, err);
    ck->state_hash = XXH3_64bits(text, len);
    free(text);
    return rc;
}

int tdm_ckpt_read_state(const char *load, tdm_ckpt *ck, tdm_error *err) {
    uint64_t hashes[N_CKPT_FILES];
    int64_t sizes[N_CKPT_FILES];
    int present[N_CKPT_FILES];
    return read_state(load, ck, hashes, sizes, present, err);
}

static int ckpt_open(const char *load, int with_optimizer, tdm_ckpt *ck, tdm_error *err) {
    uint64_t hashes[N_CKPT_FILES];
    int64_t sizes[N_CKPT_FILES];
    int present[N_CKPT_FILES];
    if (read_state(load, ck, hashes, sizes, present, err) != 0) return -1;
    char path[PATH_CAP + 64];
    for (int i = 0; i < N_CKPT_FILES; i++) {
        if (!present[i] || (i == 1 && !with_optimizer)) continue; /* [1]: optimizer.safetensors */
        snprintf(path, sizeof path, "%s/%s", ck->dir, CKPT_FILES[i]);
        uint64_t h;
        int64_t n;
        if (hash_file(path, &h, &n, err) != 0) return -1;
        if (n != sizes[i])
            return tdm_errorf(err, "%s: %lld bytes, trainer_state.json says %lld: the file is truncated or was replaced",
                              path, (long long)n, (long long)sizes[i]);
        if (h != hashes[i])
            return tdm_errorf(err, "%s: checksum %016" PRIx64 " does not match trainer_state.json's %016" PRIx64
                                   ": the file is corrupted",
                              path, h, hashes[i]);
    }
    if (ck->state.has_optimizer != present[1])
        return tdm_errorf(err, "%s/trainer_state.json: has_optimizer disagrees with the files listed", ck->dir);
    snprintf(path, sizeof path, "%s/model.safetensors", ck->dir);
    ck->model = tdm_safetensors_open(path, err);
    if (!ck->model) return -1;
    if (present[1] && with_optimizer) {
        snprintf(path, sizeof path, "%s/optimizer.safetensors", ck->dir);
        ck->optimizer = tdm_safetensors_open(path, err);
        if (!ck->optimizer) {
            tdm_safetensors_close(ck->model);
            ck->model = NULL;
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
    ck->model = ck->optimizer = NULL;
}

static void shape_str(int ndim, const int64_t *shape, char *out, size_t cap) {
    size_t o = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < ndim && o < cap; i++) o += (size_t)snprintf(out + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < cap) snprintf(out + o, cap - o, "]");
}

int tdm_ckpt_load_weights(tdm_ckpt *ck, tdm_param_table *t, tdm_error *err) {
    /* a friendly shape check first: name the first tensor that differs */
    for (int i = 0; i < t->n; i++) {
        const tdm_param *p = &t->p[i];
        const tdm_st_tensor *x = tdm_safetensors_find(ck->model, p->name);
        if (!x)
            return tdm_errorf(err, "--load %s: saved from another model: it has no tensor %s", ck->dir, p->name);
        int same = x->ndim == p->ndim;
        for (int k = 0; same && k < p->ndim; k++) same = x->shape[k] == p->shape[k];
        if (!same) {
            char a[128], b[128];
            shape_str(x->ndim, x->shape, a, sizeof a);
            shape_str(p->ndim, p->shape, b, sizeof b);
            return tdm_errorf(err, "--load %s: saved from another model shape: %s is %s there, %s in --model's config",
                              ck->dir, p->name, a, b);
        }
    }
    if (tdm_safetensors_count(ck->model) != t->n)
        return tdm_errorf(err, "--load %s: saved from another model: %d tensors there, %d in --model's config", ck->dir,
                          tdm_safetensors_count(ck->model), t->n);
    return tdm_safetensors_load_params(ck->model, t, TDM_ST_STRICT, NULL, err);
}

int tdm_ckpt_read_optimizer(tdm_ckpt *ck, const tdm_param_table *t, int i, float *m, float *v, tdm_error *err) {
    if (!ck->optimizer) return tdm_errorf(err, "--load %s: the checkpoint holds no optimizer state", ck->dir);
    char name[TDM_PARAM_NAME_MAX + 16];
    snprintf(name, sizeof name, "exp_avg.%s", t->p[i].name);
    if (tdm_safetensors_read_f32(ck->optimizer, name, m, t->p[i].numel, err) != 0) return -1;
    snprintf(name, sizeof name, "exp_avg_sq.%s", t->p[i].name);
    return tdm_safetensors_read_f32(ck->optimizer, name, v, t->p[i].numel, err);
}
