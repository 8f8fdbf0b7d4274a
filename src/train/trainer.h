/* trainer.h - the training loop of `tandem train`, callable in-process.
 *
 *   tdm_train_result res;
 *   if (tdm_train_run(&args, comm, &res, &err) != 0) { ... err.msg, then MPI_Abort ... }
 *   for (int i = 0; i < res.n_steps; i++) use(res.records[i]);
 *   tdm_train_result_free(&res);
 *
 * One call is one complete run: model from --model's config.json, freeze flags, the
 * data-parallel layer (buffers, buckets, communication thread, optimizer), weights
 * from --seed (identical on every rank and for every dp) or --load / --pretrained,
 * activations reserved once, the loader thread, then --train-iters steps:
 *
 *   zero grads
 *   for each micro-batch m of this rank:   forward_backward (grads += d loss_sum)
 *                                          the last one lets the buckets communicate
 *   all-reduce (loss_sum, tokens)          one small collective per step
 *   finish grad sync                       all buckets reduced (or reduce-scattered)
 *   optimizer step                         grads scaled by 1/total_tokens, clipped, lr from the scheduler
 *   param gather                           (distributed optimizer)
 *   log line, metrics.jsonl, checkpoint on --save-interval, signal check
 *
 * Every rank of `comm` must call it with the same arguments. Nothing here depends on
 * thread timing: the same seed and data give bitwise the same records, and a run
 * resumed from a checkpoint at step k gives bitwise the same records from k+1 on.
 * The function may be called several times in one process (the A/B driver does);
 * each call builds and frees everything it uses.
 *
 * SIGTERM / SIGINT (installed by tdm_train_install_signal_handlers) only set a flag;
 * at the end of the current step all ranks agree (one all-reduce) to save (with
 * --save) and return 0 with res->interrupted = 1.
 */
#ifndef TDM_TRAINER_H
#define TDM_TRAINER_H

#include <mpi.h>
#include <stdint.h>

#include "core/error.h"
#include "train/args.h"

/* One optimizer step, as every rank agrees on it (reduced over the group). */
typedef struct tdm_step_record {
    int64_t iteration;        /* 1-based */
    int64_t consumed_samples; /* after this step */
    int global_batch_size;    /* samples in this step */
    int64_t tokens;           /* loss tokens (targets != -100) in the global batch */
    double lr;                /* the learning rate Megatron logs for this iteration */
    double weight_decay;      /* the weight decay of the schedule, at the same point as lr */
    double loss;              /* per-token mean over the global batch */
    double grad_norm;         /* global L2 norm before clipping (0.0 with --clip-grad 0, as the spec says) */
    int skipped;              /* 1 when the step was skipped (not finite) */
    int nan;                  /* 1 when loss or grads were not finite */
    double model_flops;       /* tdm_model_flops of every rank's micro-batches of this step, summed */
    int has_params_norm;      /* --log-params-norm: */
    double params_norm;       /*   L2 norm of the trained parameters after the step */
    int has_num_zeros;        /* --log-num-zeros-in-grad: */
    double num_zeros;         /*   gradient elements equal to 0 (before clipping) */
    /* timings of this rank, milliseconds (rank-local, not reduced) */
    double step_ms;            /* whole step, data wait included */
    double data_wait_ms;       /* waiting for the loader */
    double fwd_bwd_ms;         /* forward + backward of all micro-batches, incl. overlapped comm */
    double grad_sync_ms;       /* finish_grad_sync: waiting for the last buckets */
    double optimizer_ms;       /* norm, clip, AdamW */
    double param_gather_ms;    /* synchronous all-gather (0 when overlapped or not distributed) */
    double comm_thread_cpu_ms; /* CPU time the communication thread took beside compute during this step
                                  (not its polls while compute waited on it) */
    double compute_cpu_ms;     /* CPU time of the compute thread (the one calling the trainer) during this step */
    double cpu_ms;             /* CPU time of the whole process (every thread) during this step */
    uint64_t fingerprint;      /* hash of every rank's micro-batch fingerprints, in (rank, micro-batch) order */
} tdm_step_record;

typedef struct tdm_train_result {
    int n_steps;              /* records of the steps this call ran */
    tdm_step_record *records; /* [n_steps], malloc'ed; free with tdm_train_result_free */
    char
        ddp_config_line[1024]; /* "Setting up DistributedDataParallel with config DistributedDataParallelConfig(...)" */
    char transport_line[512];  /* "data-parallel transport: ..." (the MPI library, transport, measured cost) */
    char dp_warning[2048];     /* rank 0: the warning that the ranks cost more than they save, "" when none */
    int n_buckets;
    int64_t n_params_trainable;
    int64_t first_iteration; /* 0, or the checkpoint's iteration when resumed */
    int64_t final_iteration;
    int64_t consumed_samples; /* at the end */
    uint64_t
        params_checksum; /* XXH3 of the full parameter values (every tensor, registration order), same on all ranks */
    int interrupted;     /* stopped early by SIGTERM/SIGINT or --exit-interval */
    char saved_checkpoint[TDM_ARGS_PATH_MAX]; /* last checkpoint directory written, "" if none */
    /* On failure: 1 when every rank returned -1 in the same place (bad flags, a missing
     * file, a NaN found by the agreed checks), so the caller may print once (on rank
     * failed_rank) and exit normally; 0 when only this rank failed and the others may be
     * blocked in a collective, so the caller must MPI_Abort. */
    int all_ranks_failed;
    int failed_rank;
    int failed_alone; /* all_ranks_failed, but the error itself happened on failed_rank (and
                                  perhaps others), not on every rank: the message must name the rank */
} tdm_train_result;

/* Runs one training job (see above). On failure returns -1 with one sentence in err;
 * res->all_ranks_failed says whether the caller can exit normally (every rank failed
 * together; print err on rank res->failed_rank only) or must MPI_Abort. res is zeroed
 * first; free it with tdm_train_result_free, also after failure. */
int tdm_train_run(const tdm_train_args *a, MPI_Comm comm, tdm_train_result *res, tdm_error *err);

void tdm_train_result_free(tdm_train_result *res);

/* Installs SIGTERM/SIGINT handlers that set the stop flag tdm_train_run checks at the
 * end of each step. For the command-line front end; tests and the A/B driver may skip it. */
void tdm_train_install_signal_handlers(void);
/* Requests a stop as a signal would (tests). */
void tdm_train_request_stop(void);
/* The signal that requested a stop (SIGTERM for tdm_train_request_stop), 0 when none did. */
int tdm_train_stop_signal(void);

#endif
