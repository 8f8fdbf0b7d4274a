/* checkpoint_state.c - trainer_state.json: written with the checksums of a checkpoint's files,
 * parsed and checked when it is loaded, and the tracker that names the latest (checkpoint.h). */
#include "train/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "train/args.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "train/checkpoint_internal.h"

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

/* ------------------------------------------------------------------ writing */

void tdm_ckpt__state_json(tdm_strbuf *sb, const tdm_ckpt_state *s, const uint64_t *hashes, const int64_t *sizes,
                          const int *present, uint64_t opt_block, const uint64_t *opt_blocks, int64_t n_opt_blocks) {
    tdm_sb_printf(sb, "{\n  \"format_version\": %d,\n", TDM_CKPT_FORMAT_VERSION);
    tdm_sb_printf(sb, "  \"iteration\": %lld,\n  \"consumed_samples\": %lld,\n", (long long)s->iteration,
                  (long long)s->consumed_samples);
    tdm_sb_printf(sb,
                  "  \"scheduler\": {\"num_steps\": %lld, \"max_lr\": %.17g, \"min_lr\": %.17g, "
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
    /* the values behind the fingerprint, so that a resume with other flags can name them */
    const char *nv = s->numeric_args[0] ? s->numeric_args : tdm_train_args_numeric_values(s->args_fingerprint);
    if (nv && strlen(nv) < sizeof s->numeric_args) {
        tdm_sb_puts(sb, "  \"numeric_args\": ");
        tdm_sb_json_string(sb, nv, strlen(nv));
        tdm_sb_puts(sb, ",\n");
    }
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
    return tdm_errorf(err,
                      "%s: iteration %lld, but its folder %.*s is named for iteration %lld (a state copied "
                      "from another checkpoint, or a renamed folder?)",
                      file, (long long)iteration, (int)len, base, named);
}

/* ------------------------------------------------------------------ reading */

int tdm_ckpt_resolve(const char *load, char *iter_dir, size_t cap, tdm_error *err) {
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/trainer_state.json", load);
    if (tdm_file_exists(path)) {
        snprintf(iter_dir, cap, "%s", load);
        return 0;
    }
    struct stat stt;
    if (stat(load, &stt) != 0 || !S_ISDIR(stt.st_mode)) return tdm_errorf(err, "--load %s: not a directory", load);
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
    if (tdm_json_get(r, "numeric_args")) { /* absent in checkpoints written before it was saved */
        const char *nv = tdm_json_get_str(r, "numeric_args", err);
        if (!nv) goto bad;
        if (strlen(nv) < sizeof s->numeric_args) snprintf(s->numeric_args, sizeof s->numeric_args, "%s", nv);
    }
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
    const struct {
        const char *key;
        int64_t v, min;
    } counts[] = {{"iteration", s->iteration, 0},
                  {"consumed_samples", s->consumed_samples, 0},
                  {"scheduler.num_steps", s->scheduler_num_steps, 0},
                  {"adam_step", s->adam_step, 0},
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

int tdm_ckpt__read_state(const char *load, tdm_ckpt *ck, uint64_t *hashes, int64_t *sizes, int *present, block_sums *ob,
                         tdm_error *err) {
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
    return tdm_ckpt__read_state(load, ck, hashes, sizes, present, NULL, err);
}
