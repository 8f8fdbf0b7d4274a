/* optimizer_state.h - the Adam state of every rank's shards, gathered into parameter shape for a
 * checkpoint one parameter at a time.
 *
 *   tdm_ddp_state_gather *g = tdm_ddp_state_gather_begin(ddp, pt, comm, senders, timeout); // every rank
 *   if (rank == 0) for each trainable parameter i, in table order:
 *       m = tdm_ddp_state_gather_get(g, i, 0, &err);  v = ..._get(g, i, 1, &err);
 *       (and, with bf16_params, the fp32 main parameters: ..._get(g, i, 2, &err))
 *   tdm_ddp_state_gather_end(g);                                                  // rank 0
 *
 * Rank 0 holds m and v of the parameter being written, never the whole state (twice the
 * weights: 66 GB for Qwen3-VL-8B). With the distributed optimizer (senders = dp) the other
 * ranks send, parameter by parameter in table order, the pieces of it they own (optimizer.h,
 * tdm_ddp_opt_piece); rank 0 receives them in the same order. Without it (senders = 1) rank
 * 0's own copy is complete and nobody sends. The messages are point-to-point on comm with the
 * tags 1 and 3-6, which nothing else may use on it during the gather.
 */
#ifndef TDM_DIST_OPTIMIZER_STATE_H
#define TDM_DIST_OPTIMIZER_STATE_H

#include <mpi.h>
#include <stdint.h>

#include "core/error.h"
#include "core/params.h"
#include "distributed/optimizer.h"

/* This rank's optimizer pieces (*np of them; the caller frees) in the checkpoint file's order:
 * by parameter, then offset. */
tdm_ddp_opt_piece *tdm_ddp_opt_pieces_sorted(const tdm_ddp *ddp, int *np);

typedef struct tdm_ddp_state_gather tdm_ddp_state_gather;

/* Collective over the ranks of comm below `senders` (0: nothing is gathered; 1: rank 0's own
 * state; the data-parallel size: every rank's shards). pt is the table the ddp was created
 * with. A rank 1 .. senders-1 sends its piece list and then the state of each piece, in
 * (param, offset) order, and returns NULL once its sends completed (they wait for rank 0's
 * writer to ask for each parameter). Rank 0 receives the piece lists and returns the gather
 * (NULL when senders is 0); the other ranks return NULL at once. Each transfer waits at most
 * timeout_ns (--distributed-timeout-minutes; 0: no bound), then the job ends naming it. */
tdm_ddp_state_gather *tdm_ddp_state_gather_begin(tdm_ddp *ddp, const tdm_param_table *pt, MPI_Comm comm, int senders,
                                                 uint64_t timeout_ns);

/* Rank 0: m (which = 0), v (which = 1) or the fp32 main parameters (which = 2, bf16_params) of
 * trainable parameter `param`, [numel] floats valid until the next call; the shape of
 * tdm_ckpt_save_spec.optim_state. Asked in table order, m first: v and the main parameters right
 * after m of the same parameter. NULL with *err set when the pieces do not cover the parameter or
 * the order is broken. */
const float *tdm_ddp_state_gather_get(tdm_ddp_state_gather *g, int param, int which, tdm_error *err);

/* Rank 0: receives whatever the senders still have in flight (all of it after a failed write,
 * so that no sender is left blocked) and frees the gather. NULL is fine. */
void tdm_ddp_state_gather_end(tdm_ddp_state_gather *g);

#endif
