/* setup.c - the start of a training run: model, data, the data-parallel layer, weights, schedule,
 * outputs, and the ranks' agreement that they start alike (trainer_internal.h). */
#include "train/trainer_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "distributed/agree.h"
#include "distributed/ddp.h"
#include "kernels/kernels.h"
#include "model/inspect.h"
#include "model/qwen3vl.h"
#include "model/safetensors.h"
#include "prof/profiler.h"
#include "train/checkpoint.h"
#include "train/feed.h"
#include "train/log.h"
#include "train/scheduler.h"
#include "train/tensorboard.h"

/* ------------------------------------------------------------------ model and data-parallel layer */

static int build_model(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    if (tdm_model_config_load(a->model, &t->cfg, err) != 0) return -1;
    snprintf(t->config_json, sizeof t->config_json, "%s", t->cfg.path);
    tdm_freeze fz = {.vision = a->freeze_vision,
                     .projector = a->freeze_projector,
                     .llm = a->freeze_llm,
                     .lm_head = a->freeze_lm_head};
    t->model = tdm_model_create(&t->cfg, &fz, err);
    if (!t->model) return tdm_error_prefix(err, "--model %s", a->model);
    if (a->freeze_lm_head && !a->freeze_llm && t->cfg.tie_word_embeddings && t->rank == 0)
        tdm_log_warn("--freeze-lm-head: %s ties lm_head to embed_tokens (tie_word_embeddings), so it trains with the "
                     "language model; freeze both with --freeze-llm",
                     t->cfg.path);
    /* --vision-lr-mult: the tower trained from scratch beside a language model learns the
     * shapes' colours only with a smaller step (docs/learning.md) */
    tdm_param_table *pt = tdm_model_params(t->model);
    for (int i = 0; i < pt->n; i++) {
        int c = tdm_component_of(pt->p[i].name);
        if (c >= 0 && tdm_component_group((tdm_component)c) == TDM_GROUP_VISION)
            pt->p[i].lr_mult = (float)a->vision_lr_mult;
    }
    return 0;
}

static int build_ddp(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tdm_ddp_config dc;
    tdm_ddp_config_default(&dc);
    dc.use_distributed_optimizer = a->use_distributed_optimizer;
    dc.bf16_params = a->bf16;
    dc.bf16_storage = a->bf16; /* 2 bytes per weight; the model widens a layer at a time */
    dc.overlap_grad_reduce = a->overlap_grad_reduce;
    dc.overlap_param_gather = a->overlap_param_gather;
    dc.check_for_nan_in_grad = a->check_for_nan_in_grad;
    dc.bucket_size = a->ddp_bucket_size;
    dc.num_buckets = a->ddp_num_buckets;
    if (tdm_ddp_progress_parse(a->comm_progress, &dc.progress, err) != 0) return -1;
    dc.comm_thread_nice = a->comm_thread_nice;
    dc.timeout_minutes = a->distributed_timeout_minutes;
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    tdm_strbuf note;
    tdm_sb_init(&note);
    dc.progress = tdm_ddp_progress_for_thread_level(provided, dc.progress, &note);
    if (note.len) tdm_log_info("%s", note.data);
    tdm_sb_free(&note);
    t->ddp = tdm_ddp_create(t->comm, tdm_model_params(t->model), &dc, err);
    if (!t->ddp) return -1;
    tdm_param_hooks h = tdm_ddp_hooks(t->ddp);
    tdm_model_set_hooks(t->model, &h);
    return 0;
}

/* Flags and model: rank-local, identical on every rank. */
static int setup(trainer *t, tdm_error *err) {
    if (tdm_train_args_validate(t->a, t->dp, err) != 0) return -1;
    /* a malformed tool config is an input error like a bad flag: said before anything else is set up
     * (its ranks and steps are checked against the job and the checkpoint later) */
    tdm_prof_config pc;
    if (t->a->profile_config[0] && tdm_prof_config_load(t->a->profile_config, &pc, err) != 0) return -1;
    return build_model(t, err);
}

/* --recompute-*: the model's recomputation, checked against its layers, and the words for
 * the activation log line. */
static int set_recompute(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tdm_recompute rc;
    if (tdm_recompute_from_flags(a->recompute_granularity, a->recompute_method, a->recompute_num_layers, &t->cfg, &rc,
                                 err) != 0)
        return -1;
    int k = rc.num_layers, kv = k < t->cfg.vision.depth ? k : t->cfg.vision.depth;
    t->recompute_note[0] = 0;
    if (!strcmp(a->recompute_granularity, "selective"))
        snprintf(t->recompute_note, sizeof t->recompute_note,
                 "; selective recomputation: the core attention keeps no [s, s] scores (flash attention), nothing "
                 "to recompute");
    else if (rc.method == TDM_RECOMPUTE_UNIFORM)
        snprintf(t->recompute_note, sizeof t->recompute_note,
                 "; recomputing every layer in groups of %d (decoder) and %d (vision blocks, when trained)", k, kv);
    else if (rc.method == TDM_RECOMPUTE_BLOCK)
        snprintf(t->recompute_note, sizeof t->recompute_note,
                 "; recomputing the first %d decoder layers and %d vision blocks (when trained)", k, kv);
    tdm_model_set_recompute(t->model, &rc);
    tdm_model_set_prune_last_layer(t->model, a->prune_last_layer);
    return 0;
}

/* ------------------------------------------------------------------ weights and schedule */

/* --pretrained / --hf-weights given a --save folder (a tracker, no weights of its own): say which
 * folder holds weights, or that resuming is --load's. */
static int refuse_save_folder(const char *flag, const char *src, tdm_error *err) {
    char path[4096], iter_dir[4096];
    snprintf(path, sizeof path, "%s/%s", src, TDM_CKPT_TRACKER);
    if (!tdm_file_exists(path)) return 0;
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    if (tdm_file_exists(path)) return 0;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", src);
    if (tdm_file_exists(path)) return 0;
    tdm_error rerr;
    if (tdm_ckpt_resolve(src, iter_dir, sizeof iter_dir, &rerr) != 0)
        snprintf(iter_dir, sizeof iter_dir, "%s/iter_NNNNNNN", src);
    return tdm_errorf(err,
                      "%s %s: a tandem --save folder, not weights; give one of its checkpoints (the latest is %s), "
                      "or --load %s to resume it (with --finetune to start at iteration 0)",
                      flag, src, iter_dir, src);
}

/* Megatron-style lines on rank 0 saying what initial weights were loaded. */
static void log_pretrained(const char *flag, const char *src, tdm_safetensors *st, const tdm_param_table *pt,
                           const tdm_st_load_report *rep, int bf16) {
    int64_t nparams = 0;
    for (int i = 0; i < pt->n; i++) nparams += pt->p[i].numel;
    /* the files and stored dtypes of the tensors the table took */
    int shards = 0, seen[16] = {0};
    unsigned char used[TDM_ST_MAX_SHARDS] = {0};
    char dtypes[128] = "";
    for (int i = 0; i < pt->n; i++) {
        const tdm_st_tensor *x = tdm_safetensors_find(st, pt->p[i].name);
        if (!x) continue; /* lm_head tied to the embedding */
        if (x->shard >= 0 && x->shard < TDM_ST_MAX_SHARDS && !used[x->shard]++) shards++;
        if ((int)x->dtype < 16 && !seen[x->dtype]) {
            seen[x->dtype] = 1;
            size_t l = strlen(dtypes);
            snprintf(dtypes + l, sizeof dtypes - l, "%s%s", l ? "+" : "", tdm_st_dtype_name(x->dtype));
        }
    }
    char trainer_state[4096];
    snprintf(trainer_state, sizeof trainer_state, "%s/trainer_state.json", src);
    const char *format =
        tdm_file_exists(trainer_state) ? "tandem checkpoint, weights only" : "Hugging Face safetensors";
    tdm_log_info("%s: loaded %s (%s, %d file%s): %d tensors, %lld parameters, stored %s, held in %s", flag, src, format,
                 shards, shards == 1 ? "" : "s", rep->n_loaded, (long long)nparams, dtypes[0] ? dtypes : "-",
                 bf16 ? "bfloat16" : "fp32");
    if (rep->lm_head_from_embedding || rep->n_extra) {
        char extra[256] = "";
        if (rep->n_extra)
            snprintf(extra, sizeof extra, "%d tensors of the file ignored, the model has no use for them (first: %s)",
                     rep->n_extra, rep->first_extra);
        tdm_log_info("%s: %s%s%s", flag,
                     rep->lm_head_from_embedding
                         ? "lm_head.weight missing, tied to model.language_model.embed_tokens.weight"
                         : "",
                     rep->lm_head_from_embedding && rep->n_extra ? "; " : "", extra);
    }
}

/* Initial weights: a checkpoint (--load), Hugging Face weights, or the seed. */
static int init_weights(trainer *t, tdm_ckpt *ck, int have_ck, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tdm_param_table *pt = tdm_model_params(t->model);
    if (have_ck) return tdm_ckpt_load_weights(ck, pt, err);
    if (a->pretrained[0] || a->hf_weights[0]) {
        const char *flag = a->pretrained[0] ? "--pretrained" : "--hf-weights";
        const char *src = a->pretrained[0] ? a->pretrained : a->hf_weights;
        if (refuse_save_folder(flag, src, err) != 0) return -1;
        tdm_safetensors *st = tdm_safetensors_open(src, err);
        if (!st) return -1;
        tdm_st_load_report rep;
        int rc = tdm_safetensors_load_params(st, pt, t->cfg.tie_word_embeddings ? TDM_ST_TIED_LM_HEAD : 0, &rep, err);
        if (rc == 0) log_pretrained(flag, src, st, pt, &rep, a->bf16);
        tdm_safetensors_close(st);
        return rc;
    }
    tdm_model_init_weights(t->model, a->seed);
    return 0;
}

/* The learning-rate and weight-decay schedule of the flags. */
static int schedule_from_flags(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tdm_lr_style style;
    if (tdm_lr_style_parse(a->lr_decay_style, &style) != 0)
        return tdm_errorf(err, "--lr-decay-style %s: unknown", a->lr_decay_style);
    /* the scheduler counts samples: sample-based flags are spans of one "iteration" of one sample */
    int by_samples = a->train_samples > 0;
    if (tdm_lr_scheduler_init(&t->sched, a->lr, a->min_lr, a->lr_warmup_init, style,
                              by_samples ? a->lr_warmup_samples : a->lr_warmup_iters, a->lr_warmup_fraction,
                              by_samples ? a->lr_decay_samples : a->lr_decay_iters,
                              by_samples ? a->train_samples : a->train_iters, by_samples ? 1 : a->global_batch_size,
                              err) != 0)
        return -1;
    if (style == TDM_LR_WSD) {
        tdm_wsd_style ws = TDM_WSD_EXPONENTIAL;
        tdm_wsd_style_parse(a->lr_wsd_decay_style, &ws); /* a choice flag: one of the four */
        if (tdm_lr_scheduler_set_wsd(&t->sched, ws, by_samples ? a->lr_wsd_decay_samples : a->lr_wsd_decay_iters,
                                     by_samples ? 1 : a->global_batch_size, err) != 0)
            return -1;
    }
    /* Megatron's weight-decay increment spans the whole run: train_iters x global batch, or train_samples */
    tdm_wd_style wds = TDM_WD_CONSTANT;
    tdm_wd_style_parse(a->weight_decay_incr_style, &wds);
    const int wd_const = wds == TDM_WD_CONSTANT;
    if (tdm_lr_scheduler_set_wd(&t->sched, wds, wd_const ? a->weight_decay : a->start_weight_decay,
                                wd_const ? a->weight_decay : a->end_weight_decay,
                                by_samples ? a->train_samples : a->train_iters * a->global_batch_size, err) != 0)
        return -1;
    return 0;
}

/* Weights (checkpoint, Hugging Face or seed), optimizer state and position of a resumed
 * run, the LR schedule and AdamW's hyper-parameters. */
static int setup_state(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tdm_ckpt ck;
    int have_ck = 0;
    if (tdm_train__open_checkpoint(t, &ck, &have_ck, err) != 0) return -1;
    tdm_ckpt_state ck_state; /* kept past tdm_ckpt_close, for the schedule */
    if (have_ck) ck_state = ck.state;
    int rc = have_ck && !a->finetune ? tdm_train__check_consumed(t, &ck, err) : 0;
    if (rc == 0) rc = init_weights(t, &ck, have_ck, err);
    if (rc == 0) tdm_ddp_params_loaded(t->ddp); /* --bf16: weights rounded, main parameters taken from them */
    if (have_ck) {
        t->ck_iteration = ck.state.iteration;
        t->ck_hash = ck.state_hash;
    }
    if (rc == 0 && have_ck && !a->finetune) {
        rc = tdm_train__resume_position(t, &ck, err);
    } else if (rc == 0 && have_ck) {
        tdm_log_info("loaded weights of %s (--finetune: starting at iteration 0)", ck.dir);
    }
    if (have_ck && !t->has_pending) tdm_ckpt_close(&ck); /* else t->pending owns it */
    if (rc != 0) return -1;
    if (t->iteration >= a->train_iters && a->train_iters > 0 && t->iteration > 0)
        tdm_log_info("the checkpoint is at iteration %lld, not before --train-iters %lld: nothing to train",
                     (long long)t->iteration, (long long)a->train_iters);
    if (schedule_from_flags(t, err) != 0) return -1;
    if (a->use_checkpoint_opt_param_scheduler && have_ck && /* validate: with --load, not --finetune */
        tdm_train__schedule_from_checkpoint(t, &ck_state, ck.dir, err) != 0)
        return -1;
    /* the schedule is a function of samples consumed: resuming restores it exactly */
    t->sched.num_steps = t->consumed;
    t->adamw.beta1 = (float)a->adam_beta1;
    t->adamw.beta2 = (float)a->adam_beta2;
    t->adamw.eps = (float)a->adam_eps;
    t->adamw.weight_decay = (float)tdm_lr_scheduler_wd(&t->sched);
    t->adamw.clip_grad = (float)a->clip_grad;
    return 0;
}

/* The activations reserved for the largest micro-batch of either data set, and the recomputation. */
static int reserve_activations(trainer *t, tdm_error *err) {
    tdm_model_limits lim;
    tdm_feed_limits(t->feed, &lim);
    if (t->valid_feed) { /* the activations must fit both sets' largest micro-batch */
        tdm_model_limits v;
        tdm_feed_limits(t->valid_feed, &v);
        if (v.max_tokens > lim.max_tokens) lim.max_tokens = v.max_tokens;
        if (v.max_seqs > lim.max_seqs) lim.max_seqs = v.max_seqs;
        if (v.max_patches > lim.max_patches) lim.max_patches = v.max_patches;
        if (v.max_images > lim.max_images) lim.max_images = v.max_images;
    }
    int ok = set_recompute(t, err) == 0 && tdm_model_reserve(t->model, &lim, err) == 0;
    if (ok && t->rank == 0)
        tdm_log_info("activations: %.1f MiB per rank for micro-batches of up to %d tokens and %d patches%s",
                     (double)tdm_model_activation_bytes(t->model) / (1024.0 * 1024.0), lim.max_tokens, lim.max_patches,
                     t->recompute_note);
    if (ok && t->rank == 0 && tdm_model_wide_bytes(t->model) > 0)
        tdm_log_info("bfloat16 weights: widened a layer at a time into a %.2f MiB fp32 scratch",
                     (double)tdm_model_wide_bytes(t->model) / (1024.0 * 1024.0));
    char note[256];
    if (ok && t->rank == 0 && tdm_blas_core_note(note, sizeof note)) tdm_log_info("%s", note);
    return ok ? 0 : -1;
}

/* metrics.jsonl's run header: {"run":{"start":UTC time,"command":[this process's argv],"ranks":N}}
 * (user-guide.md). */
static void run_header(const trainer *t, tdm_strbuf *sb) {
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    tdm_sb_printf(sb, "{\"run\":{\"start\":\"%s\",\"command\":[", stamp);
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (f) {
        char buf[8192];
        size_t n = fread(buf, 1, sizeof buf, f), i = 0;
        fclose(f);
        for (int k = 0; i < n; k++) {
            size_t len = strnlen(buf + i, n - i);
            if (k) tdm_sb_putc(sb, ',');
            tdm_sb_json_string(sb, buf + i, len);
            i += len + 1;
        }
    }
    tdm_sb_printf(sb, "],\"ranks\":%d}}", t->dp);
}

/* Rank 0: metrics.jsonl, the TensorBoard events, valid.jsonl, and a --save folder that can be written. */
static int open_outputs(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    int ok = 1;
    if (ok && a->run_dir[0] && t->rank == 0) {
        tdm_strbuf hdr;
        tdm_sb_init(&hdr);
        run_header(t, &hdr);
        /* a fresh run starts a new series; a resumed one (--load) continues its run's */
        ok = (t->metrics = tdm_metrics_open(a->run_dir, a->load[0] ? NULL : hdr.data, err)) != NULL;
        tdm_sb_free(&hdr);
    }
    if (ok && a->tensorboard_dir[0] && t->rank == 0) {
        ok = (t->tb = tdm_tb_open(a->tensorboard_dir, err)) != NULL;
        if (ok) tdm_log_info("TensorBoard events: %s", tdm_tb_path(t->tb));
        else tdm_error_prefix(err, "--tensorboard-dir");
    }
    if (ok && t->valid_feed && a->run_dir[0] && t->rank == 0) {
        char path[TDM_ARGS_PATH_MAX + 32];
        snprintf(path, sizeof path, "%.1023s/valid.jsonl", a->run_dir);
        if (!(t->valid_log = fopen(path, "a"))) ok = tdm_errorf(err, "%s: cannot open for appending", path) == 0;
    }
    /* the checkpoint folder must be creatable and writable now, not only when the first save
     * comes (after hours) */
    if (ok && a->save[0] && t->rank == 0 && tdm_ckpt_check_save_dir(a->save, err) != 0) ok = 0;
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------ the ranks start alike */

/* Data parallelism needs one configuration: ranks started with other flags (`mpirun -np 1
 * tandem train A : -np 1 tandem train B`) would each step with their own learning rate, or
 * post other collectives and hang. Collective: a hash of each flag's value, compared by the
 * minimum and maximum over ranks; rank 0 names the first flag that differs. */
static int same_flags_everywhere(trainer *t, tdm_error *err) {
    int n = tdm_train_args_count();
    uint64_t *h = tdm_xcalloc((size_t)n + 1, sizeof *h);
    char value[8192];
    for (int i = 0; i < n; i++) {
        tdm_train_args_value(t->a, i, value, sizeof value);
        h[i] = XXH3_64bits(value, strlen(value));
    }
    int first = tdm_first_differing_hash(h, n, t->comm, t->timeout_ns, "flags agreement");
    free(h);
    if (first < 0) return 0;
    t->res->all_ranks_failed = 1;
    t->res->failed_rank = 0;
    tdm_train_args_value(t->a, first, value, sizeof value);
    return tdm_errorf(err,
                      "the ranks were started with different flags: %s differs between ranks (%s on rank 0); "
                      "every data-parallel rank needs the same command line",
                      tdm_train_args_name(first), t->rank == 0 ? value : "see rank 0");
}

/* Every rank must start from the same weights: --pretrained / --hf-weights files that differ
 * between nodes (a stale copy on one of them) would train a different model on each rank,
 * silently: the gradients are averaged as if they were one. Collective: each rank's checksum of
 * every parameter against rank 0's (one pass over the weights at start-up). */
static int same_weights_everywhere(trainer *t, tdm_error *err) {
    const uint64_t mine = tdm_train__params_checksum(t->model);
    uint64_t root = mine;
    tdm_bcast_bounded(&root, 1, MPI_UINT64_T, 0, t->comm, t->timeout_ns, "initial-weights agreement");
    int first = tdm_first_failed_rank_bounded(root == mine, t->comm, NULL, t->timeout_ns, "initial-weights agreement");
    if (first == t->dp) return 0;
    t->res->all_ranks_failed = 1;
    t->res->failed_rank = 0;
    const char *from = t->a->load[0] && !t->a->finetune ? "--load"
                       : t->a->pretrained[0]            ? "--pretrained"
                       : t->a->hf_weights[0]            ? "--hf-weights"
                       : t->a->load[0]                  ? "--load"
                                                        : "--seed";
    return tdm_errorf(err,
                      "the initial weights differ between ranks: rank %d's are not rank 0's (rank 0's checksum "
                      "%016llx); "
                      "every rank must read the same %s files (copies on each node must be identical)",
                      first, (unsigned long long)root, from);
}

/* ------------------------------------------------------------------ the --save folder */

/* 1 when --load names the --save folder or one iter_XXXXXXX of it. */
static int load_is_in_save_dir(const tdm_train_args *a) {
    if (!a->load[0]) return 0;
    char s[PATH_MAX], l[PATH_MAX];
    if (!realpath(a->save, s) || !realpath(a->load, l)) return 0;
    if (!strcmp(s, l)) return 1;
    char *slash = strrchr(l, '/');
    if (!slash || strncmp(slash + 1, "iter_", 5) != 0) return 0;
    *slash = 0;
    return !strcmp(s, l[0] ? l : "/");
}

/* Rank 0's part: the lock, then the checkpoints already there. */
static int claim_save_dir_rank0(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    if (tdm_ckpt_lock_save_dir(a->save, &t->save_lock, err) != 0) return -1;
    if (a->overwrite_save || load_is_in_save_dir(a) || !tdm_ckpt_dir_has_checkpoints(a->save)) return 0;
    if (a->load[0])
        return tdm_errorf(err,
                          "--save %s already holds checkpoints and this run loads --load %s: its saves would replace "
                          "them; save elsewhere, or add --overwrite-save to replace them",
                          a->save, a->load);
    return tdm_errorf(err,
                      "--save %s already holds checkpoints and this run starts afresh: resume them with --load %s, "
                      "save elsewhere, or add --overwrite-save to replace them",
                      a->save, a->save);
}

int tdm_train__claim_save_dir(trainer *t, tdm_error *err) {
    if (!t->a->save[0]) return 0;
    char msg[sizeof err->msg];
    int ok = 1;
    if (t->rank == 0) {
        ok = claim_save_dir_rank0(t, err) == 0;
        snprintf(msg, sizeof msg, "%s", ok ? "" : err->msg);
    }
    tdm_bcast_bounded(&ok, 1, MPI_INT, 0, t->comm, t->timeout_ns, "--save folder check");
    if (ok) return 0;
    /* every rank fails with rank 0's sentence (printed once, by rank 0) */
    tdm_bcast_bounded(msg, (int)sizeof msg, MPI_CHAR, 0, t->comm, t->timeout_ns, "--save folder check");
    t->res->all_ranks_failed = 1;
    t->res->failed_rank = 0;
    t->res->failed_alone = 0;
    return tdm_errorf(err, "%s", msg);
}

/* ------------------------------------------------------------------ the steps of tdm_train_run */

int tdm_train__agree_on_flags(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    if (same_flags_everywhere(t, err) != 0) return -1;
    /* --exit-duration-in-mins counts from the earliest start of any rank, as Megatron's (a MIN all-reduce of
     * start times): here the longest time any rank has run, since the machines' clocks need not agree */
    if (a->exit_duration_in_mins > 0) {
        uint64_t longest = tdm_now_ns() - t->start_ns;
        tdm_allreduce_bounded(&longest, 1, MPI_UINT64_T, MPI_MAX, t->comm, t->timeout_ns, "start-time agreement");
        t->start_ns = tdm_now_ns() - longest;
    }
    return 0;
}

int tdm_train__setup_data(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    int ok = setup(t, err) == 0;
    struct stat st;
    if (ok && a->exit_signal_file[0] && stat(a->exit_signal_file, &st) == 0) {
        tdm_errorf(err, "--exit-signal-file %s already exists: remove it (the run would stop after its first step)",
                   a->exit_signal_file);
        ok = 0;
    }
    if (ok) {
        tdm_feed_options fo = {.args = a, .dp_rank = t->rank, .dp_size = t->dp, .config = &t->cfg};
        t->feed = tdm_feed_create(&fo, err);
        ok = t->feed != NULL;
        if (ok && a->n_valid_data > 0 && a->eval_iters > 0) {
            t->valid_args = *a;
            memcpy(t->valid_args.data, a->valid_data, sizeof a->valid_data);
            t->valid_args.n_data = a->n_valid_data;
            fo.args = &t->valid_args;
            fo.flag = "--valid-data-path";
            fo.like = t->feed;
            t->valid_feed = tdm_feed_create(&fo, err);
            ok = t->valid_feed != NULL;
        }
    }
    if (tdm_train__agree(t, ok, err) != 0) return -1;
    tdm_log_info("%s", tdm_feed_summary(t->feed));
    if (t->valid_feed)
        tdm_log_info("validation %s; %lld global batches every %lld iterations", tdm_feed_summary(t->valid_feed),
                     (long long)a->eval_iters, (long long)a->eval_interval);
    t->micro_per_step = a->global_batch_size / (a->micro_batch_size * t->dp);
    return 0;
}

int tdm_train__setup_state(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    int ok = build_ddp(t, err) == 0;
    if (tdm_train__agree(t, ok, err) != 0) return -1;
    ok = setup_state(t, err) == 0;
    if (ok) ok = reserve_activations(t, err) == 0;
    if (ok) ok = open_outputs(t, err) == 0;
    if (ok) ok = tdm_feed_start(t->feed, t->consumed, err) == 0;
    /* where evaluations at every --eval-interval so far left the validation loader (Megatron's
     * consumed_valid_samples on resume) */
    if (ok && t->valid_feed)
        ok = tdm_feed_start(t->valid_feed, t->iteration / a->eval_interval * a->eval_iters * a->global_batch_size,
                            err) == 0;
    return tdm_train__agree(t, ok, err);
}

int tdm_train__agree_on_start(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    if (a->load[0] && tdm_train__same_checkpoint_everywhere(t, err) != 0) return -1;
    if (a->load[0] && tdm_train__agree(t, tdm_train__verify_optimizer_load(t, err) == 0, err) != 0) return -1;
    if (same_weights_everywhere(t, err) != 0) return -1;
    if (a->inject_nan_iter > 0 && (a->inject_nan_rank < 0 || a->inject_nan_rank == t->rank))
        tdm_ddp_inject_nan(t->ddp, t->rank, a->inject_nan_iter, -1);
    tdm_ddp_set_iteration(t->ddp, t->iteration + 1);

    tdm_train_result *res = t->res;
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    /* what the transport costs, measured now (a few tens of ms): the log says it, and the first iteration
     * line weighs the step's communication against it (logging.c) */
    tdm_mpi_info_get(t->comm, &t->mpi);
    memset(&t->probe, 0, sizeof t->probe);
    if (t->dp > 1 && tdm_probe_collectives(t->comm, 4.0, 3, t->timeout_ns, &t->probe, err) != 0) {
        tdm_sb_free(&sb);
        return -1;
    }
    tdm_probe_format_line(&t->mpi, &t->probe, t->dp, &sb);
    tdm_log_info("%s", sb.data);
    snprintf(res->transport_line, sizeof res->transport_line, "%s", sb.data);
    tdm_sb_clear(&sb);
    tdm_ddp_describe(t->ddp, &sb);
    if (sb.len && sb.data[sb.len - 1] == '\n') sb.data[--sb.len] = 0;
    tdm_log_info("%s", sb.data);
    const char *nl = strchr(sb.data, '\n');
    snprintf(res->ddp_config_line, sizeof res->ddp_config_line, "%.*s", (int)(nl ? (size_t)(nl - sb.data) : sb.len),
             sb.data);
    tdm_sb_free(&sb);
    res->n_buckets = tdm_ddp_get_layout(t->ddp)->n_buckets;
    res->n_params_trainable = tdm_param_table_numel(tdm_model_params(t->model), 1);
    res->first_iteration = t->iteration;
    return 0;
}

int tdm_train__start_profiler(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    if (!a->profile_config[0]) return 0;
    tdm_prof_config pc;
    int ok = tdm_prof_config_load(a->profile_config, &pc, err) == 0;
    /* a tool config that would record nothing is an error, not an empty trace found later */
    for (int i = 0; ok && pc.enable && !pc.all_ranks && i < pc.n_ranks; i++)
        if (pc.ranks[i] >= t->dp)
            ok = tdm_errorf(err, "%s: profile.ranks: rank %d does not exist (%d ranks)", a->profile_config, pc.ranks[i],
                            t->dp) == 0;
    if (ok && pc.enable && (pc.end_step <= t->iteration || pc.start_step > a->train_iters))
        ok = tdm_errorf(err,
                        "%s: profile steps %lld-%lld lie outside this run's iterations %lld-%lld: nothing "
                        "would be recorded",
                        a->profile_config, (long long)pc.start_step, (long long)pc.end_step,
                        (long long)t->iteration + 1, (long long)a->train_iters) == 0;
    if (ok && pc.enable)
        tdm_log_info("profiler: level %d, steps %lld-%lld, %s ranks, into %s", pc.level, (long long)pc.start_step,
                     (long long)pc.end_step, pc.all_ranks ? "all" : "the listed", pc.save_path);
    if (tdm_train__agree(t, ok, err) != 0) return -1;
    snprintf(pc.transport, sizeof pc.transport, "%s", t->mpi.transport);
    pc.shared_memory = t->mpi.shared_memory;
    snprintf(pc.comm_progress, sizeof pc.comm_progress, "%s", a->comm_progress);
    pc.comm_thread_nice = a->comm_thread_nice;
    ok = tdm_prof_session_start(&pc, t->comm, err) == 0;
    if (tdm_train__agree(t, ok, err) != 0) return -1;
    t->profiling = 1;
    return 0;
}
