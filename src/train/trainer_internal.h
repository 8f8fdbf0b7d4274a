/* trainer_internal.h - the trainer's state and the steps its files share. Not a public header.
 *
 * tdm_train_run (trainer.c) runs one job; its parts, by file:
 *   setup.c         flags, model, data, the data-parallel layer, weights, schedule, the run's
 *                   outputs, and the ranks' agreement that they start alike
 *   resume.c        --load: the checkpoint's weights, position, optimizer state and schedule
 *   trainer.c       the loop and one step
 *   logging.c       the iteration lines, memory, TensorBoard scalars
 *   validation.c    the evaluations of --valid-data-path
 *   trainer_save.c  --save's checkpoints
 */
#ifndef TDM_TRAIN_TRAINER_INTERNAL_H
#define TDM_TRAIN_TRAINER_INTERNAL_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "core/clock.h"
#include "core/error.h"
#include "distributed/ddp.h"
#include "distributed/optimizer.h"
#include "distributed/probe.h"
#include "model/config.h"
#include "model/qwen3vl.h"
#include "train/args.h"
#include "train/checkpoint.h"
#include "train/feed.h"
#include "train/log.h"
#include "train/scheduler.h"
#include "train/tensorboard.h"
#include "train/trainer.h"

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
    tdm_tb_writer *tb; /* rank 0 with --tensorboard-dir */
    int profiling;
    int64_t iteration;    /* completed iterations */
    int64_t consumed;     /* samples consumed */
    int64_t ck_iteration; /* iteration of the checkpoint --load read, -1: none */
    uint64_t ck_hash;     /* its trainer_state.json's XXH3 (0: none) */
    int micro_per_step;
    tdm_train_result *res;
    int cap_records;
    char recompute_note[160]; /* the activation log line's tail: what is recomputed */
    uint64_t start_ns;        /* when the earliest rank's process started: --exit-duration-in-mins counts from here */
    uint64_t timeout_ns;      /* --distributed-timeout-minutes, for the trainer's own collectives too (0: none) */
    int memory_reported;      /* the memory line follows the first iteration line only */
    tdm_ckpt pending;         /* the checkpoint whose Adam state was read but not yet vouched for */
    int has_pending;
    tdm_step_window steps; /* rank 0: the recent step times, for the progress line's ETA */
    int eval_stopped;      /* the last evaluation ended early on an agreed stop: TDM_STOP_*, 0: it did not */
    int save_lock;         /* rank 0: the flock()ed <save>/.tandem.lock, -1: none */
    tdm_mpi_info mpi;      /* the MPI library and transport, and what a quick probe measured at start */
    tdm_coll_cost probe;   /* (mb 0: one rank, nothing measured) */
    int dp_checked;        /* an iteration line has weighed communication against compute */
    struct {               /* the steps since the run's first (which pays for first touches), until then */
        int n;
        double step_ms, exposed_ms, comm_cpu_ms; /* sums: step, collective waits, communication thread CPU */
    } dp_cost;
} trainer;

/* The steps since the last iteration line. */
typedef struct interval {
    int n;
    double loss_sum, ms_sum, flops_sum;
    double exposed_ms_sum;  /* waits on the data-parallel collectives (grad sync, parameter all-gather) */
    double comm_cpu_ms_sum; /* the communication thread's CPU */
    int skipped, nan;
} interval;

static inline double tdm_train__ms_since(uint64_t t0) { return (double)(tdm_now_ns() - t0) / 1e6; }

/* ---- trainer.c */

/* Collective: every rank says whether its part succeeded; -1 on every rank when one failed (its
 * own message stays on that rank, the others' names it), with res's failure fields set. */
int tdm_train__agree(trainer *t, int ok, tdm_error *err);
/* XXH3 of every parameter's values, in table order. */
uint64_t tdm_train__params_checksum(tdm_model *m);
/* Why this rank was asked to stop: TDM_STOP_SIGNAL (SIGTERM/SIGINT/SIGUSR1, tdm_train_request_stop),
 * TDM_STOP_FILE (--exit-signal-file exists), or 0. */
enum { TDM_STOP_SIGNAL = 1, TDM_STOP_DURATION = 2, TDM_STOP_FILE = 3 };
int tdm_train__stop_asked(const trainer *t);
/* The end of a stopped validation or run: "a signal" or "--exit-signal-file PATH". */
const char *tdm_train__stop_reason(const trainer *t, int stop, char *buf, size_t cap);

/* ---- setup.c: the start of a run, in tdm_train_run's order; each is collective and fails on
 * every rank alike */

/* 0. Every rank was started with the same flags; --exit-duration-in-mins' start agreed. */
int tdm_train__agree_on_flags(trainer *t, tdm_error *err);
/* 0. Rank 0 locks the --save folder and checks that it holds no checkpoints this run would
 * overwrite without --load of it or --overwrite-save; every rank fails with its sentence. */
int tdm_train__claim_save_dir(trainer *t, tdm_error *err);
/* 1. Flags, model, data: each rank on its own, then agree. */
int tdm_train__setup_data(trainer *t, tdm_error *err);
/* 2. The data-parallel layer, weights, state, activations and the run's output files. */
int tdm_train__setup_state(trainer *t, tdm_error *err);
/* 2. Every rank starts from the same checkpoint and weights; the data-parallel layer described. */
int tdm_train__agree_on_start(trainer *t, tdm_error *err);
/* 3. The profiler session of --profile-config. */
int tdm_train__start_profiler(trainer *t, tdm_error *err);

/* ---- resume.c */

/* --load: opens the checkpoint (*have_ck = 1), unless this is the first launch of the job's
 * --save folder. */
int tdm_train__open_checkpoint(trainer *t, tdm_ckpt *ck, int *have_ck, tdm_error *err);
/* The sampler continues at consumed / global batch: refuses a checkpoint whose consumed samples
 * that batch does not divide. */
int tdm_train__check_consumed(trainer *t, const tdm_ckpt *ck, tdm_error *err);
/* Not --finetune: the iteration, samples consumed and optimizer state of the checkpoint (whose
 * weights are loaded). ck moves into t->pending when its Adam state was read. */
int tdm_train__resume_position(trainer *t, tdm_ckpt *ck, tdm_error *err);
/* --use-checkpoint-opt_param-scheduler: the schedule recorded in the checkpoint replaces the flags'. */
int tdm_train__schedule_from_checkpoint(trainer *t, const tdm_ckpt_state *ck_state, const char *ck_dir, tdm_error *err);
/* Collective: every rank read the same checkpoint. */
int tdm_train__same_checkpoint_everywhere(trainer *t, tdm_error *err);
/* Collective: the Adam state read is vouched for, the blocks no shard read split between ranks. */
int tdm_train__verify_optimizer_load(trainer *t, tdm_error *err);

/* ---- logging.c */

/* Counts the step into iv and, at --log-interval, prints the iteration line (and the timers). Every
 * rank: the timers' reports are collective. */
void tdm_train__log_iteration(trainer *t, interval *iv, const tdm_step_record *r);
/* Rank 0: the step's TensorBoard scalars, its metrics.jsonl line and, every 10 s, a progress line
 * (its ETA from the mean of the last TDM_STEP_WINDOW steps). */
void tdm_train__log_step(trainer *t, const tdm_step_record *rec, uint64_t *last_progress, tdm_error *err);
/* Rank 0, --tensorboard-dir: scalars, each also "TAG vs samples". */
void tdm_train__tb_scalars(trainer *t, int n, const char *const *tags, const double *values, int64_t iteration);

/* ---- validation.c */

/* Collective: one evaluation of the validation set, printed under `prefix`. */
int tdm_train__evaluate(trainer *t, const char *prefix, tdm_error *err);

/* ---- trainer_save.c */

/* Collective: rank 0 writes the checkpoint; every rank learns whether it worked. */
int tdm_train__save_checkpoint(trainer *t, tdm_error *err);

#endif
