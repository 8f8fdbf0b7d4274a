/* ab.h - the A/B protocol of the practice, as one call (`tandem ab`).
 *
 *   mpirun -np N tandem ab --baseline "FLAGS" --candidate "FLAGS" [common train flags]
 *                          --steps 200 --window 21:200 --repeats R --out DIR
 *
 * What tdm_ab_run does, on every rank of `comm`:
 *   1. Parses common + baseline flags and common + candidate flags into two
 *      tdm_train_args (the trainer's parser), validates both, and diffs them: the
 *      names that differ and the ones that are identical.
 *   2. Timing runs, interleaved A B A B ... `repeats` times each: --train-iters = steps,
 *      profiling off, fingerprint audit off, no checkpoint saving, same seed / --load,
 *      so both sides start from the same weights and see the same samples in the
 *      same order. Step time per step = the slowest rank's step (max over ranks).
 *   3. One audit run per side with --audit-fingerprints (same steps): the per-step input
 *      fingerprints must be equal on both sides.
 *   4. One short profiled run per side (level 1 over `profile_steps` steps after the
 *      warm-up): communication, hidden / exposed, overlap efficiency (prof/analysis.h).
 *   5. Statistics over the window (pooled over repeats): mean and median step time,
 *      samples/s = samples in the window / time of the window, relative changes, a
 *      95% bootstrap interval (blocks of steps within each repeat, the sides paired by
 *      repeat and iteration: stats.h); the precision check step by step between
 *      the first timing run of each side; writes the report directory (report.c).
 *
 * Progress lines go through tdm_log_info (rank 0); the trainer's own log is silenced
 * during inner runs. The result table is returned as text for the caller to print.
 */
#ifndef TDM_TRAIN_AB_H
#define TDM_TRAIN_AB_H

#include <mpi.h>
#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "train/args.h"
#include "train/hosts.h"
#include "ab/stats.h"
#include "train/trainer.h"

typedef struct tdm_ab_options {
    const char *baseline_flags; /* shell-like string, may be "" */
    const char *candidate_flags;
    int common_argc; /* train flags shared by both sides */
    char **common_argv;
    int64_t steps;                /* optimizer steps per timing run */
    int64_t window_lo, window_hi; /* 1-based, inclusive */
    int window_given;             /* --window was given: a window from step 1 is taken (with a warning) */
    int aa;                       /* --aa: identical sides on purpose (an A/A run); refused otherwise */
    int repeats;                  /* timing runs per side */
    int64_t audit_steps;          /* steps of the fingerprint audit runs (0 = skip the audit) */
    int profile_steps;            /* steps profiled per side (0 = no profiled run) */
    int profile_level;            /* 0..2, default 1 */
    uint64_t bootstrap_seed;
    int bootstrap_resamples;
    char out[1024];           /* report directory */
    const char *command_line; /* the exact command, for "reproduce" (may be NULL) */
} tdm_ab_options;

/* Defaults: steps 200, window 21:200, repeats 1, audit on, 3 profiled steps at level 1,
 * 2000 resamples, out "ab-report". */
void tdm_ab_options_default(tdm_ab_options *o);

/* The training flags the protocol sets itself for every run ("--train-iters", "--save", ...),
 * with what sets each instead; {NULL, NULL} ends the list. Refused among the common flags
 * (cmd_ab.c) and inside --baseline / --candidate (tdm_ab_run): taken silently they would mislead. */
extern const char *const tdm_ab_protocol_flags[][2];

/* Parses "21:200" into lo, hi (1-based, inclusive). */
int tdm_ab_parse_window(const char *s, int64_t *lo, int64_t *hi, tdm_error *err);

/* How a default window was chosen (tdm_ab_default_window). */
typedef enum tdm_ab_window_rule {
    TDM_AB_WINDOW_PRACTICE = 0, /* the practice's 21:200, clipped to what the runs hold */
    TDM_AB_WINDOW_WARM_UP,      /* after the warm-up steps a run names (MindSpeed's warm_up) */
    TDM_AB_WINDOW_TENTH,        /* after the first 10%, taken as warm-up */
} tdm_ab_window_rule;

/* The default window over the iterations held_lo..held_hi (1-based, inclusive, lo <= hi) that logged
 * runs hold: the practice's 21:200 clipped to them; where that holds nothing (runs shorter than its
 * warm-up), what follows the `warm_up` steps a run names (0: none), else all but the first 10%. */
tdm_ab_window_rule tdm_ab_default_window(int64_t held_lo, int64_t held_hi, int64_t warm_up, int64_t *lo, int64_t *hi);

/* One side's measurements. */
typedef struct tdm_ab_side {
    const char *label; /* "baseline" / "candidate" */
    tdm_train_args args;
    char ddp_config_line[1024];
    int repeats;
    int64_t steps;
    int64_t start_iteration;      /* the --load checkpoint's iteration (0 without one, or with --finetune):
                                      every run trains steps iterations from there; records count from 1 */
    tdm_step_record *records;     /* [repeats * steps], step_ms = max over ranks */
    uint64_t *audit_fingerprints; /* [audit_steps], NULL when no audit */
    int64_t audit_steps;
    /* window statistics, pooled over repeats */
    double mean_step_ms, median_step_ms, stddev_step_ms, samples_per_s;
    double model_gflops_per_rank; /* model FLOPs of the window's steps / their time / ranks (Megatron's throughput) */
    double *repeat_mean_ms;       /* [repeats] */
    /* CPU per window step, mean over ranks (timing runs): the whole process, the compute
     * thread, the communication thread (NaN with inline progress: no thread), and the
     * process's CPU over the step time: how many cores one rank kept busy */
    double cpu_ms, compute_cpu_ms, comm_cpu_ms, cores_busy;
    int64_t window_samples;
    int nan_iterations, skipped_iterations;
    /* profiled run (means over profiled steps and ranks); NaN when not profiled */
    double comm_ms, hidden_comm_ms, exposed_comm_ms, compute_ms, data_wait_ms, ideal_step_ms, prof_step_ms;
    double last_bucket_comm_ms; /* the last gradient collective, which cannot overlap */
    double overlap_efficiency;
    /* the same bound and efficiency with each collective against the compute its schedule
     * lets it overlap (prof/analysis.h: sched) */
    double sched_ideal_step_ms, sched_overlap_efficiency;
    char trace_dir[1100];
} tdm_ab_side;

/* The host around one timing run (rank 0's machine): the 1-minute load average before and
 * after it, the CPU other processes took and the CPU steal over it (docs/ab-protocol.md, "Load"). */
typedef struct tdm_ab_load {
    double load_before, load_after; /* /proc/loadavg, first field; NaN when unreadable */
    double others_pct; /* CPU time of processes other than this job's ranks on that machine, % of all; NaN */
    double steal_pct;  /* steal delta of /proc/stat's cpu line over the run, % of all CPU time; NaN */
    int under_load;    /* flagged: tdm_ab_load_judge */
} tdm_ab_load;

/* A reading of the host: the load average and the cpu line's busy (user, nice, system), steal and total ticks. */
typedef struct tdm_ab_host_sample {
    double load1; /* NaN when unreadable */
    unsigned long long busy, steal, total;
    int have_stat;
} tdm_ab_host_sample;

/* Reads loadavg_path (/proc/loadavg) and stat_path (/proc/stat); what cannot be read stays NaN / 0. */
void tdm_ab_host_sample_read(const char *loadavg_path, const char *stat_path, tdm_ab_host_sample *s);

/* A run under load: processes other than this job's ranks on that machine took more than TDM_AB_OTHERS_PCT
 * of its CPU time over the run (its busy ticks less job_cpu_s, the CPU time of the job's ranks there, at
 * ticks_per_s), or steal above TDM_AB_STEAL_PCT. The load average is recorded, not judged: it counts the job's
 * own threads (a communication thread, the library's), which it cannot tell from other work. */
#define TDM_AB_OTHERS_PCT 10.0
#define TDM_AB_STEAL_PCT  5.0
void tdm_ab_load_judge(const tdm_ab_host_sample *before, const tdm_ab_host_sample *after, double job_cpu_s,
                       double ticks_per_s, tdm_ab_load *out);

typedef struct tdm_ab_result {
    tdm_ab_side side[2]; /* 0 baseline, 1 candidate */
    /* configuration diff: names of differing and identical arguments, "name: a -> b" */
    char **diff_lines;
    int n_diff;
    char **same_lines; /* "name = value" */
    int n_same;
    tdm_stats_ci step_time_ci; /* relative change of mean step time, % */
    tdm_stats_ci runs_ci;      /* the same between whole runs: paired repeats, t interval (stats.h) */
    int runs_ci_pairs;         /* the pairs behind runs_ci; 0 when there is none (fewer than 3 repeats) */
    int ci_paired;             /* the interval's resamples pair repeat r's steps of both sides */
    int ci_block;              /* its block length, in steps (of the first repeat's window) */
    double step_time_change_pct, median_change_pct, throughput_change_pct;
    char noise_sentence[1024];
    /* precision check (first timing run of each side, every step) */
    int lr_equal, consumed_samples_equal, global_batch_equal, loss_bitwise_equal, grad_norm_bitwise_equal;
    int all_finite;
    int64_t first_loss_diff_step, first_grad_norm_diff_step; /* 0 when equal */
    double max_rel_loss_dev, max_rel_grad_norm_dev;
    int repeats_bitwise_equal;           /* every repeat of a side gave the same losses and grad norms */
    int64_t profile_first, profile_last; /* the steps the profiled runs recorded (counted as the window) */
    int fingerprints_equal;              /* -1 when not audited */
    int64_t first_fingerprint_diff_step;
    int nan_iterations, skipped_iterations; /* both sides, all runs */
    int world;
    int cores_online; /* rank 0's machine: sysconf(_SC_NPROCESSORS_ONLN) */
    tdm_hosts hosts;  /* every rank's processor, compiler target and OpenBLAS kernels */
    double wall_s;
    tdm_ab_load *load;   /* [2 * repeats]: timing run k of side s at 2k + s; NULL when not recorded */
    int n_load;          /* the timing runs that finished (a partial report has fewer) */
    int local_ranks;     /* ranks of this job on rank 0's machine (its kernel: same /proc/sys/kernel/random/boot_id) */
    int runs_under_load; /* of the n_load, flagged under_load */
    int partial;         /* stopped by a signal: the report holds only the runs that finished */
    int stop_signal;     /* that signal (SIGINT, SIGTERM), 0 when not stopped */
    int stopped_alone;   /* the signal ended this rank's run mid-step: the others may be blocked in a
                                      collective, so the caller must end the job with MPI_Abort (world > 1) */
    char **finished;     /* the runs that finished, in order: "baseline timing 1", "candidate audit" */
    int n_finished;
    int ddp_line_confirms;   /* each differing argument shown in the DDP config lines has the
                                      side's value there: 1 yes, 0 no, -1 none of them is shown */
    int run_failed_together; /* a run failed on every rank at once (a bad sample, a NaN): the caller may
                                      print err on run_failed_rank and exit normally, as after a setup failure */
    int run_failed_rank;
    int setup_failed;            /* the failure came before any run: every rank returns it */
    int setup_failed_rank;       /* the lowest rank whose flags were refused (err holds why there) */
    int setup_failed_everywhere; /* every rank refused them (one command line: rank 0 says why) */
} tdm_ab_result;

/* Runs the protocol (collective over comm). On success, rank 0 has written the report
 * directory and `table` (if non-NULL) holds the terminal table. Returns -1 with err
 * on any failure (a bad flag, a failing run, an unwritable directory); 1 when a signal
 * (SIGINT, SIGTERM: tdm_train_install_signal_handlers) stopped it after setup: the runs
 * that finished are in a partial report (res->partial, res->stop_signal), written as on
 * success (res->stopped_alone: see there). */
int tdm_ab_run(const tdm_ab_options *o, MPI_Comm comm, tdm_ab_result *res, tdm_strbuf *table, tdm_error *err);
void tdm_ab_result_free(tdm_ab_result *res);

/* Step 5 alone: from side[].records (repeats x steps each) and the audit/profile fields
 * already filled, computes the window statistics, the interval, the noise sentence and
 * the precision check. Pure; tdm_ab_run calls it, tests call it on made-up records. */
void tdm_ab_compute(const tdm_ab_options *o, tdm_ab_result *res);

/* report.c: the terminal table, and the report directory (rank 0 only). */
void tdm_ab_format_table(const tdm_ab_options *o, const tdm_ab_result *r, tdm_strbuf *sb);
int tdm_ab_write_report(const tdm_ab_options *o, const tdm_ab_result *r, tdm_error *err);

#endif
