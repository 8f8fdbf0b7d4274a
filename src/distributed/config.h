/* config.h - the data-parallel configuration: Megatron's DistributedDataParallelConfig
 * plus the one choice of ours that Megatron does not have (how MPI is progressed).
 *
 *   tdm_ddp_config cfg;
 *   tdm_ddp_config_default(&cfg);               // Megatron's defaults, thread progress
 *   cfg.use_distributed_optimizer = 1;          // --use-distributed-optimizer
 *   cfg.overlap_grad_reduce = 1;                // --overlap-grad-reduce
 *   cfg.bucket_size = 1000000;                  // --ddp-bucket-size (elements)
 *
 * The bucket layout depends only on (parameter table, dp, use_distributed_optimizer,
 * bucket_size, num_buckets), never on the overlap flags or the progress mode: those
 * change only *when* collectives start, so an A/B pair is numerically identical.
 */
#ifndef TDM_DIST_CONFIG_H
#define TDM_DIST_CONFIG_H

#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"

/* Who makes MPI progress on the nonblocking collectives (the project spec's data-parallel.md, "Progress"). */
typedef enum tdm_ddp_progress {
    TDM_DDP_PROGRESS_THREAD = 0, /* a communication thread per rank polls with short sleeps */
    TDM_DDP_PROGRESS_INLINE = 1, /* the compute thread calls MPI_Test between layers */
} tdm_ddp_progress;

/* The communication thread's default niceness. It needs little CPU, but at nice 0 each of
 * its wake-ups preempts a compute thread when the cores are busy (about a thousand times
 * per step on 2 cores); at a lower priority it runs in the gaps instead. Measured in
 * docs/benchmarks.md ("The communication thread's priority"). */
#define TDM_DDP_COMM_THREAD_NICE 10

/* Megatron's default --distributed-timeout-minutes (torch.distributed's process-group timeout). */
#define TDM_DDP_TIMEOUT_MINUTES 10.0

typedef struct tdm_ddp_config {
    int use_distributed_optimizer; /* ZeRO-1: reduce-scatter, sharded AdamW, all-gather */
    int overlap_grad_reduce;       /* start each bucket's collective as soon as it is ready */
    int overlap_param_gather;      /* all-gather in the background; needs both flags above */
    int check_for_nan_in_grad;     /* per-bucket NaN/Inf check before communicating (default 1) */
    int64_t bucket_size;           /* elements; 0 = Megatron's default max(40e6, 1e6 * dp) */
    int num_buckets;               /* >0: bucket_size = ceil(trainable elements / num_buckets);
                                      giving both num_buckets and bucket_size is an error */
    tdm_ddp_progress progress;     /* default THREAD */
    int comm_thread_nice;          /* scheduling niceness of the communication thread, 0-19
                                      (default TDM_DDP_COMM_THREAD_NICE) */
    double timeout_minutes;        /* a bucket collective not done after this long ends the job on every
                                      rank (Megatron's --distributed-timeout-minutes, default
                                      TDM_DDP_TIMEOUT_MINUTES); 0 = wait forever */
    int bf16_params;               /* --bf16: parameters hold bfloat16 values (in fp32 storage unless
                                      bf16_storage); AdamW updates an fp32 main copy of the
                                      owned elements and rounds it back; the all-gather moves the
                                      16-bit values, half the bytes of the fp32 reduce-scatter */
    int bf16_storage;              /* with bf16_params: the parameters are stored as 16 bits (the table's
                                      `bits`, `data` NULL, 2 bytes each; whoever reads them widens them:
                                      the model a layer at a time, tdm_param_values), and the all-gathers
                                      land in them; else fp32 storage holding bfloat16 values */
    int grad_reduce_in_fp32;       /* always 1: gradients are fp32 here */
    int average_in_collective;     /* always 0: we sum, and the optimizer scales by 1/tokens */
} tdm_ddp_config;

/* Fills Megatron's defaults: everything off except check_for_nan_in_grad and
 * grad_reduce_in_fp32, bucket_size 0 (default), thread progress, a 10-minute timeout. */
void tdm_ddp_config_default(tdm_ddp_config *c);

/* Rejects combinations Megatron rejects (overlap_param_gather without the distributed
 * optimizer and overlap_grad_reduce; both num_buckets and bucket_size; negative sizes). */
int tdm_ddp_config_check(const tdm_ddp_config *c, tdm_error *err);

/* The bucket size in elements that the layout uses for `dp` ranks and a model with
 * `trainable_numel` trainable elements (>= 1). */
int64_t tdm_ddp_config_bucket_size(const tdm_ddp_config *c, int dp, int64_t trainable_numel);

/* Appends Megatron's start-up line (no trailing newline):
 * "Setting up DistributedDataParallel with config DistributedDataParallelConfig(
 *  grad_reduce_in_fp32=True, overlap_grad_reduce=..., ..., bucket_size=N, average_in_collective=False)".
 * We differ from Megatron in printing the bucket size actually used even when
 * overlap_grad_reduce is off (Megatron prints None there: one bucket). */
void tdm_ddp_config_describe(const tdm_ddp_config *c, int64_t bucket_size, tdm_strbuf *out);

/* The progress mode to use when the MPI library granted thread level `provided`
 * (from MPI_Init_thread, which should request MPI_THREAD_MULTIPLE): `wanted`, or
 * INLINE when `wanted` is THREAD and provided < MPI_THREAD_MULTIPLE, in which case
 * one log line saying so is appended to *log (may be NULL). */
tdm_ddp_progress tdm_ddp_progress_for_thread_level(int provided, tdm_ddp_progress wanted, tdm_strbuf *log);

/* "thread" / "inline" <-> enum; parse returns -1 with a message naming the value. */
const char *tdm_ddp_progress_name(tdm_ddp_progress p);
int tdm_ddp_progress_parse(const char *s, tdm_ddp_progress *out, tdm_error *err);

#endif
