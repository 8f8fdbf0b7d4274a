/* resume.c - a run that starts from a checkpoint (--load): its position, optimizer state and
 * schedule, and the ranks' agreement that they read the same one (trainer_internal.h). */
#include "train/trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "distributed/agree.h"
#include "distributed/optimizer.h"
#include "distributed/optimizer_state.h"
#include "model/qwen3vl.h"
#include "train/checkpoint.h"
#include "train/feed.h"
#include "train/scheduler.h"

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

int tdm_train__open_checkpoint(trainer *t, tdm_ckpt *ck, int *have_ck, tdm_error *err) {
    const tdm_train_args *a = t->a;
    if (first_launch_of_save_dir(a)) {
        tdm_log_info("--load %s: no checkpoint there yet (it is also --save): starting from iteration 0", a->load);
    } else if (a->load[0]) {
        int weights_only = a->finetune || a->no_load_optim;
        if ((weights_only ? tdm_ckpt_open_weights : tdm_ckpt_open)(a->load, ck, err) != 0) return -1;
        *have_ck = 1;
    }
    return 0;
}

int tdm_train__check_consumed(trainer *t, const tdm_ckpt *ck, tdm_error *err) {
    const tdm_train_args *a = t->a;
    /* the sampler continues at global batch consumed / G: a resume with another global batch
     * size (also an unset one at another dp: micro x dp) must divide what was consumed */
    if (ck->state.consumed_samples % a->global_batch_size == 0) return 0;
    const tdm_ckpt_state *s = &ck->state;
    char was[96] = "";
    if (s->iteration > 0 && s->consumed_samples % s->iteration == 0)
        snprintf(was, sizeof was, ", e.g. the saved run's %lld", (long long)(s->consumed_samples / s->iteration));
    return tdm_errorf(err,
                      "--load %s: the checkpoint consumed %lld samples, not a multiple of the global batch "
                      "size %d (--global-batch-size; unset, --micro-batch-size x data-parallel size): resume with one "
                      "that divides %lld%s",
                      ck->dir, (long long)s->consumed_samples, a->global_batch_size, (long long)s->consumed_samples,
                      was);
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

/* This rank's shards of the Adam state, read straight from the checkpoint into the optimizer's
 * arrays: each piece it owns is a run of one parameter's elements. In a checkpoint with per-block
 * checksums only the blocks holding them are read; the values are vouched for later, once the
 * ranks have split the blocks nobody read between them (tdm_train__verify_optimizer_load). */
static int load_optimizer(trainer *t, tdm_ckpt *ck, tdm_error *err) {
    tdm_param_table *pt = tdm_model_params(t->model);
    int np;
    tdm_ddp_opt_piece *pieces = tdm_ddp_opt_pieces_sorted(t->ddp, &np);
    float *m = tdm_ddp_opt_m(t->ddp), *v = tdm_ddp_opt_v(t->ddp), *w = tdm_ddp_opt_main(t->ddp);
    int rc = 0;
    for (int k = 0; k < np && rc == 0; k++) {
        const tdm_ddp_opt_piece *p = &pieces[k];
        rc = tdm_ckpt_read_optimizer_range(ck, pt, p->param, p->param_offset, p->count, m + p->state_offset,
                                           v + p->state_offset, err);
        if (rc == 0 && w) /* --bf16: the fp32 main parameters the bfloat16 weights were rounded from */
            rc = tdm_ckpt_read_main_params_range(ck, pt, p->param, p->param_offset, p->count, w + p->state_offset, err);
        if (rc != 0) tdm_error_prefix(err, "--load %s", ck->dir); /* a parameter frozen at the save, or damage */
    }
    free(pieces);
    if (rc == 0) tdm_ddp_opt_set_step_count(t->ddp, ck->state.adam_step);
    return rc;
}

int tdm_train__resume_position(trainer *t, tdm_ckpt *ck, tdm_error *err) {
    const tdm_train_args *a = t->a;
    int rc = 0;
    t->iteration = ck->state.iteration;
    t->consumed = ck->state.consumed_samples;
    const uint64_t fingerprint = tdm_train_args_fingerprint(a);
    if (ck->state.args_fingerprint != fingerprint) {
        tdm_strbuf diff;
        tdm_sb_init(&diff);
        const char *now = tdm_train_args_numeric_values(fingerprint);
        if (ck->state.numeric_args[0] && now) tdm_train_args_numeric_diff(ck->state.numeric_args, now, &diff);
        tdm_log_info("note: resuming %s with flags that change the numerics (%s)%s", ck->dir,
                     diff.len ? diff.data
                              : "batch sizes, schedule, optimizer, seed, data or freezing differ from the saved run",
                     a->use_checkpoint_opt_param_scheduler
                         ? "; the learning-rate schedule is the checkpoint's (--use-checkpoint-opt_param-"
                           "scheduler)"
                         : "");
        tdm_sb_free(&diff);
    }
    char pp_buf[2200];
    if (tdm_file_exists(t->cfg.path)) note_config_change(ck->dir, "config.json", t->cfg.path, "model config");
    note_config_change(ck->dir, "preprocessor_config.json",
                       tdm_feed_preprocessor_path(a->preprocessor, a->model, pp_buf, sizeof pp_buf),
                       "preprocessor config");
    if (!a->no_load_optim) {
        if (!ck->state.has_optimizer) {
            rc = tdm_errorf(err, "--load %s: the checkpoint holds no optimizer state (add --no-load-optim)", ck->dir);
        } else if (ck->state.params_bf16 != a->bf16) {
            rc = tdm_errorf(err,
                            "--load %s: the checkpoint was trained with %s parameters and this run has %s "
                            "ones: resume it %s --bf16, or load its weights alone with --no-load-optim",
                            ck->dir, ck->state.params_bf16 ? "bfloat16" : "float32", a->bf16 ? "bfloat16" : "float32",
                            ck->state.params_bf16 ? "with" : "without");
        } else if ((rc = load_optimizer(t, ck, err)) == 0) {
            t->pending = *ck; /* verified once every rank got here (tdm_train__verify_optimizer_load) */
            t->has_pending = 1;
        }
    }
    if (rc == 0)
        tdm_log_info("loaded checkpoint %s at iteration %lld (consumed samples %lld)", ck->dir, (long long)t->iteration,
                     (long long)t->consumed);
    return rc;
}

int tdm_train__schedule_from_checkpoint(trainer *t, const tdm_ckpt_state *ck_state, const char *ck_dir,
                                        tdm_error *err) {
    const tdm_train_args *a = t->a;
    int by_samples = a->train_samples > 0;
    tdm_lr_style cs;
    if (!ck_state->has_schedule)
        return tdm_errorf(err,
                          "--use-checkpoint-opt_param-scheduler: %s does not record its warm-up and decay "
                          "span (written before they were saved); resume without the flag",
                          a->load);
    if (tdm_lr_style_parse(ck_state->lr_decay_style, &cs) != 0)
        return tdm_errorf(err, "--load %s: unknown lr decay style '%s'", a->load, ck_state->lr_decay_style);
    t->sched.max_lr = ck_state->lr;
    t->sched.min_lr = ck_state->min_lr;
    t->sched.init_lr = ck_state->lr_warmup_init;
    t->sched.style = cs;
    t->sched.warmup_steps = ck_state->lr_warmup_steps;
    t->sched.decay_steps = ck_state->lr_decay_steps;
    if (cs == TDM_LR_WSD && t->sched.wsd_decay_steps == 0) { /* not in the state, as in Megatron's */
        if (a->lr_wsd_decay_iters <= 0 && a->lr_wsd_decay_samples <= 0)
            return tdm_errorf(err,
                              "--use-checkpoint-opt_param-scheduler: %s decays by WSD, whose final decay "
                              "checkpoints do not record: give it with --lr-wsd-decay-%s N",
                              ck_dir, by_samples ? "samples" : "iters");
        tdm_wsd_style ws = TDM_WSD_EXPONENTIAL;
        tdm_wsd_style_parse(a->lr_wsd_decay_style, &ws);
        if (tdm_lr_scheduler_set_wsd(&t->sched, ws, by_samples ? a->lr_wsd_decay_samples : a->lr_wsd_decay_iters,
                                     by_samples ? 1 : a->global_batch_size, err) != 0)
            return -1;
    }
    if (tdm_lr_scheduler_check(&t->sched, err) != 0) /* the file is not checksummed: hand-edited */
        return tdm_error_prefix(err, "--use-checkpoint-opt_param-scheduler: %s/trainer_state.json", ck_dir);
    if (ck_state->has_wd_schedule) { /* older checkpoints: the flags' weight decay */
        tdm_wd_style cws;
        if (tdm_wd_style_parse(ck_state->wd_incr_style, &cws) != 0)
            return tdm_errorf(err, "--load %s: unknown weight decay increment style '%s'", a->load,
                              ck_state->wd_incr_style);
        if (tdm_lr_scheduler_set_wd(&t->sched, cws, ck_state->start_wd, ck_state->end_wd, ck_state->wd_incr_steps,
                                    err) != 0)
            return tdm_error_prefix(err, "--use-checkpoint-opt_param-scheduler: %s/trainer_state.json", ck_dir);
    }
    char wd[160] = "; weight decay of the flags (the checkpoint records none)";
    if (ck_state->has_wd_schedule)
        snprintf(wd, sizeof wd, "; weight decay %s from %g to %g over %lld samples", ck_state->wd_incr_style,
                 ck_state->start_wd, ck_state->end_wd, (long long)ck_state->wd_incr_steps);
    tdm_log_info("learning-rate schedule of the checkpoint (--use-checkpoint-opt_param-scheduler): peak %g, "
                 "floor %g, %s decay over %lld samples after %g of warm-up%s",
                 ck_state->lr, ck_state->min_lr, ck_state->lr_decay_style, (long long)ck_state->lr_decay_steps,
                 ck_state->lr_warmup_steps, wd);
    return 0;
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
int tdm_train__same_checkpoint_everywhere(trainer *t, tdm_error *err) {
    const int64_t mine[2] = {(int64_t)t->ck_hash, t->ck_iteration};
    int64_t root[2] = {mine[0], mine[1]}, other[2] = {mine[0], mine[1]};
    tdm_bcast_bounded(root, 2, MPI_INT64_T, 0, t->comm, t->timeout_ns, "checkpoint agreement");
    int first = tdm_first_failed_rank_bounded(root[0] == mine[0] && root[1] == mine[1], t->comm, NULL, t->timeout_ns,
                                              "checkpoint agreement");
    if (first == t->dp) return 0;
    tdm_bcast_bounded(other, 2, MPI_INT64_T, first, t->comm, t->timeout_ns, "checkpoint agreement");
    t->res->all_ranks_failed = 1;
    t->res->failed_rank = 0;
    char a[64], b[64];
    describe_checkpoint(root[1], 0, a, sizeof a);
    describe_checkpoint(other[1], other[1] == root[1], b, sizeof b);
    return tdm_errorf(err,
                      "--load %s: rank %d read %s there, rank 0 %s: every rank must read the same checkpoint "
                      "(rank 0 alone writes --save: on node-local disks only its node has them)",
                      t->a->load, first, b, a);
}

/* Collective, after the ranks agreed that they loaded the same checkpoint: every block of
 * optimizer.safetensors that no rank's shard read is verified by one rank (block j by rank
 * j mod dp), so that the whole file is checked once and each rank reads about 1/dp of it. An
 * older checkpoint, without block checksums, is verified whole on every rank. Rank 0 logs
 * what it read. */
int tdm_train__verify_optimizer_load(trainer *t, tdm_error *err) {
    if (!t->has_pending) return 0;
    tdm_ckpt *ck = &t->pending;
    const unsigned char *verified;
    int64_t nb = tdm_ckpt_optimizer_blocks(ck, &verified);
    unsigned char *want = NULL;
    if (nb > 0) {
        want = tdm_xmalloc((size_t)nb);
        memcpy(want, verified, (size_t)nb);
        tdm_allreduce_bounded(want, (int)nb, MPI_UNSIGNED_CHAR, MPI_MAX, t->comm, t->timeout_ns,
                              "checkpoint verification");
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
