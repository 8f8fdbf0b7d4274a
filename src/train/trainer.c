/* trainer.c - the training loop (see trainer.h for the step, in order). */
#include "train/trainer.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "data/image.h"
#include "distributed/comm.h"
#include "distributed/ddp.h"
#include "distributed/optimizer.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/inspect.h"
#include "model/qwen3vl.h"
#include "model/safetensors.h"
#include "prof/profiler.h"
#include "train/checkpoint.h"
#include "train/feed.h"
#include "train/log.h"
#include "train/scheduler.h"
#include "train/tensorboard.h"

/* ------------------------------------------------------------------ signals */

static volatile sig_atomic_t g_stop_requested;

static void on_signal(int sig) {
    if (g_stop_requested) {
        /* a second Ctrl-C / SIGTERM: the user does not want to wait for the step */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_stop_requested = 1; /* only a flag: the loop agrees on it at the end of the step */
}

void tdm_train_install_signal_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    tdm_image_set_stop_flag(&g_stop_requested); /* a picture being decoded does not hold the stop up */
}

void tdm_train_request_stop(void) { g_stop_requested = 1; }

void tdm_train_result_free(tdm_train_result *res) {
    free(res->records);
    res->records = NULL;
    res->n_steps = 0;
}

/* ------------------------------------------------------------------ state */

typedef struct trainer {
    const tdm_train_args *a;
    MPI_Comm comm; /* our own duplicate: setup agreement, fingerprints, checkpoint gather */
    int rank, dp;
    tdm_model_config cfg;
    char config_json[TDM_ARGS_PATH_MAX + 32];
    tdm_model *model;
    tdm_ddp *ddp;
    tdm_feed *feed;
    tdm_train_args valid_args; /* the flags with --data = --valid-data-path */
    tdm_feed *valid_feed;      /* NULL: no validation */
    FILE *valid_log;           /* rank 0: <run-dir>/valid.jsonl */
    tdm_lr_scheduler sched;
    tdm_adamw_config adamw;
    tdm_metrics_writer *metrics;
    tdm_tb_writer *tb;         /* rank 0 with --tensorboard-dir */
    int profiling;
    int64_t iteration;        /* completed iterations */
    int64_t consumed;         /* samples consumed */
    int64_t ck_iteration;     /* iteration of the checkpoint --load read, -1: none */
    uint64_t ck_hash;         /* its trainer_state.json's XXH3 (0: none) */
    int micro_per_step;
    tdm_train_result *res;
    int cap_records;
    char recompute_note[160]; /* the activation log line's tail: what is recomputed */
    uint64_t start_ns;        /* when the earliest rank's process started: --exit-duration-in-mins counts from here */
    uint64_t timeout_ns;      /* --distributed-timeout-minutes, for the trainer's own collectives too (0: none) */
    int memory_reported;      /* the memory line follows the first iteration line only */
    tdm_ckpt pending;         /* the checkpoint whose Adam state was read but not yet vouched for */
    int has_pending;
} trainer;

static void push_record(trainer *t, const tdm_step_record *r) {
    tdm_train_result *res = t->res;
    if (res->n_steps == t->cap_records) {
        t->cap_records = t->cap_records ? 2 * t->cap_records : 64;
        res->records = tdm_xrealloc(res->records, sizeof *res->records * (size_t)t->cap_records);
    }
    res->records[res->n_steps++] = *r;
}

/* Every rank reports whether its part succeeded; afterwards all know the lowest failing
 * rank. Returns 0 when all succeeded, else -1 on every rank (err of non-failing ranks
 * says which rank failed). */
static int first_failed_within(int ok, MPI_Comm comm, int *n_failed, uint64_t timeout_ns, const char *what) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int first = ok ? size : rank, nf = !ok;
    MPI_Request r[2];
    MPI_Iallreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm, &r[0]);
    if (n_failed) MPI_Iallreduce(MPI_IN_PLACE, &nf, 1, MPI_INT, MPI_SUM, comm, &r[1]);
    tdm_wait_request_bounded(&r[0], timeout_ns, what);
    if (n_failed) {
        tdm_wait_request_bounded(&r[1], timeout_ns, what);
        *n_failed = nf;
    }
    return first;
}

int tdm_first_failed_rank(int ok, MPI_Comm comm, int *n_failed) {
    return first_failed_within(ok, comm, n_failed, 0, "agreement of the ranks");
}

/* The index of the first of n hashes whose value differs on some rank of comm (compared by their minimum
 * and maximum across ranks), -1 when all agree. Collective, bounded by timeout_ns. */
static int first_differing_hash(const uint64_t *h, int n, MPI_Comm comm, uint64_t timeout_ns, const char *what) {
    uint64_t *lo = tdm_xmalloc(sizeof *lo * ((size_t)n + 1)), *hi = tdm_xmalloc(sizeof *hi * ((size_t)n + 1));
    memcpy(lo, h, sizeof *lo * (size_t)n);
    memcpy(hi, h, sizeof *hi * (size_t)n);
    MPI_Request r[2];
    MPI_Iallreduce(MPI_IN_PLACE, lo, n, MPI_UINT64_T, MPI_MIN, comm, &r[0]);
    MPI_Iallreduce(MPI_IN_PLACE, hi, n, MPI_UINT64_T, MPI_MAX, comm, &r[1]);
    tdm_wait_request_bounded(&r[0], timeout_ns, what);
    tdm_wait_request_bounded(&r[1], timeout_ns, what);
    int first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (lo[i] != hi[i]) first = i;
    free(lo);
    free(hi);
    return first;
}

/* The trainer's own collectives on t->comm (agreements, checks, the fingerprint audit): nonblocking, and
 * waited for like the data-parallel ones, so that a rank stuck in set-up, validation or a check ends the job
 * after --distributed-timeout-minutes instead of hanging it. (Checkpoint saving and loading stay unbounded:
 * their waits are rank 0's I/O, which may take longer on slow disks.) */
static void t_allreduce(trainer *t, void *buf, int n, MPI_Datatype type, MPI_Op op, const char *what) {
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, buf, n, type, op, t->comm, &r);
    tdm_wait_request_bounded(&r, t->timeout_ns, what);
}

static void t_bcast(trainer *t, void *buf, int n, MPI_Datatype type, int root, const char *what) {
    MPI_Request r;
    MPI_Ibcast(buf, n, type, root, t->comm, &r);
    tdm_wait_request_bounded(&r, t->timeout_ns, what);
}

/* tdm_first_failed_rank, bounded */
static int first_failed(trainer *t, int ok, int *n_failed, const char *what) {
    return first_failed_within(ok, t->comm, n_failed, t->timeout_ns, what);
}

static int agree(trainer *t, int ok, tdm_error *err) {
    int n_failed;
    int first = first_failed(t, ok, &n_failed, "agreement of the ranks");
    if (first == t->dp) return 0;
    t->res->all_ranks_failed = 1;
    t->res->failed_rank = first;
    t->res->failed_alone = n_failed < t->dp;
    if (ok) tdm_errorf(err, "rank %d failed (its message is printed there)", first);
    return -1;
}

/* ------------------------------------------------------------------ set-up */

static int build_model(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    if (tdm_model_config_load(a->model, &t->cfg, err) != 0) return -1;
    snprintf(t->config_json, sizeof t->config_json, "%s", t->cfg.path);
    tdm_freeze fz = {.vision = a->freeze_vision, .projector = a->freeze_projector, .llm = a->freeze_llm,
                     .lm_head = a->freeze_lm_head};
    t->model = tdm_model_create(&t->cfg, &fz, err);
    if (!t->model) return tdm_error_prefix(err, "--model %s", a->model);
    if (a->freeze_lm_head && !a->freeze_llm && t->cfg.tie_word_embeddings && t->rank == 0)
        tdm_log_warn("--freeze-lm-head: %s ties lm_head to embed_tokens (tie_word_embeddings), so it trains with the "
                     "language model; freeze both with --freeze-llm", t->cfg.path);
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

/* Initial weights: a checkpoint (--load), Hugging Face weights, or the seed. */
static int init_weights(trainer *t, tdm_ckpt *ck, int have_ck, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tdm_param_table *pt = tdm_model_params(t->model);
    if (have_ck) return tdm_ckpt_load_weights(ck, pt, err);
    if (a->pretrained[0] || a->hf_weights[0]) {
        const char *src = a->pretrained[0] ? a->pretrained : a->hf_weights;
        tdm_safetensors *st = tdm_safetensors_open(src, err);
        if (!st) return -1;
        tdm_st_load_report rep;
        int rc = tdm_safetensors_load_params(st, pt, t->cfg.tie_word_embeddings ? TDM_ST_TIED_LM_HEAD : 0, &rep, err);
        tdm_safetensors_close(st);
        if (rc != 0) return -1;
        if (rep.n_extra) tdm_log_info("note: %s holds %d tensors the model does not use (first: %s)", src, rep.n_extra,
                                      rep.first_extra);
        return 0;
    }
    tdm_model_init_weights(t->model, a->seed);
    return 0;
}

static int cmp_piece(const void *a, const void *b) {
    const tdm_ddp_opt_piece *x = a, *y = b;
    if (x->param != y->param) return (x->param > y->param) - (x->param < y->param);
    return (x->param_offset > y->param_offset) - (x->param_offset < y->param_offset);
}

/* This rank's optimizer pieces (*np of them; the caller frees) in the checkpoint file's order:
 * by parameter, then offset. */
static tdm_ddp_opt_piece *pieces_in_file_order(trainer *t, int *np) {
    *np = tdm_ddp_opt_pieces(t->ddp, NULL, 0);
    tdm_ddp_opt_piece *pieces = tdm_xcalloc((size_t)(*np ? *np : 1), sizeof *pieces);
    tdm_ddp_opt_pieces(t->ddp, pieces, *np);
    qsort(pieces, (size_t)*np, sizeof *pieces, cmp_piece);
    return pieces;
}

/* This rank's shards of the Adam state, read straight from the checkpoint into the optimizer's
 * arrays: each piece it owns is a run of one parameter's elements. In a checkpoint with per-block
 * checksums only the blocks holding them are read; the values are vouched for later, once the
 * ranks have split the blocks nobody read between them (verify_optimizer_load). */
static int load_optimizer(trainer *t, tdm_ckpt *ck, tdm_error *err) {
    tdm_param_table *pt = tdm_model_params(t->model);
    int np;
    tdm_ddp_opt_piece *pieces = pieces_in_file_order(t, &np);
    float *m = tdm_ddp_opt_m(t->ddp), *v = tdm_ddp_opt_v(t->ddp), *w = tdm_ddp_opt_main(t->ddp);
    int rc = 0;
    for (int k = 0; k < np && rc == 0; k++) {
        const tdm_ddp_opt_piece *p = &pieces[k];
        rc = tdm_ckpt_read_optimizer_range(ck, pt, p->param, p->param_offset, p->count, m + p->state_offset,
                                           v + p->state_offset, err);
        if (rc == 0 && w) /* --bf16: the fp32 main parameters the bfloat16 weights were rounded from */
            rc = tdm_ckpt_read_main_params_range(ck, pt, p->param, p->param_offset, p->count, w + p->state_offset,
                                                 err);
        if (rc != 0) tdm_error_prefix(err, "--load %s", ck->dir); /* a parameter frozen at the save, or damage */
    }
    free(pieces);
    if (rc == 0) tdm_ddp_opt_set_step_count(t->ddp, ck->state.adam_step);
    return rc;
}

/* Collective, after the ranks agreed that they loaded the same checkpoint: every block of
 * optimizer.safetensors that no rank's shard read is verified by one rank (block j by rank
 * j mod dp), so that the whole file is checked once and each rank reads about 1/dp of it. An
 * older checkpoint, without block checksums, is verified whole on every rank. Rank 0 logs
 * what it read. */
static int verify_optimizer_load(trainer *t, tdm_error *err) {
    if (!t->has_pending) return 0;
    tdm_ckpt *ck = &t->pending;
    const unsigned char *verified;
    int64_t nb = tdm_ckpt_optimizer_blocks(ck, &verified);
    unsigned char *want = NULL;
    if (nb > 0) {
        want = tdm_xmalloc((size_t)nb);
        memcpy(want, verified, (size_t)nb);
        t_allreduce(t, want, (int)nb, MPI_UNSIGNED_CHAR, MPI_MAX, "checkpoint verification");
        for (int64_t j = 0; j < nb; j++) want[j] = !want[j] && j % t->dp == t->rank;
    }
    int rc = tdm_ckpt_finish_optimizer_part(ck, want, err);
    if (rc != 0) tdm_error_prefix(err, "--load %s", ck->dir);
    uint64_t got, size;
    tdm_ckpt_optimizer_io(ck, &got, &size);
    if (rc == 0 && t->rank == 0)
        tdm_log_info("optimizer state: rank 0 read %.1f of %.1f MiB of optimizer.safetensors (%s)", got / 1048576.0,
                     size / 1048576.0,
                     nb > 0 ? "its shard, and its share of the blocks no shard held, each checked against its checksum"
                            : "the whole file: a checkpoint without per-block checksums");
    free(want);
    tdm_ckpt_close(ck);
    t->has_pending = 0;
    return rc;
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

/* A note when a config the run reads is not the one the checkpoint was saved with: the same
 * tensor shapes load, but e.g. another rope_theta or image_mean changes every number after it.
 * saved_name: the checkpoint's copy (older checkpoints, and runs on built-in defaults, have
 * none: nothing to compare); now: the file in use, NULL for the built-in defaults. */
static void note_config_change(const char *ck_dir, const char *saved_name, const char *now, const char *what) {
    char path[4096 + 64], where[256] = "";
    snprintf(path, sizeof path, "%s/%s", ck_dir, saved_name);
    if (!tdm_file_exists(path)) return;
    if (!now) {
        tdm_log_info("note: resuming %s with the built-in %s, saved with its %s", ck_dir, what, saved_name);
        return;
    }
    size_t la = 0, lb = 0;
    char *ta = tdm_read_file(path, 1 << 24, &la, NULL), *tb = tdm_read_file(now, 1 << 24, &lb, NULL);
    tdm_json_doc *da = ta ? tdm_json_parse(ta, la, path, NULL) : NULL;
    tdm_json_doc *db = tb ? tdm_json_parse(tb, lb, now, NULL) : NULL;
    if (da && db && tdm_json_first_difference(tdm_json_root(da), tdm_json_root(db), where, sizeof where))
        tdm_log_info("note: resuming %s with a %s that differs from its %s (first at \"%s\"; %s)", ck_dir, what,
                     saved_name, where[0] ? where : "(root)", now);
    tdm_json_free(da);
    tdm_json_free(db);
    free(ta);
    free(tb);
}

/* Megatron's auto-restart idiom, `--save ck --load ck` on every launch of a job: on the first
 * launch there is nothing to load yet. Only when --load is the --save folder and holds no
 * tracker; any other --load without a checkpoint stays an error (a mistyped path must not
 * quietly train from scratch). */
static int first_launch_of_save_dir(const tdm_train_args *a) {
    if (!a->load[0] || !a->save[0]) return 0;
    char l[TDM_ARGS_PATH_MAX], s[TDM_ARGS_PATH_MAX];
    snprintf(l, sizeof l, "%s", a->load);
    snprintf(s, sizeof s, "%s", a->save);
    char *both[2] = {l, s};
    for (int k = 0; k < 2; k++) { /* "ck/" and "ck" are the same folder */
        size_t n = strlen(both[k]);
        while (n > 1 && both[k][n - 1] == '/') both[k][--n] = 0;
    }
    if (strcmp(l, s) != 0) return 0;
    char tracker[TDM_ARGS_PATH_MAX + 64];
    snprintf(tracker, sizeof tracker, "%s/latest_checkpointed_iteration.txt", l);
    return !tdm_file_exists(tracker);
}

/* Weights (checkpoint, Hugging Face or seed), optimizer state and position of a resumed
 * run, the LR schedule and AdamW's hyper-parameters. */
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

static int setup_state(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tdm_ckpt ck;
    int have_ck = 0;
    if (first_launch_of_save_dir(a)) {
        tdm_log_info("--load %s: no checkpoint there yet (it is also --save): starting from iteration 0", a->load);
    } else if (a->load[0]) {
        int weights_only = a->finetune || a->no_load_optim;
        if ((weights_only ? tdm_ckpt_open_weights : tdm_ckpt_open)(a->load, &ck, err) != 0) return -1;
        have_ck = 1;
    }
    tdm_ckpt_state ck_state; /* kept past tdm_ckpt_close, for the schedule */
    if (have_ck) ck_state = ck.state;
    int rc = 0;
    /* the sampler continues at global batch consumed / G: a resume with another global batch
     * size (also an unset one at another dp: micro x dp) must divide what was consumed */
    if (have_ck && !a->finetune && ck.state.consumed_samples % a->global_batch_size != 0) {
        const tdm_ckpt_state *s = &ck.state;
        char was[96] = "";
        if (s->iteration > 0 && s->consumed_samples % s->iteration == 0)
            snprintf(was, sizeof was, ", e.g. the saved run's %lld", (long long)(s->consumed_samples / s->iteration));
        rc = tdm_errorf(err, "--load %s: the checkpoint consumed %lld samples, not a multiple of the global batch "
                        "size %d (--global-batch-size; unset, --micro-batch-size x data-parallel size): resume with one "
                        "that divides %lld%s",
                        ck.dir, (long long)s->consumed_samples, a->global_batch_size, (long long)s->consumed_samples,
                        was);
    }
    if (rc == 0) rc = init_weights(t, &ck, have_ck, err);
    if (rc == 0) tdm_ddp_params_loaded(t->ddp); /* --bf16: weights rounded, main parameters taken from them */
    if (have_ck) {
        t->ck_iteration = ck.state.iteration;
        t->ck_hash = ck.state_hash;
    }
    if (rc == 0 && have_ck && !a->finetune) {
        t->iteration = ck.state.iteration;
        t->consumed = ck.state.consumed_samples;
        if (ck.state.args_fingerprint != tdm_train_args_fingerprint(a))
            tdm_log_info("note: resuming %s with flags that change the numerics (batch sizes, schedule, optimizer, "
                         "seed, data or freezing differ from the saved run)%s",
                         ck.dir, a->use_checkpoint_opt_param_scheduler
                                     ? "; the learning-rate schedule is the checkpoint's (--use-checkpoint-opt_param-"
                                       "scheduler)"
                                     : "");
        char pp_buf[2200];
        if (tdm_file_exists(t->cfg.path)) note_config_change(ck.dir, "config.json", t->cfg.path, "model config");
        note_config_change(ck.dir, "preprocessor_config.json",
                           tdm_feed_preprocessor_path(a->preprocessor, a->model, pp_buf, sizeof pp_buf),
                           "preprocessor config");
        if (!a->no_load_optim) {
            if (!ck.state.has_optimizer) {
                rc = tdm_errorf(err, "--load %s: the checkpoint holds no optimizer state (add --no-load-optim)", ck.dir);
            } else if (ck.state.params_bf16 != a->bf16) {
                rc = tdm_errorf(err, "--load %s: the checkpoint was trained with %s parameters and this run has %s "
                                "ones: resume it %s --bf16, or load its weights alone with --no-load-optim",
                                ck.dir, ck.state.params_bf16 ? "bfloat16" : "float32", a->bf16 ? "bfloat16" : "float32",
                                ck.state.params_bf16 ? "with" : "without");
            } else if ((rc = load_optimizer(t, &ck, err)) == 0) {
                t->pending = ck; /* verified once every rank got here (verify_optimizer_load) */
                t->has_pending = 1;
            }
        }
        if (rc == 0) tdm_log_info("loaded checkpoint %s at iteration %lld (consumed samples %lld)", ck.dir,
                                  (long long)t->iteration, (long long)t->consumed);
    } else if (rc == 0 && have_ck) {
        tdm_log_info("loaded weights of %s (--finetune: starting at iteration 0)", ck.dir);
    }
    if (have_ck && !t->has_pending) tdm_ckpt_close(&ck); /* else t->pending owns it */
    if (rc != 0) return -1;
    if (t->iteration >= a->train_iters && a->train_iters > 0 && t->iteration > 0)
        tdm_log_info("the checkpoint is at iteration %lld, not before --train-iters %lld: nothing to train",
                     (long long)t->iteration, (long long)a->train_iters);
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
    if (a->use_checkpoint_opt_param_scheduler && have_ck) { /* validate: with --load, not --finetune */
        tdm_lr_style cs;
        if (!ck_state.has_schedule)
            return tdm_errorf(err, "--use-checkpoint-opt_param-scheduler: %s does not record its warm-up and decay "
                                   "span (written before they were saved); resume without the flag",
                              a->load);
        if (tdm_lr_style_parse(ck_state.lr_decay_style, &cs) != 0)
            return tdm_errorf(err, "--load %s: unknown lr decay style '%s'", a->load, ck_state.lr_decay_style);
        t->sched.max_lr = ck_state.lr;
        t->sched.min_lr = ck_state.min_lr;
        t->sched.init_lr = ck_state.lr_warmup_init;
        t->sched.style = cs;
        t->sched.warmup_steps = ck_state.lr_warmup_steps;
        t->sched.decay_steps = ck_state.lr_decay_steps;
        if (cs == TDM_LR_WSD && t->sched.wsd_decay_steps == 0) { /* not in the state, as in Megatron's */
            if (a->lr_wsd_decay_iters <= 0 && a->lr_wsd_decay_samples <= 0)
                return tdm_errorf(err, "--use-checkpoint-opt_param-scheduler: %s decays by WSD, whose final decay "
                                       "checkpoints do not record: give it with --lr-wsd-decay-%s N",
                                  ck.dir, by_samples ? "samples" : "iters");
            tdm_wsd_style ws = TDM_WSD_EXPONENTIAL;
            tdm_wsd_style_parse(a->lr_wsd_decay_style, &ws);
            if (tdm_lr_scheduler_set_wsd(&t->sched, ws, by_samples ? a->lr_wsd_decay_samples : a->lr_wsd_decay_iters,
                                         by_samples ? 1 : a->global_batch_size, err) != 0)
                return -1;
        }
        if (tdm_lr_scheduler_check(&t->sched, err) != 0) /* the file is not checksummed: hand-edited */
            return tdm_error_prefix(err, "--use-checkpoint-opt_param-scheduler: %s/trainer_state.json", ck.dir);
        if (ck_state.has_wd_schedule) { /* older checkpoints: the flags' weight decay */
            tdm_wd_style cws;
            if (tdm_wd_style_parse(ck_state.wd_incr_style, &cws) != 0)
                return tdm_errorf(err, "--load %s: unknown weight decay increment style '%s'", a->load,
                                  ck_state.wd_incr_style);
            if (tdm_lr_scheduler_set_wd(&t->sched, cws, ck_state.start_wd, ck_state.end_wd, ck_state.wd_incr_steps,
                                        err) != 0)
                return tdm_error_prefix(err, "--use-checkpoint-opt_param-scheduler: %s/trainer_state.json", ck.dir);
        }
        char wd[160] = "; weight decay of the flags (the checkpoint records none)";
        if (ck_state.has_wd_schedule)
            snprintf(wd, sizeof wd, "; weight decay %s from %g to %g over %lld samples", ck_state.wd_incr_style,
                     ck_state.start_wd, ck_state.end_wd, (long long)ck_state.wd_incr_steps);
        tdm_log_info("learning-rate schedule of the checkpoint (--use-checkpoint-opt_param-scheduler): peak %g, "
                     "floor %g, %s decay over %lld samples after %g of warm-up%s",
                     ck_state.lr, ck_state.min_lr, ck_state.lr_decay_style, (long long)ck_state.lr_decay_steps,
                     ck_state.lr_warmup_steps, wd);
    }
    /* the schedule is a function of samples consumed: resuming restores it exactly */
    t->sched.num_steps = t->consumed;
    t->adamw.beta1 = (float)a->adam_beta1;
    t->adamw.beta2 = (float)a->adam_beta2;
    t->adamw.eps = (float)a->adam_eps;
    t->adamw.weight_decay = (float)tdm_lr_scheduler_wd(&t->sched);
    t->adamw.clip_grad = (float)a->clip_grad;
    return 0;
}

/* ------------------------------------------------------------------ checkpoint save */

/* MPI counts are int: a shard of an 8B model's Adam state at dp 2 holds 4.4e9 floats, so
 * large arrays travel in pieces of at most 2^30 elements. */
#define TDM_MPI_CHUNK ((int64_t)1 << 30)
static void send_floats(const float *x, int64_t n, int dest, int tag, MPI_Comm comm) {
    for (int64_t o = 0; o < n; o += TDM_MPI_CHUNK)
        MPI_Send(x + o, (int)(n - o < TDM_MPI_CHUNK ? n - o : TDM_MPI_CHUNK), MPI_FLOAT, dest, tag, comm);
}
static void recv_floats(float *x, int64_t n, int src, int tag, MPI_Comm comm) {
    for (int64_t o = 0; o < n; o += TDM_MPI_CHUNK)
        MPI_Recv(x + o, (int)(n - o < TDM_MPI_CHUNK ? n - o : TDM_MPI_CHUNK), MPI_FLOAT, src, tag, comm,
                 MPI_STATUS_IGNORE);
}

/* The optimizer state streamed to rank 0's checkpoint writer one parameter at a time
 * (tdm_ckpt_save_spec.optim_state): rank 0 holds m and v of the parameter being written, never
 * the whole state (twice the weights: 66 GB for Qwen3-VL-8B). With the distributed optimizer
 * the other ranks send, parameter by parameter in table order, the pieces of it they own;
 * rank 0 receives them in the same order. Without it rank 0's own copy is complete and nobody
 * sends. */
typedef struct state_stream {
    trainer *t;
    int senders;                 /* ranks whose pieces make up the state: dp, or 1 */
    tdm_ddp_opt_piece **pieces;  /* [senders]: each rank's pieces, sorted by (param, offset) */
    int *n_pieces, *next;        /* [senders]: how many; the first not yet received */
    int next_param;              /* the first parameter not yet assembled */
    float *m, *v, *w;            /* [largest trainable numel]; w: --bf16's main parameters */
    const float *own_m, *own_v, *own_w; /* rank 0's state arrays */
} state_stream;

/* Assembles parameters next_param .. `upto` (inclusive) into s->m, s->v, receiving every
 * piece the other ranks send for them (those before `upto` are received and dropped: a
 * parameter the writer did not ask for, or all of them after a failed write, so that no
 * sender is left blocked). Returns 0, or -1 when the pieces do not cover `upto`. */
static int assemble_upto(state_stream *s, int upto) {
    tdm_param_table *pt = tdm_model_params(s->t->model);
    int64_t covered = 0;
    for (; s->next_param <= upto; s->next_param++) {
        int i = s->next_param;
        covered = 0;
        for (int r = 0; r < s->senders; r++) {
            for (; s->next[r] < s->n_pieces[r] && s->pieces[r][s->next[r]].param == i; s->next[r]++) {
                const tdm_ddp_opt_piece *p = &s->pieces[r][s->next[r]];
                float *dm = s->m + p->param_offset, *dv = s->v + p->param_offset;
                float *dw = s->w ? s->w + p->param_offset : NULL;
                if (r == 0) {
                    memcpy(dm, s->own_m + p->state_offset, sizeof(float) * (size_t)p->count);
                    memcpy(dv, s->own_v + p->state_offset, sizeof(float) * (size_t)p->count);
                    if (dw) memcpy(dw, s->own_w + p->state_offset, sizeof(float) * (size_t)p->count);
                } else {
                    recv_floats(dm, p->count, r, 4, s->t->comm);
                    recv_floats(dv, p->count, r, 5, s->t->comm);
                    if (dw) recv_floats(dw, p->count, r, 6, s->t->comm);
                }
                covered += p->count;
            }
        }
    }
    return upto < 0 || covered == pt->p[upto].numel ? 0 : -1;
}

static const float *stream_state(void *ctx, int param, int which, tdm_error *err) {
    state_stream *s = ctx;
    const char *name = tdm_model_params(s->t->model)->p[param].name;
    if (which == 0) {
        if (param < s->next_param || assemble_upto(s, param) != 0) {
            tdm_errorf(err, "the optimizer shards do not cover parameter %s", name);
            return NULL;
        }
        return s->m;
    }
    if (param != s->next_param - 1 || (which == 2 && !s->w)) { /* v (and w) right after m of the same parameter */
        tdm_errorf(err, "%s of %s asked before its exp_avg", which == 1 ? "exp_avg_sq" : "fp32_param", name);
        return NULL;
    }
    return which == 1 ? s->v : s->w;
}

static int finish_save(trainer *t, int ok, uint64_t t0, tdm_error *err);

/* Collective: rank 0 writes the checkpoint, the optimizer state gathered into parameter
 * shape one parameter at a time as it is written; every rank learns whether it worked. */
static int save_checkpoint(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tdm_ddp_wait_params(t->ddp);
    tdm_param_table *pt = tdm_model_params(t->model);
    int distributed = tdm_ddp_get_config(t->ddp)->use_distributed_optimizer;
    int np;
    tdm_ddp_opt_piece *pieces = pieces_in_file_order(t, &np);
    uint64_t t0 = tdm_now_ns();
    int ok = 1;
    /* --no-save-optim: nothing to gather; without the distributed optimizer rank 0 has it all */
    int senders = a->no_save_optim ? 0 : distributed ? t->dp : 1;
    const float *sm = tdm_ddp_opt_m(t->ddp), *sv = tdm_ddp_opt_v(t->ddp), *sw = tdm_ddp_opt_main(t->ddp);
    if (t->rank != 0) {
        if (t->rank < senders) { /* the piece list, then each piece's m and v in (param, offset) order */
            MPI_Send(&np, 1, MPI_INT, 0, 1, t->comm);
            MPI_Send(pieces, (int)(sizeof *pieces * (size_t)np), MPI_BYTE, 0, 3, t->comm);
            for (int k = 0; k < np; k++) {
                send_floats(sm + pieces[k].state_offset, pieces[k].count, 0, 4, t->comm);
                send_floats(sv + pieces[k].state_offset, pieces[k].count, 0, 5, t->comm);
                if (sw) send_floats(sw + pieces[k].state_offset, pieces[k].count, 0, 6, t->comm);
            }
        }
        free(pieces);
        return finish_save(t, 0, t0, err);
    }
    state_stream ss = {.t = t, .senders = senders, .own_m = sm, .own_v = sv, .own_w = sw};
    if (senders > 0) {
        ss.pieces = tdm_xcalloc((size_t)senders, sizeof *ss.pieces);
        ss.n_pieces = tdm_xcalloc((size_t)senders, sizeof(int));
        ss.next = tdm_xcalloc((size_t)senders, sizeof(int));
        ss.pieces[0] = pieces;
        ss.n_pieces[0] = np;
        for (int r = 1; r < senders; r++) {
            MPI_Recv(&ss.n_pieces[r], 1, MPI_INT, r, 1, t->comm, MPI_STATUS_IGNORE);
            ss.pieces[r] = tdm_xcalloc((size_t)(ss.n_pieces[r] ? ss.n_pieces[r] : 1), sizeof **ss.pieces);
            MPI_Recv(ss.pieces[r], (int)(sizeof **ss.pieces * (size_t)ss.n_pieces[r]), MPI_BYTE, r, 3, t->comm,
                     MPI_STATUS_IGNORE);
        }
        int64_t maxn = 1;
        for (int i = 0; i < pt->n; i++)
            if (pt->p[i].trainable && pt->p[i].numel > maxn) maxn = pt->p[i].numel;
        ss.m = tdm_xmalloc(sizeof(float) * (size_t)maxn);
        ss.v = tdm_xmalloc(sizeof(float) * (size_t)maxn);
        if (sw) ss.w = tdm_xmalloc(sizeof(float) * (size_t)maxn);
    }
    if (t->rank == 0) {
        tdm_ckpt_state st = {
            .iteration = t->iteration,
            .consumed_samples = t->consumed,
            .scheduler_num_steps = t->sched.num_steps,
            .lr = a->lr,
            .min_lr = a->min_lr,
            .seed = a->seed,
            .adam_step = tdm_ddp_opt_step_count(t->ddp),
            .dp = t->dp,
            .distributed_optimizer = distributed,
            .params_bf16 = a->bf16,
            .args_fingerprint = tdm_train_args_fingerprint(a),
        };
        snprintf(st.lr_decay_style, sizeof st.lr_decay_style, "%s", tdm_lr_style_name(t->sched.style));
        st.lr = t->sched.max_lr; /* the schedule in force (the checkpoint's under --use-checkpoint-...) */
        st.min_lr = t->sched.min_lr;
        st.lr_warmup_init = t->sched.init_lr;
        st.lr_warmup_steps = t->sched.warmup_steps;
        st.lr_decay_steps = t->sched.decay_steps;
        st.has_wd_schedule = 1;
        st.start_wd = t->sched.start_wd;
        st.end_wd = t->sched.end_wd;
        st.wd_incr_steps = t->sched.wd_incr_steps;
        snprintf(st.wd_incr_style, sizeof st.wd_incr_style, "%s", tdm_wd_style_name(t->sched.wd_style));
        char pp_buf[2200];
        tdm_ckpt_save_spec spec = {.config_json_path = t->config_json,
                                   .preprocessor_json_path =
                                       tdm_feed_preprocessor_path(a->preprocessor, a->model, pp_buf, sizeof pp_buf),
                                   .params = pt,
                                   .params_bf16 = a->bf16,
                                   .optim_state = senders > 0 ? stream_state : NULL,
                                   .optim_ctx = &ss,
                                   .state = &st};
        ok = tdm_ckpt_save(a->save, &spec, t->res->saved_checkpoint, sizeof t->res->saved_checkpoint, err) == 0;
    }
    if (senders > 0) {
        assemble_upto(&ss, pt->n - 1); /* after a failed write: what the senders still have in flight */
        for (int r = 1; r < senders; r++) free(ss.pieces[r]);
        free(ss.pieces);
        free(ss.n_pieces);
        free(ss.next);
        free(ss.m);
        free(ss.v);
        free(ss.w);
    }
    free(pieces);
    return finish_save(t, ok, t0, err);
}

/* Every rank learns from rank 0 whether the checkpoint was written. */
static int finish_save(trainer *t, int ok, uint64_t t0, tdm_error *err) {
    const tdm_train_args *a = t->a;
    MPI_Bcast(&ok, 1, MPI_INT, 0, t->comm);
    if (!ok) {
        t->res->all_ranks_failed = 1;
        t->res->failed_rank = 0;
        if (t->rank != 0) tdm_errorf(err, "rank 0 failed to save the checkpoint");
        return -1;
    }
    tdm_log_info("saved checkpoint at iteration %7lld to %s (%.1f ms)", (long long)t->iteration, a->save,
                 (double)(tdm_now_ns() - t0) / 1e6);
    return 0;
}

/* ------------------------------------------------------------------ one step */

static double ms_since(uint64_t t0) { return (double)(tdm_now_ns() - t0) / 1e6; }

enum { STOP_SIGNAL = 1, STOP_DURATION = 2 };

/* Runs iteration t->iteration + 1. *stop is set (STOP_*) when all ranks agreed to stop after it. */
static int train_step(trainer *t, tdm_step_record *rec, int *stop, tdm_error *err) {
    const tdm_train_args *a = t->a;
    int64_t it = t->iteration + 1;
    memset(rec, 0, sizeof *rec);
    rec->iteration = it;
    tdm_ddp_stats st0;
    tdm_ddp_get_stats(t->ddp, &st0);
    double gather0 = tdm_ddp_timer_elapsed_ms(t->ddp, TDM_TIMER_PARAMS_ALL_GATHER);
    uint64_t t_step = tdm_now_ns(), cpu0 = tdm_thread_cpu_ns(), pcpu0 = tdm_process_cpu_ns();
    tdm_prof_step_begin(it);

    /* forward and backward of this rank's micro-batches; gradients accumulate */
    double loss_sum = 0, tokens = 0, flops = 0;
    uint64_t fp_local = 0;
    XXH3_state_t *fps = XXH3_createState();
    XXH3_64bits_reset(fps);
    uint64_t t_fb = tdm_now_ns();
    tdm_ddp_timer_start(t->ddp, TDM_TIMER_FORWARD_BACKWARD);
    tdm_ddp_zero_grad(t->ddp);
    double wait_ms = 0;
    for (int k = 0; k < t->micro_per_step; k++) {
        const tdm_batch *b;
        uint64_t waited = 0;
        if (tdm_feed_next(t->feed, &b, &waited, err) != 0) {
            XXH3_freeState(fps);
            return -1;
        }
        wait_ms += (double)waited / 1e6;
        if (waited && tdm_prof_on(0)) { /* the profiler's level-0 data wait (profiling.md) */
            uint64_t now = tdm_now_ns();
            tdm_prof_complete(TDM_PROF_DATA, 0, "data wait", now - waited, now, k);
        }
        XXH3_64bits_update(fps, &b->fingerprint, sizeof b->fingerprint);
        tdm_ddp_set_is_last_microbatch(t->ddp, k == t->micro_per_step - 1);
        tdm_fb_result r;
        tdm_prof_begin(TDM_PROF_PHASE, 0, "forward-backward", k);
        int fb_rc = tdm_model_forward_backward(t->model, b, 1.0f, &r, err);
        tdm_prof_end(TDM_PROF_PHASE, 0);
        if (fb_rc != 0) {
            XXH3_freeState(fps);
            return tdm_error_prefix(err, "iteration %lld", (long long)it);
        }
        loss_sum += r.loss_sum;
        tokens += (double)r.n_tokens;
        flops += tdm_model_flops(t->model, b);
    }
    fp_local = XXH3_64bits_digest(fps);
    XXH3_freeState(fps);
    uint64_t t_sync = tdm_now_ns();
    tdm_prof_begin(TDM_PROF_PHASE, 0, "grad sync", -1);
    int sync_rc = tdm_ddp_finish_grad_sync(t->ddp, err);
    tdm_prof_end(TDM_PROF_PHASE, 0);
    rec->grad_sync_ms = ms_since(t_sync);
    tdm_ddp_timer_stop(t->ddp, TDM_TIMER_FORWARD_BACKWARD);
    rec->fwd_bwd_ms = ms_since(t_fb) - wait_ms;
    rec->data_wait_ms = wait_ms;
    if (sync_rc != 0) {
        /* finish_grad_sync fails on every rank together (NaN/Inf, missing gradient) */
        t->res->all_ranks_failed = 1;
        t->res->failed_rank = 0;
        return -1;
    }

    /* one small collective, summed in rank order: loss sum, token count, model FLOPs, and the two
     * reasons to stop after this step (a signal; --exit-duration-in-mins, by any rank's clock) */
    const int out_of_time =
        a->exit_duration_in_mins > 0 && (double)(tdm_now_ns() - t->start_ns) / 60e9 > a->exit_duration_in_mins;
    double sums[5] = {loss_sum, tokens, flops, g_stop_requested ? 1.0 : 0.0, out_of_time ? 1.0 : 0.0};
    if (tdm_ddp_sum_across_ranks(t->ddp, sums, 5, err) != 0) return -1;
    rec->tokens = (int64_t)sums[1];
    rec->loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
    rec->model_flops = sums[2];
    *stop = sums[3] > 0 ? STOP_SIGNAL : sums[4] > 0 ? STOP_DURATION : 0;
    if (sums[1] <= 0 || !isfinite(rec->loss)) {
        t->res->all_ranks_failed = 1;
        t->res->failed_rank = 0;
        if (sums[1] <= 0)
            return tdm_errorf(err, "iteration %lld: the global batch has no tokens to train on (every label is -100)",
                              (long long)it);
        return tdm_errorf(err, "iteration %lld: the loss is %s (loss sum %g over %lld tokens, all ranks)", (long long)it,
                          isnan(rec->loss) ? "NaN" : "infinite", sums[0], (long long)sums[1]);
    }

    /* optimizer: Megatron's timing: this step runs at lr(consumed before it) */
    t->adamw.lr = (float)tdm_lr_scheduler_lr(&t->sched);
    t->adamw.weight_decay = (float)tdm_lr_scheduler_wd(&t->sched);
    uint64_t t_opt = tdm_now_ns();
    double norm = 0;
    tdm_prof_begin(TDM_PROF_PHASE, 0, "optimizer", -1);
    int opt_rc = tdm_ddp_optimizer_step(t->ddp, &t->adamw, (float)(1.0 / sums[1]), &norm, err);
    tdm_prof_end(TDM_PROF_PHASE, 0);
    if (opt_rc != 0) {
        t->res->all_ranks_failed = 1;
        t->res->failed_rank = 0;
        return -1;
    }
    rec->optimizer_ms = ms_since(t_opt);
    tdm_lr_scheduler_step(&t->sched, a->global_batch_size);
    t->iteration = it;
    t->consumed += a->global_batch_size;

    rec->consumed_samples = t->consumed;
    rec->global_batch_size = a->global_batch_size;
    rec->lr = tdm_lr_scheduler_lr(&t->sched);
    rec->weight_decay = tdm_lr_scheduler_wd(&t->sched);
    rec->grad_norm = a->clip_grad > 0 ? norm : 0.0; /* the spec: --clip-grad 0 logs 0.0 */
    if (a->log_params_norm || a->log_num_zeros_in_grad) {
        if (tdm_ddp_param_stats(t->ddp, &rec->params_norm, &rec->num_zeros, err) != 0) return -1;
        rec->has_params_norm = a->log_params_norm;
        rec->has_num_zeros = a->log_num_zeros_in_grad;
    }
    rec->param_gather_ms = tdm_ddp_timer_elapsed_ms(t->ddp, TDM_TIMER_PARAMS_ALL_GATHER) - gather0;
    if (rec->param_gather_ms < 0) rec->param_gather_ms = 0;
    tdm_ddp_stats st1;
    tdm_ddp_get_stats(t->ddp, &st1);
    rec->comm_thread_cpu_ms = (double)(st1.comm_thread_cpu_ns - st0.comm_thread_cpu_ns) / 1e6;

    /* the input fingerprint of the step: every rank's micro-batch hashes, in rank order */
    if (a->audit_fingerprints) {
        uint64_t *all = tdm_xmalloc(sizeof(uint64_t) * (size_t)t->dp);
        MPI_Request r;
        MPI_Iallgather(&fp_local, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, t->comm, &r);
        tdm_wait_request_bounded(&r, t->timeout_ns, "input fingerprint audit");
        rec->fingerprint = XXH3_64bits(all, sizeof(uint64_t) * (size_t)t->dp);
        free(all);
    }
    tdm_prof_step_end(it);
    rec->step_ms = ms_since(t_step);
    rec->compute_cpu_ms = (double)(tdm_thread_cpu_ns() - cpu0) / 1e6;
    rec->cpu_ms = (double)(tdm_process_cpu_ns() - pcpu0) / 1e6;
    return 0;
}

/* ------------------------------------------------------------------ TensorBoard */

/* Rank 0, --tensorboard-dir: scalars under Megatron's tags, each also "TAG vs samples" over the
 * consumed samples, as its training_log writes them. A write error stops the event file with
 * a warning; training goes on. */
static void tb_scalars(trainer *t, int n, const char *const *tags, const double *values, int64_t iteration) {
    tdm_error e;
    char tag[160];
    for (int i = 0; t->tb && i < n; i++) {
        snprintf(tag, sizeof tag, "%s vs samples", tags[i]);
        if (tdm_tb_scalar(t->tb, tags[i], values[i], iteration, &e) != 0 ||
            tdm_tb_scalar(t->tb, tag, values[i], t->consumed, &e) != 0) {
            tdm_log_warn("%s (TensorBoard events stop here)", e.msg);
            tdm_tb_close(t->tb);
            t->tb = NULL;
        }
    }
}

static void tb_step(trainer *t, const tdm_step_record *r) {
    const tdm_train_args *a = t->a;
    if (!t->tb || r->iteration % a->tensorboard_log_interval != 0) return;
    const char *tags[7] = {"batch-size", "lm loss", "grad-norm", "learning-rate"};
    double v[7] = {r->global_batch_size, r->loss, r->grad_norm, r->lr};
    int n = a->log_learning_rate_to_tensorboard ? 4 : 3;
    if (a->log_loss_scale_to_tensorboard) tags[n] = "loss-scale", v[n++] = 1.0;
    if (r->has_num_zeros) tags[n] = "num-zeros", v[n++] = r->num_zeros;
    if (r->has_params_norm) tags[n] = "params-norm", v[n++] = r->params_norm;
    tb_scalars(t, n, tags, v, r->iteration);
    if (a->log_world_size_to_tensorboard) {
        const char *ws[1] = {"world-size"};
        double d = t->dp;
        tb_scalars(t, 1, ws, &d, r->iteration);
    }
}

/* ------------------------------------------------------------------ validation */

/* Megatron's evaluate_and_print_results: --eval-iters global batches of the validation set,
 * forward only, the loss summed over every rank's tokens / their count (the training loss's
 * definition), printed as Megatron's block and appended to <run-dir>/valid.jsonl.
 * Collective. The validation loader continues where the last evaluation stopped; a resumed
 * run starts it where evaluations at every --eval-interval before would have left it, as
 * Megatron does. Nothing is trained: the weights, the optimizer and the training data order
 * are untouched, so a run with validation trains bitwise as one without. */
static int evaluate(trainer *t, const char *prefix, tdm_error *err) {
    const tdm_train_args *a = t->a;
    uint64_t t0 = tdm_now_ns();
    tdm_ddp_wait_params(t->ddp); /* --overlap-param-gather: the weights of the last step */
    double sums[2] = {0, 0};
    int ok = 1;
    for (int64_t i = 0; ok && i < a->eval_iters; i++)
        for (int k = 0; ok && k < t->micro_per_step; k++) {
            const tdm_batch *b;
            uint64_t waited;
            tdm_fb_result r;
            ok = tdm_feed_next(t->valid_feed, &b, &waited, err) == 0 &&
                 tdm_model_forward(t->model, b, NULL, 0, NULL, &r, err) == 0;
            if (ok) sums[0] += r.loss_sum, sums[1] += (double)r.n_tokens;
        }
    if (!ok) tdm_error_prefix(err, "validation");
    if (agree(t, ok, err) != 0) return -1;
    if (tdm_ddp_sum_across_ranks(t->ddp, sums, 2, err) != 0) return -1;
    if (sums[1] <= 0) { /* every rank sees the same sums */
        t->res->all_ranks_failed = 1;
        t->res->failed_rank = 0;
        return tdm_errorf(err, "validation at %s: no token to score (every label of %lld global batches is -100)",
                          prefix, (long long)a->eval_iters);
    }
    const double loss = sums[0] / sums[1], ms = ms_since(t0);
    if (t->rank == 0) {
        tdm_strbuf sb;
        tdm_sb_init(&sb);
        tdm_format_validation(&sb, prefix, loss);
        fputs(sb.data, stdout);
        fflush(stdout);
        const char *tags[2] = {"lm loss validation", "lm loss validation ppl"};
        double v[2] = {loss, exp(loss < 20 ? loss : 20)};
        tb_scalars(t, a->log_validation_ppl_to_tensorboard ? 2 : 1, tags, v, t->iteration);
        if (t->valid_log) {
            tdm_sb_clear(&sb);
            tdm_format_validation_json(&sb, t->iteration, t->consumed, loss, (int64_t)sums[1],
                                       a->eval_iters * a->global_batch_size, ms);
            tdm_sb_putc(&sb, '\n');
            if (fwrite(sb.data, 1, sb.len, t->valid_log) != sb.len || fflush(t->valid_log) != 0) {
                tdm_log_warn("%s/valid.jsonl: write failed (validation results stop here)", a->run_dir);
                fclose(t->valid_log);
                t->valid_log = NULL;
            }
        }
        tdm_sb_free(&sb);
    }
    return 0;
}

/* ------------------------------------------------------------------ logging */

/* This process's resident memory now and at its peak (/proc/self/status VmRSS, VmHWM), in MiB; -1 when
 * unknown. */
static void resident_mib(double *now, double *peak) {
    *now = *peak = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) *now = (double)kb / 1024.0;
        else if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) *peak = (double)kb / 1024.0;
    }
    fclose(f);
}

typedef struct interval {
    int n;
    double loss_sum, ms_sum, flops_sum;
    int skipped, nan;
} interval;

static void log_iteration(trainer *t, interval *iv, const tdm_step_record *r) {
    iv->n++;
    iv->loss_sum += r->loss;
    iv->ms_sum += r->step_ms;
    iv->flops_sum += r->model_flops;
    iv->skipped += r->skipped;
    iv->nan += r->nan;
    /* Megatron's timers.write (--log-timers-to-tensorboard): at every TensorBoard interval, each timer's max
     * across ranks of its mean per iteration since the last iteration line, in seconds, as 'NAME-time'.
     * Collective: every rank asks, rank 0 writes. */
    if (t->a->log_timers_to_tensorboard && t->a->tensorboard_dir[0] &&
        r->iteration % t->a->tensorboard_log_interval == 0) {
        tdm_timing tm;
        tdm_error e;
        if (tdm_ddp_timers_peek(t->ddp, iv->n, &tm, &e) == 0)
            for (int i = 0; i < TDM_TIMER_COUNT; i++) {
                if (!tm.valid[i]) continue;
                char tag[64];
                snprintf(tag, sizeof tag, "%s-time", tdm_timer_name(i));
                /* as timers.write: by iteration only, no 'vs samples' twin */
                if (t->rank == 0 && t->tb && tdm_tb_scalar(t->tb, tag, tm.max_ms[i] / 1e3, r->iteration, &e) != 0) {
                    tdm_log_warn("%s (TensorBoard events stop here)", e.msg);
                    tdm_tb_close(t->tb);
                    t->tb = NULL;
                }
            }
    }
    if (r->iteration % t->a->log_interval != 0 && r->iteration != t->a->train_iters) return;
    tdm_iter_line l = {.iteration = r->iteration,
                       .train_iters = t->a->train_iters,
                       .consumed_samples = r->consumed_samples,
                       .elapsed_ms_per_iter = iv->ms_sum / iv->n,
                       .lr = r->lr,
                       .global_batch_size = r->global_batch_size,
                       .loss = iv->loss_sum / iv->n,
                       .loss_scale = 1.0,
                       .grad_norm = r->grad_norm,
                       .skipped = iv->skipped,
                       .nan = iv->nan,
                       .has_throughput = t->a->log_throughput && iv->ms_sum > 0,
                       .has_num_zeros = r->has_num_zeros,
                       .has_params_norm = r->has_params_norm,
                       .num_zeros = r->num_zeros,
                       .params_norm = r->params_norm};
    /* Megatron's: model FLOPs / (seconds x 1e12 x world size), over the log interval */
    if (l.has_throughput) l.throughput = iv->flops_sum / (iv->ms_sum / 1e3 * 1e12 * t->dp);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_format_iter_line(&sb, &now, &l);
    tdm_log_info("%s", sb.data); /* rank 0 prints */
    if (!t->memory_reported) { /* Megatron's report_memory after the first line; host memory here */
        t->memory_reported = 1;
        double now, peak;
        resident_mib(&now, &peak);
        if (now >= 0 && peak >= 0)
            tdm_log_info("[Rank %d] (after %lld iterations) memory (MB) | resident: %.1f | max resident: %.1f",
                         t->rank, (long long)r->iteration, now, peak);
    }
    if (t->a->timing_log_level >= 1) {
        tdm_timing tm;
        tdm_error e;
        if (tdm_ddp_timers_report(t->ddp, iv->n, &tm, &e) == 0) {
            tdm_sb_clear(&sb);
            const char *o = t->a->timing_log_option;
            tdm_timing_format_option(&tm, !strcmp(o, "max") ? TDM_TIMING_MAX : !strcmp(o, "all") ? TDM_TIMING_ALL
                                                                                                 : TDM_TIMING_MINMAX,
                                     &sb);
            if (sb.len && sb.data[sb.len - 1] == '\n') sb.data[--sb.len] = 0;
            tdm_log_info("%s", sb.data);
        }
    }
    tdm_sb_free(&sb);
    if (t->a->log_timers_to_tensorboard) { /* Megatron: seconds per iteration over the log interval */
        const char *tag[2] = {"iteration-time", "throughput"};
        double v[2] = {iv->ms_sum / iv->n / 1000.0, l.throughput};
        tb_scalars(t, l.has_throughput ? 2 : 1, tag, v, r->iteration);
    }
    memset(iv, 0, sizeof *iv);
}

/* ------------------------------------------------------------------ the run */

static uint64_t params_checksum(tdm_model *m) {
    tdm_param_table *pt = tdm_model_params(m);
    XXH3_state_t *s = XXH3_createState();
    XXH3_64bits_reset(s);
    for (int i = 0; i < pt->n; i++) XXH3_64bits_update(s, pt->p[i].data, sizeof(float) * (size_t)pt->p[i].numel);
    uint64_t h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return h;
}

int tdm_first_differing_param(const tdm_param_table *pt, MPI_Comm comm, uint64_t timeout_ns) {
    uint64_t *h = tdm_xcalloc((size_t)pt->n + 1, sizeof *h);
    for (int i = 0; i < pt->n; i++)
        h[i] = pt->p[i].data ? XXH3_64bits(pt->p[i].data, sizeof(float) * (size_t)pt->p[i].numel) : 0;
    int first = first_differing_hash(h, pt->n, comm, timeout_ns, "weight-hash check");
    free(h);
    return first;
}

/* --check-weight-hash-across-dp-replicas-interval: after the step (and its parameter all-gather),
 * every rank must hold the same bits. Collective; fails on every rank. */
static int weights_agree(trainer *t, tdm_error *err) {
    tdm_ddp_wait_params(t->ddp); /* --overlap-param-gather: the all-gathers of this step */
    const tdm_param_table *pt = tdm_model_params(t->model);
    int first = tdm_first_differing_param(pt, t->comm, t->timeout_ns);
    if (first < 0) {
        tdm_log_info(">>> Weight hashes match after %lld iterations...", (long long)t->iteration);
        return 0;
    }
    t->res->all_ranks_failed = 1;
    t->res->failed_rank = 0;
    return tdm_errorf(err, "iteration %lld: the weights differ between data-parallel ranks, first at %s "
                           "(--check-weight-hash-across-dp-replicas-interval): the ranks no longer train one model",
                      (long long)t->iteration, pt->p[first].name);
}

static void describe_checkpoint(int64_t iteration, int another_copy, char *out, size_t cap) {
    if (iteration < 0) snprintf(out, cap, "no checkpoint");
    else snprintf(out, cap, "%siteration %lld", another_copy ? "another copy of " : "", (long long)iteration);
}

/* Every rank starts from the same checkpoint, or every rank from none. Rank 0 alone writes
 * --save, so a folder on node-local disks holds the checkpoints on rank 0's node only: with
 * `--save ck --load ck` the other nodes' ranks took their launch for the first one and started
 * from iteration 0, trained other weights and ran more steps than rank 0, into a hang; a stale
 * copy would train other weights silently. Collective; called only with --load (the same
 * flags on every rank). */
static int same_checkpoint_everywhere(trainer *t, tdm_error *err) {
    const int64_t mine[2] = {(int64_t)t->ck_hash, t->ck_iteration};
    int64_t root[2] = {mine[0], mine[1]}, other[2] = {mine[0], mine[1]};
    t_bcast(t, root, 2, MPI_INT64_T, 0, "checkpoint agreement");
    int first = first_failed(t, root[0] == mine[0] && root[1] == mine[1], NULL, "checkpoint agreement");
    if (first == t->dp) return 0;
    t_bcast(t, other, 2, MPI_INT64_T, first, "checkpoint agreement");
    t->res->all_ranks_failed = 1;
    t->res->failed_rank = 0;
    char a[64], b[64];
    describe_checkpoint(root[1], 0, a, sizeof a);
    describe_checkpoint(other[1], other[1] == root[1], b, sizeof b);
    return tdm_errorf(err, "--load %s: rank %d read %s there, rank 0 %s: every rank must read the same checkpoint "
                           "(rank 0 alone writes --save: on node-local disks only its node has them)",
                      t->a->load, first, b, a);
}

/* Every rank must start from the same weights: --pretrained / --hf-weights files that differ
 * between nodes (a stale copy on one of them) would train a different model on each rank,
 * silently: the gradients are averaged as if they were one. Collective: each rank's checksum of
 * every parameter against rank 0's (one pass over the weights at start-up). */
static int same_weights_everywhere(trainer *t, tdm_error *err) {
    const uint64_t mine = params_checksum(t->model);
    uint64_t root = mine;
    t_bcast(t, &root, 1, MPI_UINT64_T, 0, "initial-weights agreement");
    int first = first_failed(t, root == mine, NULL, "initial-weights agreement");
    if (first == t->dp) return 0;
    t->res->all_ranks_failed = 1;
    t->res->failed_rank = 0;
    const char *from = t->a->load[0] && !t->a->finetune ? "--load"
                       : t->a->pretrained[0]           ? "--pretrained"
                       : t->a->hf_weights[0]           ? "--hf-weights"
                       : t->a->load[0]                 ? "--load"
                                                       : "--seed";
    return tdm_errorf(err, "the initial weights differ between ranks: rank %d's are not rank 0's (rank 0's checksum "
                           "%016llx); "
                           "every rank must read the same %s files (copies on each node must be identical)",
                      first, (unsigned long long)root, from);
}

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
    int first = first_differing_hash(h, n, t->comm, t->timeout_ns, "flags agreement");
    free(h);
    if (first < 0) return 0;
    t->res->all_ranks_failed = 1;
    t->res->failed_rank = 0;
    tdm_train_args_value(t->a, first, value, sizeof value);
    return tdm_errorf(err, "the ranks were started with different flags: %s differs between ranks (%s on rank 0); "
                           "every data-parallel rank needs the same command line", tdm_train_args_name(first),
                      t->rank == 0 ? value : "see rank 0");
}

/* When this process started, on tdm_now_ns's clock (CLOCK_MONOTONIC): /proc/self/stat's starttime, in clock
 * ticks since boot, against CLOCK_BOOTTIME. Megatron's _TRAIN_START_TIME is likewise taken as its training module
 * loads, before the distributed set-up. tdm_now_ns() when it cannot be read. */
static uint64_t process_start_ns(void) {
    const uint64_t now = tdm_now_ns();
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return now;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    unsigned long long ticks = 0;
    /* after ") ": state is field 3, starttime field 22 */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                     &ticks) != 1)
        return now;
    struct timespec bt;
    const long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &bt) != 0) return now;
    const double since_boot = (double)bt.tv_sec + (double)bt.tv_nsec / 1e9, started = (double)ticks / (double)hz;
    const double elapsed_ns = (since_boot - started) * 1e9;
    return elapsed_ns > 0 && elapsed_ns < (double)now ? now - (uint64_t)elapsed_ns : now;
}

static void teardown(trainer *t) {
    if (t->has_pending) tdm_ckpt_close(&t->pending);
    tdm_feed_free(t->valid_feed); /* first: it borrows the training feed's tokenizer */
    tdm_feed_free(t->feed);
    if (t->valid_log) fclose(t->valid_log);
    tdm_ddp_free(t->ddp);
    tdm_model_free(t->model);
    tdm_metrics_close(t->metrics);
    tdm_tb_close(t->tb);
    if (t->comm != MPI_COMM_NULL) MPI_Comm_free(&t->comm);
}

int tdm_train_run(const tdm_train_args *a, MPI_Comm comm, tdm_train_result *res, tdm_error *err) {
    memset(res, 0, sizeof *res);
    res->failed_rank = -1;
    trainer T, *t = &T;
    memset(t, 0, sizeof *t);
    t->res = res;
    t->ck_iteration = -1;
    t->start_ns = process_start_ns();
    MPI_Comm_dup(comm, &t->comm);
    MPI_Comm_rank(t->comm, &t->rank);
    MPI_Comm_size(t->comm, &t->dp);
    /* the defaults that need the dp size (an unset --global-batch-size), for callers that left them */
    tdm_train_args resolved = *a;
    tdm_train_args_resolve(&resolved, t->dp);
    t->a = a = &resolved;
    t->timeout_ns = (uint64_t)(a->distributed_timeout_minutes * 60e9);
    int rc = -1;

    /* 0. every rank was started with the same flags (an MPMD launch could give each its own) */
    if (same_flags_everywhere(t, err) != 0) goto out;
    /* --exit-duration-in-mins counts from the earliest start of any rank, as Megatron's (a MIN all-reduce of
     * start times): here the longest time any rank has run, since the machines' clocks need not agree */
    if (a->exit_duration_in_mins > 0) {
        uint64_t longest = tdm_now_ns() - t->start_ns;
        t_allreduce(t, &longest, 1, MPI_UINT64_T, MPI_MAX, "start-time agreement");
        t->start_ns = tdm_now_ns() - longest;
    }

    /* 1. flags, model, data: each rank on its own, then agree */
    int ok = setup(t, err) == 0;
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
    if (agree(t, ok, err) != 0) goto out;
    tdm_log_info("%s", tdm_feed_summary(t->feed));
    if (t->valid_feed)
        tdm_log_info("validation %s; %lld global batches every %lld iterations", tdm_feed_summary(t->valid_feed),
                     (long long)a->eval_iters, (long long)a->eval_interval);
    t->micro_per_step = a->global_batch_size / (a->micro_batch_size * t->dp);

    /* 2. data-parallel layer (collective: binds the parameter storage), weights, state */
    ok = build_ddp(t, err) == 0;
    if (agree(t, ok, err) != 0) goto out;
    ok = setup_state(t, err) == 0;
    if (ok) {
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
        ok = set_recompute(t, err) == 0 && tdm_model_reserve(t->model, &lim, err) == 0;
        if (ok && t->rank == 0)
            tdm_log_info("activations: %.1f MiB per rank for micro-batches of up to %d tokens and %d patches%s",
                         (double)tdm_model_activation_bytes(t->model) / (1024.0 * 1024.0), lim.max_tokens,
                         lim.max_patches, t->recompute_note);
        char note[256];
        if (ok && t->rank == 0 && tdm_blas_core_note(note, sizeof note)) tdm_log_info("%s", note);
    }
    if (ok && a->run_dir[0] && t->rank == 0) ok = (t->metrics = tdm_metrics_open(a->run_dir, err)) != NULL;
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
    if (ok) ok = tdm_feed_start(t->feed, t->consumed, err) == 0;
    /* where evaluations at every --eval-interval so far left the validation loader (Megatron's
     * consumed_valid_samples on resume) */
    if (ok && t->valid_feed)
        ok = tdm_feed_start(t->valid_feed, t->iteration / a->eval_interval * a->eval_iters * a->global_batch_size,
                            err) == 0;
    if (agree(t, ok, err) != 0) goto out;
    if (a->load[0] && same_checkpoint_everywhere(t, err) != 0) goto out;
    if (a->load[0] && agree(t, verify_optimizer_load(t, err) == 0, err) != 0) goto out;
    if (same_weights_everywhere(t, err) != 0) goto out;
    if (a->inject_nan_iter > 0 && (a->inject_nan_rank < 0 || a->inject_nan_rank == t->rank))
        tdm_ddp_inject_nan(t->ddp, t->rank, a->inject_nan_iter, -1);
    tdm_ddp_set_iteration(t->ddp, t->iteration + 1);

    {
        tdm_strbuf sb;
        tdm_sb_init(&sb);
        tdm_ddp_describe(t->ddp, &sb);
        if (sb.len && sb.data[sb.len - 1] == '\n') sb.data[--sb.len] = 0;
        tdm_log_info("%s", sb.data);
        const char *nl = strchr(sb.data, '\n');
        snprintf(res->ddp_config_line, sizeof res->ddp_config_line, "%.*s",
                 (int)(nl ? (size_t)(nl - sb.data) : sb.len), sb.data);
        tdm_sb_free(&sb);
    }
    res->n_buckets = tdm_ddp_get_layout(t->ddp)->n_buckets;
    res->n_params_trainable = tdm_param_table_numel(tdm_model_params(t->model), 1);
    res->first_iteration = t->iteration;

    /* 3. profiler session (its own tool config) */
    if (a->profile_config[0]) {
        tdm_prof_config pc;
        ok = tdm_prof_config_load(a->profile_config, &pc, err) == 0;
        /* a tool config that would record nothing is an error, not an empty trace found later */
        for (int i = 0; ok && pc.enable && !pc.all_ranks && i < pc.n_ranks; i++)
            if (pc.ranks[i] >= t->dp)
                ok = tdm_errorf(err, "%s: profile.ranks: rank %d does not exist (%d ranks)", a->profile_config,
                                pc.ranks[i], t->dp) == 0;
        if (ok && pc.enable && (pc.end_step <= t->iteration || pc.start_step > a->train_iters))
            ok = tdm_errorf(err, "%s: profile steps %lld-%lld lie outside this run's iterations %lld-%lld: nothing "
                            "would be recorded", a->profile_config, (long long)pc.start_step, (long long)pc.end_step,
                            (long long)t->iteration + 1, (long long)a->train_iters) == 0;
        if (ok && pc.enable)
            tdm_log_info("profiler: level %d, steps %lld-%lld, %s ranks, into %s", pc.level, (long long)pc.start_step,
                         (long long)pc.end_step, pc.all_ranks ? "all" : "the listed", pc.save_path);
        if (agree(t, ok, err) != 0) goto out;
        ok = tdm_prof_session_start(&pc, t->comm, err) == 0;
        if (agree(t, ok, err) != 0) goto out;
        t->profiling = 1;
    }

    /* 4. the loop */
    tdm_log_info("training from iteration %lld to %lld: %d micro-batches of %d samples per rank per step, %d ranks",
                 (long long)t->iteration, (long long)a->train_iters, t->micro_per_step, a->micro_batch_size, t->dp);
    interval iv;
    memset(&iv, 0, sizeof iv);
    uint64_t last_progress = tdm_now_ns();
    int saved_last = 0;
    while (t->iteration < a->train_iters) {
        tdm_step_record rec;
        int stop = 0;
        if (train_step(t, &rec, &stop, err) != 0) goto out;
        push_record(t, &rec);
        saved_last = 0;
        log_iteration(t, &iv, &rec); /* every rank: the timers report in it is collective */
        if (t->rank == 0) {
            tb_step(t, &rec);
            if (t->metrics && tdm_metrics_write(t->metrics, &rec, a->audit_fingerprints, err) != 0) {
                tdm_log_warn("%s (metrics stop here)", err->msg);
                tdm_metrics_close(t->metrics);
                t->metrics = NULL;
            }
            if (tdm_now_ns() - last_progress > 10ull * 1000000000ull) {
                tdm_strbuf sb;
                tdm_sb_init(&sb);
                tdm_format_progress(&sb, t->iteration, a->train_iters, iv.n ? iv.ms_sum / iv.n : rec.step_ms);
                fprintf(stderr, "%s\n", sb.data);
                tdm_sb_free(&sb);
                last_progress = tdm_now_ns();
            }
        }
        if (t->valid_feed && t->iteration % a->eval_interval == 0) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "iteration %lld", (long long)t->iteration);
            if (evaluate(t, prefix, err) != 0) goto out;
        }
        if (a->check_weight_hash_across_dp_replicas_interval > 0 &&
            t->iteration % a->check_weight_hash_across_dp_replicas_interval == 0 && weights_agree(t, err) != 0)
            goto out;
        int exit_now = stop || (a->exit_interval > 0 && t->iteration % a->exit_interval == 0);
        if (a->save[0] && ((a->save_interval > 0 && t->iteration % a->save_interval == 0) || exit_now)) {
            if (save_checkpoint(t, err) != 0) goto out;
            saved_last = 1;
        }
        if (exit_now) {
            res->interrupted = t->iteration < a->train_iters; /* an exit at the last iteration is the end */
            char why[96] = "exiting (--exit-interval)";
            if (stop == STOP_SIGNAL) snprintf(why, sizeof why, "stopping on a signal");
            if (stop == STOP_DURATION) /* Megatron: 'exiting program after N minutes' */
                snprintf(why, sizeof why, "exiting (--exit-duration-in-mins) after %.4f minutes",
                         (double)(tdm_now_ns() - t->start_ns) / 60e9);
            tdm_log_info("%s at iteration %lld%s", why, (long long)t->iteration,
                         a->save[0] ? " after saving a checkpoint" : "");
            break;
        }
    }
    if (a->save[0] && !saved_last && t->iteration > res->first_iteration)
        if (save_checkpoint(t, err) != 0) goto out;
    /* Megatron also evaluates when training ends (not when it was stopped early); here only if
     * the last iteration was not an evaluation point already */
    if (t->valid_feed && !res->interrupted && t->iteration > res->first_iteration &&
        t->iteration % a->eval_interval != 0) {
        char prefix[96];
        snprintf(prefix, sizeof prefix, "iteration %lld on validation set", (long long)t->iteration);
        if (evaluate(t, prefix, err) != 0) goto out;
    }

    if (t->profiling) {
        t->profiling = 0;
        if (tdm_prof_session_finish(t->comm, err) != 0) goto out;
    }
    tdm_ddp_wait_params(t->ddp);
    res->final_iteration = t->iteration;
    res->consumed_samples = t->consumed;
    res->params_checksum = params_checksum(t->model);
    rc = 0;
out:
    if (t->profiling) {
        tdm_error e;
        tdm_prof_session_finish(t->comm, &e);
    }
    teardown(t);
    return rc;
}
