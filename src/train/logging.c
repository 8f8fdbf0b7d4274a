/* logging.c - what a training run prints and records: the iteration lines, memory, timers,
 * metrics.jsonl, progress and TensorBoard scalars (trainer_internal.h). */
#include "train/trainer_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "distributed/agree.h"
#include "distributed/ddp.h"
#include "distributed/timers.h"
#include "train/log.h"
#include "train/tensorboard.h"

/* ------------------------------------------------------------------ TensorBoard */

/* Rank 0, --tensorboard-dir: scalars under Megatron's tags, each also "TAG vs samples" over the
 * consumed samples, as its training_log writes them. A write error stops the event file with
 * a warning; training goes on. */
void tdm_train__tb_scalars(trainer *t, int n, const char *const *tags, const double *values, int64_t iteration) {
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
    tdm_train__tb_scalars(t, n, tags, v, r->iteration);
    if (a->log_world_size_to_tensorboard) {
        const char *ws[1] = {"world-size"};
        double d = t->dp;
        tdm_train__tb_scalars(t, 1, ws, &d, r->iteration);
    }
}

/* ------------------------------------------------------------------ does data parallelism pay? */

int openblas_get_num_threads(void);

/* At the first iteration line after the run's first step, in a job of 2 ranks or more: the communication a step exposes (the compute
 * thread's waits on the gradient sync and the parameter all-gather, plus the communication thread's CPU when
 * the ranks' threads fill this host's cores) against what the extra ranks save (the step's compute x
 * (1 - 1/dp)). When it costs more, one warning names the better configurations (docs/user-guide.md,
 * "When more ranks are slower"). Collective: every rank calls it at the same iteration line.
 * TANDEM_DP_COST_SCALE multiplies the measured communication (a testing hook: 0 never warns, a large value
 * always does). */
static void check_dp_pays(trainer *t) {
    const tdm_train_args *a = t->a;
    const int n = t->dp_cost.n;
    if (t->dp < 2 || n < 1) return; /* the same on every rank */
    t->dp_checked = 1;
    const int threads = openblas_get_num_threads();
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int shared = t->mpi.one_host && (long)t->dp * (threads > 0 ? threads : 1) >= cores;
    double v[3] = {t->dp_cost.step_ms / n, t->dp_cost.exposed_ms / n, shared ? t->dp_cost.comm_cpu_ms / n : 0};
    tdm_allreduce_bounded(v, 3, MPI_DOUBLE, MPI_MAX, t->comm, t->timeout_ns, "data-parallel cost check");
    double scale = 1;
    const char *sv = getenv("TANDEM_DP_COST_SCALE");
    if (sv) {
        char *end;
        double x = strtod(sv, &end);
        if (end != sv && *end == 0 && isfinite(x) && x >= 0) scale = x;
    }
    const double step = v[0], comm = (v[1] + v[2]) * scale;
    double compute = step - (v[1] + v[2]);
    if (compute < 0) compute = 0;
    const double saved = compute * (1.0 - 1.0 / t->dp);
    if (t->rank != 0 || comm <= saved) return;
    const char *other = t->mpi.kind == TDM_MPI_OPEN_MPI ? "MPICH (make MPI=mpich; mpirun.mpich)"
                        : t->mpi.kind == TDM_MPI_MPICH  ? "Open MPI (make; mpirun.openmpi)"
                                                        : "another MPI library";
    tdm_strbuf mpi;
    tdm_sb_init(&mpi);
    tdm_mpi_info_format(&t->mpi, &mpi);
    const int th = threads > 0 ? threads : 1;
    tdm_strbuf w;
    tdm_sb_init(&w);
    tdm_sb_printf(&w,
                  "data parallelism costs more than it saves here: a step exposes %.1f ms of communication (waits "
                  "%.1f ms%s), more than the %.1f ms that %d ranks save of its %.1f ms of compute (x (1 - 1/%d)); "
                  "transport: %s. Better: (1) 1 rank with %d BLAS threads (OPENBLAS_NUM_THREADS=%d) and the same "
                  "--global-batch-size: about %.0f ms per step instead of %.0f; (2) %s, whose transport may cost "
                  "less (tandem doctor measures it); (3) more samples per rank per step (--micro-batch-size %d, or "
                  "a larger --global-batch-size): the communication stays about %.0f ms per step, and twice the "
                  "samples would take about %.0f ms",
                  comm, v[1] * scale, shared ? ", plus the communication thread's CPU on shared cores" : "", saved,
                  t->dp, compute, t->dp, mpi.data, th * t->dp, th * t->dp, compute * (2.0 - 1.0 / t->dp), step, other,
                  a->micro_batch_size * 2, comm, 2 * compute + comm);
    tdm_sb_free(&mpi);
    snprintf(t->res->dp_warning, sizeof t->res->dp_warning, "%s", w.data);
    if (!tdm_log_quiet()) tdm_log_warn("%s", w.data); /* tandem ab prints its inner runs' once */
    tdm_sb_free(&w);
}

/* ------------------------------------------------------------------ iteration lines */

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

void tdm_train__log_iteration(trainer *t, interval *iv, const tdm_step_record *r) {
    iv->n++;
    iv->loss_sum += r->loss;
    iv->ms_sum += r->step_ms;
    iv->flops_sum += r->model_flops;
    iv->skipped += r->skipped;
    iv->nan += r->nan;
    if (r->iteration > t->res->first_iteration + 1) { /* for check_dp_pays */
        t->dp_cost.n++;
        t->dp_cost.step_ms += r->step_ms;
        t->dp_cost.exposed_ms += r->grad_sync_ms + r->param_gather_ms;
        t->dp_cost.comm_cpu_ms += r->comm_thread_cpu_ms;
    }
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
    if (!t->memory_reported) {   /* Megatron's report_memory after the first line; host memory here */
        t->memory_reported = 1;
        double now, peak;
        resident_mib(&now, &peak);
        if (now >= 0 && peak >= 0)
            tdm_log_info("[Rank %d] (after %lld iterations) memory (MB) | resident: %.1f | max resident: %.1f", t->rank,
                         (long long)r->iteration, now, peak);
    }
    if (t->a->timing_log_level >= 1) {
        tdm_timing tm;
        tdm_error e;
        if (tdm_ddp_timers_report(t->ddp, iv->n, &tm, &e) == 0) {
            tdm_sb_clear(&sb);
            const char *o = t->a->timing_log_option;
            tdm_timing_format_option(&tm,
                                     !strcmp(o, "max")   ? TDM_TIMING_MAX
                                     : !strcmp(o, "all") ? TDM_TIMING_ALL
                                                         : TDM_TIMING_MINMAX,
                                     &sb);
            if (sb.len && sb.data[sb.len - 1] == '\n') sb.data[--sb.len] = 0;
            tdm_log_info("%s", sb.data);
        }
    }
    tdm_sb_free(&sb);
    if (!t->dp_checked) check_dp_pays(t);
    if (t->a->log_timers_to_tensorboard) { /* Megatron: seconds per iteration over the log interval */
        const char *tag[2] = {"iteration-time", "throughput"};
        double v[2] = {iv->ms_sum / iv->n / 1000.0, l.throughput};
        tdm_train__tb_scalars(t, l.has_throughput ? 2 : 1, tag, v, r->iteration);
    }
    memset(iv, 0, sizeof *iv);
}

void tdm_train__log_step(trainer *t, const tdm_step_record *rec, uint64_t *last_progress, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tb_step(t, rec);
    if (t->metrics && tdm_metrics_write(t->metrics, rec, a->audit_fingerprints, err) != 0) {
        tdm_log_warn("%s (metrics stop here)", err->msg);
        tdm_metrics_close(t->metrics);
        t->metrics = NULL;
    }
    tdm_step_window_push(&t->steps, rec->step_ms);
    if (tdm_now_ns() - *last_progress > 10ull * 1000000000ull) {
        tdm_strbuf sb;
        tdm_sb_init(&sb);
        tdm_format_progress(&sb, t->iteration, a->train_iters, tdm_step_window_mean(&t->steps));
        fprintf(stderr, "%s\n", sb.data);
        tdm_sb_free(&sb);
        *last_progress = tdm_now_ns();
    }
}
