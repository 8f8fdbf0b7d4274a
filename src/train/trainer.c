/* trainer.c - the training loop and one step (see trainer.h for the step, in order; the set-up,
 * resume, logging, validation and saving are their own files, trainer_internal.h). */
#include "train/trainer.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/log.h"
#include "data/image.h"
#include "distributed/agree.h"
#include "distributed/ddp.h"
#include "distributed/optimizer.h"
#include "model/qwen3vl.h"
#include "prof/profiler.h"
#include "train/feed.h"
#include "train/trainer_internal.h"

/* ------------------------------------------------------------------ signals */

static volatile sig_atomic_t g_stop_requested, g_stop_signal;
/* Which of stdout (bit 0) and stderr (bit 1) a SIGTERM/SIGINT turns non-blocking, see private_output_fds. */
static int g_unblock_on_stop;

/* A stop signal this soon after the first is the same stop: one Ctrl-C often arrives twice, from the terminal
 * (to the whole process group) and from a launcher that forwards it (mpirun, srun, GNU timeout, which signals
 * the child and then its group). Only a later one means the user will not wait for the step. */
#define STOP_REPEAT_GRACE_NS 2000000000LL
static struct timespec g_first_stop; /* when g_stop_signal was set */

static void on_signal(int sig) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe */
    if (g_stop_requested) {
        const long long since =
            (long long)(now.tv_sec - g_first_stop.tv_sec) * 1000000000LL + (now.tv_nsec - g_first_stop.tv_nsec);
        if (g_stop_signal && since < STOP_REPEAT_GRACE_NS) return;
        /* a second Ctrl-C / SIGTERM: the user does not want to wait for the step */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_first_stop = now;
    g_stop_signal = sig;
    g_stop_requested = 1; /* only a flag: the loop agrees on it at the end of the step */
    /* Open MPI's mpirun stops reading the ranks' output when it is interrupted, and a rank writing a log line
     * then blocks for good, holding the save up until the SIGKILL. From now on such a write fails instead (the
     * line is lost: nobody reads it) and a blocked one returns. fcntl is async-signal-safe. */
    if (sig != SIGUSR1)
        for (int fd = 1; fd <= 2; fd++)
            if (g_unblock_on_stop & (1 << (fd - 1))) {
                const int fl = fcntl(fd, F_GETFL);
                if (fl != -1) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
            }
}

/* The output fds that only this process writes and a launcher reads: a rank's stdout and stderr under mpirun,
 * srun or another launcher (its environment says so), when a pipe, a socket or a terminal other than our
 * controlling one (Open MPI gives each rank a pseudo-terminal of its own). Never the user's terminal or a file:
 * O_NONBLOCK on a description shared with the shell would outlive us. */
static int private_output_fds(void) {
    static const char *const launched[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"};
    int any = 0, mask = 0;
    for (size_t i = 0; i < sizeof launched / sizeof launched[0]; i++) any |= getenv(launched[i]) != NULL;
    if (!any) return 0;
    struct stat ctty = {0};
    const int t = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
    const int have_ctty = t >= 0 && fstat(t, &ctty) == 0;
    if (t >= 0) close(t);
    for (int fd = 1; fd <= 2; fd++) {
        struct stat st;
        if (fstat(fd, &st) != 0) continue;
        const int ours = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) ||
                         (S_ISCHR(st.st_mode) && isatty(fd) && !(have_ctty && st.st_rdev == ctty.st_rdev));
        if (ours) mask |= 1 << (fd - 1);
    }
    return mask;
}

void tdm_train_install_signal_handlers(void) {
    g_unblock_on_stop = private_output_fds();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL); /* what Open MPI's mpirun forwards without killing the ranks (user-guide.md) */
    tdm_image_set_stop_flag(&g_stop_requested); /* a picture being decoded does not hold the stop up */
}

void tdm_train_request_stop(void) { g_stop_requested = 1; }

int tdm_train_stop_signal(void) { return g_stop_requested ? (g_stop_signal ? g_stop_signal : SIGTERM) : 0; }

int tdm_train__stop_asked(const trainer *t) {
    if (g_stop_requested) return TDM_STOP_SIGNAL;
    struct stat st;
    if (t->a->exit_signal_file[0] && stat(t->a->exit_signal_file, &st) == 0) return TDM_STOP_FILE;
    return 0;
}

const char *tdm_train__stop_reason(const trainer *t, int stop, char *buf, size_t cap) {
    if (stop == TDM_STOP_FILE) snprintf(buf, cap, "--exit-signal-file %s", t->a->exit_signal_file);
    else snprintf(buf, cap, "a signal");
    return buf;
}

void tdm_train_result_free(tdm_train_result *res) {
    free(res->records);
    res->records = NULL;
    res->n_steps = 0;
}

/* ------------------------------------------------------------------ state */

static void push_record(trainer *t, const tdm_step_record *r) {
    tdm_train_result *res = t->res;
    if (res->n_steps == t->cap_records) {
        t->cap_records = t->cap_records ? 2 * t->cap_records : 64;
        res->records = tdm_xrealloc(res->records, sizeof *res->records * (size_t)t->cap_records);
    }
    res->records[res->n_steps++] = *r;
}

int tdm_train__agree(trainer *t, int ok, tdm_error *err) {
    int n_failed;
    int first = tdm_first_failed_rank_bounded(ok, t->comm, &n_failed, t->timeout_ns, "agreement of the ranks");
    if (first == t->dp) return 0;
    t->res->all_ranks_failed = 1;
    t->res->failed_rank = first;
    t->res->failed_alone = n_failed < t->dp;
    if (ok) tdm_errorf(err, "rank %d failed (its message is printed there)", first);
    return -1;
}

uint64_t tdm_train__params_checksum(tdm_model *m) {
    tdm_param_table *pt = tdm_model_params(m);
    XXH3_state_t *s = XXH3_createState();
    XXH3_64bits_reset(s);
    for (int i = 0; i < pt->n; i++) tdm_param_hash_update(&pt->p[i], s); /* of the fp32 values, either storage */
    uint64_t h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return h;
}

/* ------------------------------------------------------------------ one step */

enum { STOP_SIGNAL = TDM_STOP_SIGNAL, STOP_DURATION = TDM_STOP_DURATION, STOP_FILE = TDM_STOP_FILE };

/* What this rank's micro-batches of one step added up to. */
typedef struct micro_sums {
    double loss_sum, tokens, flops; /* the loss summed over its tokens, their count, the model FLOPs */
    double wait_ms;                 /* waiting for the loader */
    uint64_t fingerprint;           /* XXH3 of the micro-batches' fingerprints, in order */
} micro_sums;

/* Forward and backward of this rank's micro-batches of iteration `it`; gradients accumulate. */
static int forward_backward(trainer *t, int64_t it, micro_sums *ms, tdm_error *err) {
    memset(ms, 0, sizeof *ms);
    XXH3_state_t *fps = XXH3_createState();
    XXH3_64bits_reset(fps);
    for (int k = 0; k < t->micro_per_step; k++) {
        const tdm_batch *b;
        uint64_t waited = 0;
        if (tdm_feed_next(t->feed, &b, &waited, err) != 0) {
            XXH3_freeState(fps);
            return -1;
        }
        ms->wait_ms += (double)waited / 1e6;
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
        ms->loss_sum += r.loss_sum;
        ms->tokens += (double)r.n_tokens;
        ms->flops += tdm_model_flops(t->model, b);
    }
    ms->fingerprint = XXH3_64bits_digest(fps);
    XXH3_freeState(fps);
    return 0;
}

/* The input fingerprint of the step: every rank's micro-batch hashes, in rank order. Collective. */
static uint64_t audit_fingerprint(trainer *t, uint64_t fp_local) {
    uint64_t *all = tdm_xmalloc(sizeof(uint64_t) * (size_t)t->dp);
    tdm_allgather_bounded(&fp_local, all, 1, MPI_UINT64_T, t->comm, t->timeout_ns, "input fingerprint audit");
    uint64_t h = XXH3_64bits(all, sizeof(uint64_t) * (size_t)t->dp);
    free(all);
    return h;
}

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
    uint64_t t_fb = tdm_now_ns();
    tdm_ddp_timer_start(t->ddp, TDM_TIMER_FORWARD_BACKWARD);
    tdm_ddp_zero_grad(t->ddp);
    micro_sums ms;
    if (forward_backward(t, it, &ms, err) != 0) return -1;
    uint64_t t_sync = tdm_now_ns();
    tdm_prof_begin(TDM_PROF_PHASE, 0, "grad sync", -1);
    int sync_rc = tdm_ddp_finish_grad_sync(t->ddp, err);
    tdm_prof_end(TDM_PROF_PHASE, 0);
    rec->grad_sync_ms = tdm_train__ms_since(t_sync);
    tdm_ddp_timer_stop(t->ddp, TDM_TIMER_FORWARD_BACKWARD);
    rec->fwd_bwd_ms = tdm_train__ms_since(t_fb) - ms.wait_ms;
    rec->data_wait_ms = ms.wait_ms;
    if (sync_rc != 0) {
        /* finish_grad_sync fails on every rank together (NaN/Inf, missing gradient) */
        t->res->all_ranks_failed = 1;
        t->res->failed_rank = 0;
        return -1;
    }

    /* one small collective, summed in rank order: loss sum, token count, model FLOPs, and the three
     * reasons to stop after this step (a signal; --exit-duration-in-mins, by any rank's clock;
     * --exit-signal-file, seen by any rank) */
    const int out_of_time =
        a->exit_duration_in_mins > 0 && (double)(tdm_now_ns() - t->start_ns) / 60e9 > a->exit_duration_in_mins;
    const int asked = tdm_train__stop_asked(t);
    double sums[6] = {ms.loss_sum,
                      ms.tokens,
                      ms.flops,
                      asked == STOP_SIGNAL ? 1.0 : 0.0,
                      out_of_time ? 1.0 : 0.0,
                      asked == STOP_FILE ? 1.0 : 0.0};
    if (tdm_ddp_sum_across_ranks(t->ddp, sums, 6, err) != 0) return -1;
    rec->tokens = (int64_t)sums[1];
    rec->loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
    rec->model_flops = sums[2];
    *stop = sums[3] > 0 ? STOP_SIGNAL : sums[5] > 0 ? STOP_FILE : sums[4] > 0 ? STOP_DURATION : 0;
    if (sums[1] <= 0 || !isfinite(rec->loss)) {
        t->res->all_ranks_failed = 1;
        t->res->failed_rank = 0;
        if (sums[1] <= 0)
            return tdm_errorf(err, "iteration %lld: the global batch has no tokens to train on (every label is -100)",
                              (long long)it);
        return tdm_errorf(err, "iteration %lld: the loss is %s (loss sum %g over %lld tokens, all ranks)",
                          (long long)it, isnan(rec->loss) ? "NaN" : "infinite", sums[0], (long long)sums[1]);
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
    rec->optimizer_ms = tdm_train__ms_since(t_opt);
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
    /* beside compute: its polls while compute waited on it took no core from compute */
    rec->comm_thread_cpu_ms = ((double)(st1.comm_thread_cpu_ns - st0.comm_thread_cpu_ns) -
                               (double)(st1.comm_thread_wait_poll_cpu_ns - st0.comm_thread_wait_poll_cpu_ns)) /
                              1e6;
    if (rec->comm_thread_cpu_ms < 0) rec->comm_thread_cpu_ms = 0;
    if (a->audit_fingerprints) rec->fingerprint = audit_fingerprint(t, ms.fingerprint);
    tdm_prof_step_end(it);
    rec->step_ms = tdm_train__ms_since(t_step);
    rec->compute_cpu_ms = (double)(tdm_thread_cpu_ns() - cpu0) / 1e6;
    rec->cpu_ms = (double)(tdm_process_cpu_ns() - pcpu0) / 1e6;
    return 0;
}

/* ------------------------------------------------------------------ the run */

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
    return tdm_errorf(err,
                      "iteration %lld: the weights differ between data-parallel ranks, first at %s "
                      "(--check-weight-hash-across-dp-replicas-interval): the ranks no longer train one model",
                      (long long)t->iteration, pt->p[first].name);
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
    if (!p ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &ticks) != 1)
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
    tdm_ckpt_unlock_save_dir(t->save_lock);
    if (t->comm != MPI_COMM_NULL) MPI_Comm_free(&t->comm);
}

/* The line that says why the loop ends early, and res->interrupted. */
static void note_exit(trainer *t, int stop) {
    const tdm_train_args *a = t->a;
    t->res->interrupted = t->iteration < a->train_iters; /* an exit at the last iteration is the end */
    char why[TDM_ARGS_PATH_MAX + 64] = "exiting (--exit-interval)";
    if (stop == STOP_SIGNAL) snprintf(why, sizeof why, "stopping on a signal");
    if (stop == STOP_FILE) { /* removed, so that the next run from the checkpoint does not stop at once */
        snprintf(why, sizeof why, "stopping on --exit-signal-file %s (removed)", a->exit_signal_file);
        unlink(a->exit_signal_file);
    }
    if (stop == STOP_DURATION) /* Megatron: 'exiting program after N minutes' */
        snprintf(why, sizeof why, "exiting (--exit-duration-in-mins) after %.4f minutes",
                 (double)(tdm_now_ns() - t->start_ns) / 60e9);
    tdm_log_info("%s at iteration %lld%s", why, (long long)t->iteration,
                 a->save[0] ? " after saving a checkpoint" : "");
}

/* The steps up to --train-iters (or a stop), each logged, evaluated, checked and saved at its
 * intervals; then the last checkpoint and evaluation when those did not fall on the last step. */
static int train_loop(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tdm_train_result *res = t->res;
    tdm_log_info("training from iteration %lld to %lld: %d micro-batches of %d samples per rank per step, %d ranks",
                 (long long)t->iteration, (long long)a->train_iters, t->micro_per_step, a->micro_batch_size, t->dp);
    interval iv;
    memset(&iv, 0, sizeof iv);
    uint64_t last_progress = tdm_now_ns();
    int saved_last = 0;
    while (t->iteration < a->train_iters) {
        tdm_step_record rec;
        int stop = 0;
        if (train_step(t, &rec, &stop, err) != 0) return -1;
        push_record(t, &rec);
        saved_last = 0;
        tdm_train__log_iteration(t, &iv, &rec); /* every rank: the timers report in it is collective */
        if (t->rank == 0) tdm_train__log_step(t, &rec, &last_progress, err);
        if (t->valid_feed && t->iteration % a->eval_interval == 0) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "iteration %lld", (long long)t->iteration);
            if (tdm_train__evaluate(t, prefix, err) != 0) return -1;
            if (t->eval_stopped && !stop) stop = t->eval_stopped; /* a stop asked for during the validation */
        }
        if (a->check_weight_hash_across_dp_replicas_interval > 0 &&
            t->iteration % a->check_weight_hash_across_dp_replicas_interval == 0 && weights_agree(t, err) != 0)
            return -1;
        int exit_now = stop || (a->exit_interval > 0 && t->iteration % a->exit_interval == 0);
        if (a->save[0] && ((a->save_interval > 0 && t->iteration % a->save_interval == 0) || exit_now)) {
            if (tdm_train__save_checkpoint(t, err) != 0) return -1;
            saved_last = 1;
        }
        if (exit_now) {
            note_exit(t, stop);
            break;
        }
    }
    if (a->save[0] && !saved_last && t->iteration > res->first_iteration)
        if (tdm_train__save_checkpoint(t, err) != 0) return -1;
    /* Megatron also evaluates when training ends (not when it was stopped early); here only if
     * the last iteration was not an evaluation point already */
    if (t->valid_feed && !res->interrupted && t->iteration > res->first_iteration &&
        t->iteration % a->eval_interval != 0) {
        char prefix[96];
        snprintf(prefix, sizeof prefix, "iteration %lld on validation set", (long long)t->iteration);
        if (tdm_train__evaluate(t, prefix, err) != 0) return -1;
    }
    return 0;
}

int tdm_train_run(const tdm_train_args *a, MPI_Comm comm, tdm_train_result *res, tdm_error *err) {
    memset(res, 0, sizeof *res);
    res->failed_rank = -1;
    trainer T, *t = &T;
    memset(t, 0, sizeof *t);
    t->res = res;
    t->ck_iteration = -1;
    t->save_lock = -1;
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
    if (tdm_train__agree_on_flags(t, err) != 0) goto out;
    /* one job per --save folder, and no checkpoints replaced unasked */
    if (tdm_train__claim_save_dir(t, err) != 0) goto out;
    /* 1. flags, model, data: each rank on its own, then agree */
    if (tdm_train__setup_data(t, err) != 0) goto out;
    /* 2. data-parallel layer (collective: binds the parameter storage), weights, state */
    if (tdm_train__setup_state(t, err) != 0) goto out;
    if (tdm_train__agree_on_start(t, err) != 0) goto out;
    /* 3. profiler session (its own tool config) */
    if (tdm_train__start_profiler(t, err) != 0) goto out;
    /* 4. the loop */
    if (train_loop(t, err) != 0) goto out;

    if (t->profiling) {
        t->profiling = 0;
        if (tdm_prof_session_finish(t->comm, err) != 0) goto out;
    }
    tdm_ddp_wait_params(t->ddp);
    res->final_iteration = t->iteration;
    res->consumed_samples = t->consumed;
    res->params_checksum = tdm_train__params_checksum(t->model);
    rc = 0;
out:
    if (t->profiling) {
        tdm_error e;
        tdm_prof_session_finish(t->comm, &e);
    }
    teardown(t);
    return rc;
}
