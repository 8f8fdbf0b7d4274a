/* ddp.h - Megatron-style data parallelism over MPI: one flat parameter buffer, one
 * flat fp32 gradient buffer, buckets, and the collectives that keep ranks in step.
 *
 * The model knows nothing of MPI: it reports through tdm_param_hooks (model/params.h)
 * and this layer turns those calls into bucket collectives. One step of the trainer:
 *
 *   tdm_ddp *ddp = tdm_ddp_create(dp_comm, tdm_model_params(m), &cfg, &err); // once
 *   tdm_param_hooks h = tdm_ddp_hooks(ddp);  tdm_model_set_hooks(m, &h);    // once
 *   tdm_model_init_weights(m, seed);   // writes through the table into our buffers
 *
 *   for each iteration:
 *     tdm_ddp_timer_start(ddp, TDM_TIMER_FORWARD_BACKWARD);
 *     tdm_ddp_zero_grad(ddp);
 *     for k in 0..m-1:                                // micro-batches of this rank
 *       tdm_ddp_set_is_last_microbatch(ddp, k == m - 1);  // Megatron's no_sync
 *       tdm_model_forward_backward(model, batch_k, 1.0f, &res, &err);
 *         // forward:  param_needed(i) waits for i's bucket all-gather (overlap_param_gather)
 *         // backward: grad_ready(i); on the last micro-batch a bucket whose
 *         //           parameters are all ready is NaN-checked and, with
 *         //           overlap_grad_reduce, its collective starts at once
 *     tdm_ddp_finish_grad_sync(ddp, &err);            // start what is left, wait all
 *     tdm_ddp_timer_stop(ddp, TDM_TIMER_FORWARD_BACKWARD);
 *     tdm_ddp_sum_across_ranks(ddp, sums, 2, &err);   // loss sum and token count
 *     tdm_ddp_optimizer_step(ddp, &adamw, 1.0f / total_tokens, &grad_norm, &err); // optimizer.h
 *
 * Reduction: MPI_SUM of raw gradient sums (grad_reduce_in_fp32, no averaging); the
 * optimizer multiplies by grad_scale = 1/(global token count) once. Without the
 * distributed optimizer each bucket is all-reduced in place; with it each bucket is
 * reduce-scattered (rank r gets shard r, see layout.h), AdamW updates the owned shard
 * and each bucket's parameter shards are all-gathered back.
 *
 * After finish_grad_sync with the distributed optimizer, only this rank's shard of each
 * bucket holds reduced gradients (the rest of the gradient buffer is scratch); tools
 * that need the full reduced gradient use the plain optimizer (all-reduce).
 *
 * Ordering: every rank starts bucket collectives in bucket index order (a bucket that
 * becomes ready early waits for the ones before it), and all-gathers in forward order
 * (last bucket first); so the collectives on the DP communicator are issued in the
 * same order everywhere, whichever thread issues them.
 *
 * Errors and stopping every rank (no hang, no abort needed):
 * - A non-finite value in a bucket's local gradient (check_for_nan_in_grad) is found
 *   before the bucket is communicated. The bucket is still communicated (so no rank
 *   waits forever), and tdm_ddp_finish_grad_sync agrees across ranks with a small
 *   all-reduce: it returns -1 on EVERY rank in the same iteration, each message naming
 *   the first offending rank, the iteration, the bucket and the first parameter holding
 *   a non-finite value. The trainer then exits non-zero on every rank (MPI_Finalize
 *   and exit(1); MPI_Abort is not needed).
 * - A trainable parameter that never reported grad_ready in the last micro-batch: the
 *   remaining buckets are still communicated, then finish_grad_sync returns -1 on every
 *   rank: "parameter X received no gradient in iteration N".
 * - A rank that never joins a bucket collective (stuck in a library that retries a failed
 *   allocation forever, stopped, or gone without its launcher noticing): a wait for a
 *   gradient or parameter collective longer than cfg.timeout_minutes prints one line
 *   naming the collective and calls MPI_Abort (comm.h), which ends every rank.
 *
 * Threads: with TDM_DDP_PROGRESS_THREAD (requires MPI_THREAD_MULTIPLE) a communication
 * thread per rank owns the collectives on a private duplicate of dp_comm; the compute
 * thread only enqueues work and waits for completions. Blocking control collectives
 * (agreement, gradient norm, timers) use a second private duplicate from the compute
 * thread. All tdm_ddp_* functions must be called from one (the compute) thread.
 */
#ifndef TDM_DIST_DDP_H
#define TDM_DIST_DDP_H

#include <mpi.h>
#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "distributed/config.h"
#include "distributed/layout.h"
#include "distributed/timers.h"
#include "core/params.h"

typedef struct tdm_ddp tdm_ddp;

/* Collective over dp_comm (which is duplicated, never used directly afterwards).
 * Builds the layout, allocates the parameter and gradient buffers and the optimizer
 * state of the owned shards (tdm_alloc_big: touched now, never per step), points every
 * trainable parameter's data/grad into the buffers and gives every frozen parameter
 * its own data storage (grad = NULL), and starts the communication thread. Parameter
 * values are zero: initialise or load them through the table afterwards (identically
 * on every rank, or call tdm_ddp_broadcast_params). The table must outlive the ddp and
 * keep its tensor set. Fails on a bad config, a layout error, a layout that differs
 * from rank 0's (trainable tensors' names, sizes or order: another model config on one
 * node), an allocation failure, or THREAD progress when MPI was not initialised with
 * MPI_THREAD_MULTIPLE, and then on every rank alike (a failure on one rank fails the
 * others too, with a message naming that rank), so no rank is left waiting in a collective. */
tdm_ddp *tdm_ddp_create(MPI_Comm dp_comm, tdm_param_table *t, const tdm_ddp_config *cfg, tdm_error *err);

/* Waits for outstanding collectives, stops the communication thread, frees the buffers
 * (the table's data/grad pointers dangle afterwards). NULL is fine. Not collective. */
void tdm_ddp_free(tdm_ddp *ddp);

/* The hooks to install into the model (ctx = ddp): param_needed, grad_ready, progress.
 * layer_begin/layer_end stay NULL: the model records its own per-layer profiler events
 * (recording them here too gave every layer two events). */
tdm_param_hooks tdm_ddp_hooks(tdm_ddp *ddp);

int tdm_ddp_rank(const tdm_ddp *ddp);
int tdm_ddp_size(const tdm_ddp *ddp);
const tdm_ddp_config *tdm_ddp_get_config(const tdm_ddp *ddp);
const tdm_ddp_layout *tdm_ddp_get_layout(const tdm_ddp *ddp);
/* The flat buffers (layout order, layout->total elements each); the parameter buffer is NULL under
 * bf16_storage (the parameters are the table's bfloat16 bits). */
float *tdm_ddp_param_buffer(tdm_ddp *ddp);
float *tdm_ddp_grad_buffer(tdm_ddp *ddp);

/* Appends the start-up log, newline-terminated lines, for rank 0 to print: the
 * DistributedDataParallelConfig line, the bucket table, and the memory line
 * ("optimizer state per rank: X MiB (1/dp of Y MiB unsharded)"). */
void tdm_ddp_describe(const tdm_ddp *ddp, tdm_strbuf *out);

/* Bytes this rank holds; optim_* count Adam's m and v (fp32 params are their own master) and, with
 * bf16_params, the fp32 main copy. */
typedef struct tdm_ddp_memory {
    int64_t param_bytes;           /* flat parameter buffer (padding included; 2 bytes each with bf16_storage) */
    int64_t grad_bytes;            /* flat fp32 gradient buffer */
    int64_t frozen_bytes;          /* frozen parameters' storage */
    int64_t optim_bytes;           /* m + v (+ the fp32 main parameters, bf16_params) of the owned shards */
    int64_t optim_bytes_unsharded; /* what they would take without the distributed optimizer */
    int64_t param_bits_bytes;      /* bf16_params, distributed: the 16-bit staging buffer of the all-gathers */
} tdm_ddp_memory;
void tdm_ddp_get_memory(const tdm_ddp *ddp, tdm_ddp_memory *out);

/* Call on every rank once the weights were written through the table (initialised, or loaded from
 * Hugging Face weights or a checkpoint), before the first step. With bf16_params it rounds every
 * parameter, trainable and frozen, to bfloat16 (kernels/kernels.h: tdm_round_to_bf16) and takes the
 * optimizer's fp32 main copy of the owned elements from the rounded values, as Megatron's --bf16
 * does when it builds its main parameters; a resumed run then overwrites that copy with the saved
 * one (tdm_ddp_opt_main). With bf16_storage whoever wrote the weights rounded them into the bits
 * already, and the main copy is taken from those. Nothing in fp32. Not collective. */
void tdm_ddp_params_loaded(tdm_ddp *ddp);

/* Collective: copies rank `root`'s trainable and frozen parameter values to every rank. */
int tdm_ddp_broadcast_params(tdm_ddp *ddp, int root, tdm_error *err);

/* ---- per step ---------------------------------------------------------------------- */

/* Starts an iteration: zeroes the whole gradient buffer and the grad-ready counts.
 * With overlap_param_gather, does NOT wait for the parameter all-gathers (forward does). */
void tdm_ddp_zero_grad(tdm_ddp *ddp);

/* Marks whether the next backward is the last micro-batch of the step (default 1).
 * Only the last micro-batch's grad_ready calls count and start communication. */
void tdm_ddp_set_is_last_microbatch(tdm_ddp *ddp, int is_last);

/* Collective. Starts every bucket collective not yet started (all of them without
 * overlap_grad_reduce), waits for all, and agrees across ranks on errors (see above).
 * Timed as all-grads-sync. Returns -1 on every rank on a NaN/Inf or a missing gradient. */
int tdm_ddp_finish_grad_sync(tdm_ddp *ddp, tdm_error *err);

/* Waits until every parameter all-gather has landed (overlap_param_gather), e.g. before
 * saving a checkpoint or evaluating without the hooks. A no-op otherwise. */
void tdm_ddp_wait_params(tdm_ddp *ddp);

/* Collective: vals[0..n) summed across ranks in rank order, identical on every rank
 * (an all-gather then a local sum, so it does not depend on the MPI algorithm).
 * For the loss sum and token count. n <= 64. */
int tdm_ddp_sum_across_ranks(tdm_ddp *ddp, double *vals, int n, tdm_error *err);

/* The iteration being computed (1-based; optimizer_step advances it). Set it when
 * resuming so messages and NaN injection name the right iteration. */
int64_t tdm_ddp_iteration(const tdm_ddp *ddp);
void tdm_ddp_set_iteration(tdm_ddp *ddp, int64_t iteration);

/* ---- timers (timers.h) --------------------------------------------------------------- */
void tdm_ddp_timer_start(tdm_ddp *ddp, tdm_timer_id id);
void tdm_ddp_timer_stop(tdm_ddp *ddp, tdm_timer_id id);
/* This rank's accumulated ms since the last report (no communication). */
double tdm_ddp_timer_elapsed_ms(const tdm_ddp *ddp, tdm_timer_id id);
/* Collective: (min, max) across ranks of each timer's ms / normalizer, then resets the
 * timers. Format with tdm_timing_format. */
int tdm_ddp_timers_report(tdm_ddp *ddp, double normalizer, tdm_timing *out, tdm_error *err);
/* The same without resetting them (Megatron's timers.write to TensorBoard between two reports). */
int tdm_ddp_timers_peek(tdm_ddp *ddp, double normalizer, tdm_timing *out, tdm_error *err);

/* ---- measurements and test hooks ----------------------------------------------------- */

typedef struct tdm_ddp_stats {
    uint64_t comm_thread_cpu_ns; /* CPU time the communication thread has used since create
                                    (CLOCK_THREAD_CPUTIME_ID of that thread; 0 inline) */
    /* of it, polling while the compute thread waited on it */
    uint64_t comm_thread_wait_poll_cpu_ns;
    uint64_t grad_wait_ns;   /* compute thread blocked on gradient collectives, total */
    uint64_t gather_wait_ns; /* compute thread blocked on parameter all-gathers, total */
    int64_t collectives;     /* collectives completed since create */
    int comm_thread_nice;    /* the communication thread's niceness (-1 inline) */
} tdm_ddp_stats;
void tdm_ddp_get_stats(const tdm_ddp *ddp, tdm_ddp_stats *out);

/* Structural overlap evidence. Every bucket post takes a number from one counter that
 * only the compute thread advances; a caller can take numbers from the same counter
 * (tdm_ddp_tick) at points of interest, e.g. "backward of the first decoder layer
 * begins", and compare. */
uint64_t tdm_ddp_tick(tdm_ddp *ddp);
typedef struct tdm_ddp_bucket_trace {
    uint64_t ready_seq; /* tick when its last grad_ready arrived (last micro-batch), 0 if never */
    uint64_t post_seq;  /* tick when its gradient collective was handed to the engine */
    uint64_t post_ns;   /* CLOCK_MONOTONIC times of: hand-over, */
    uint64_t start_ns;  /* the MPI_I* call, */
    uint64_t done_ns;   /* and completion observed */
} tdm_ddp_bucket_trace;
/* The gradient collective of bucket b in the most recent step. */
void tdm_ddp_get_bucket_trace(const tdm_ddp *ddp, int b, tdm_ddp_bucket_trace *out);

/* Testing hook (the trainer's --inject-nan-at): in iteration `iteration` (as counted by
 * tdm_ddp_iteration; set it when resuming), on rank `rank` (-1: every rank), the first
 * element of parameter `param` (table index; -1: the first parameter of bucket 0, the
 * output side) gets a NaN just before its bucket's check. */
void tdm_ddp_inject_nan(tdm_ddp *ddp, int rank, int64_t iteration, int param);

#endif
