/* config.c - defaults, validation and Megatron's start-up line for tdm_ddp_config. */
#include "distributed/config.h"

#include <mpi.h>
#include <string.h>

void tdm_ddp_config_default(tdm_ddp_config *c) {
    memset(c, 0, sizeof *c);
    c->check_for_nan_in_grad = 1;
    c->grad_reduce_in_fp32 = 1;
    c->progress = TDM_DDP_PROGRESS_THREAD;
    c->comm_thread_nice = TDM_DDP_COMM_THREAD_NICE;
    c->timeout_minutes = TDM_DDP_TIMEOUT_MINUTES;
}

int tdm_ddp_config_check(const tdm_ddp_config *c, tdm_error *err) {
    if (c->overlap_param_gather && !(c->use_distributed_optimizer && c->overlap_grad_reduce))
        return tdm_errorf(err, "--overlap-param-gather requires --use-distributed-optimizer and "
                               "--overlap-grad-reduce");
    if (c->bucket_size < 0) return tdm_errorf(err, "--ddp-bucket-size: expected a positive number of elements");
    if (c->num_buckets < 0) return tdm_errorf(err, "--ddp-num-buckets: expected a positive number of buckets");
    if (c->bucket_size > 0 && c->num_buckets > 0)
        return tdm_errorf(err, "--ddp-bucket-size and --ddp-num-buckets: expected at most one of them");
    if (!c->grad_reduce_in_fp32) return tdm_errorf(err, "grad_reduce_in_fp32: only fp32 gradient reduction exists");
    if (c->average_in_collective)
        return tdm_errorf(err, "average_in_collective: gradients are summed and scaled by 1/tokens instead");
    if (c->comm_thread_nice < 0 || c->comm_thread_nice > 19)
        return tdm_errorf(err, "--comm-thread-nice %d: expected 0 to 19", c->comm_thread_nice);
    if (!(c->timeout_minutes >= 0 && c->timeout_minutes <= 1e6))
        return tdm_errorf(err, "--distributed-timeout-minutes %g: expected 0 (wait forever) to 1e6",
                          c->timeout_minutes);
    if (c->progress != TDM_DDP_PROGRESS_THREAD && c->progress != TDM_DDP_PROGRESS_INLINE)
        return tdm_errorf(err, "progress mode %d: expected thread or inline", (int)c->progress);
    return 0;
}

int64_t tdm_ddp_config_bucket_size(const tdm_ddp_config *c, int dp, int64_t trainable_numel) {
    if (c->num_buckets > 0) {
        int64_t s = (trainable_numel + c->num_buckets - 1) / c->num_buckets;
        return s > 0 ? s : 1;
    }
    if (c->bucket_size > 0) return c->bucket_size;
    int64_t by_dp = 1000000 * (int64_t)dp; /* Megatron: max(40M, 1M x dp) */
    return by_dp > 40000000 ? by_dp : 40000000;
}

static const char *py_bool(int b) { return b ? "True" : "False"; }

void tdm_ddp_config_describe(const tdm_ddp_config *c, int64_t bucket_size, tdm_strbuf *out) {
    tdm_sb_printf(out,
                  "Setting up DistributedDataParallel with config DistributedDataParallelConfig("
                  "grad_reduce_in_fp32=%s, overlap_grad_reduce=%s, overlap_param_gather=%s, "
                  "use_distributed_optimizer=%s, check_for_nan_in_grad=%s, bucket_size=%lld, "
                  "average_in_collective=%s)",
                  py_bool(c->grad_reduce_in_fp32), py_bool(c->overlap_grad_reduce), py_bool(c->overlap_param_gather),
                  py_bool(c->use_distributed_optimizer), py_bool(c->check_for_nan_in_grad), (long long)bucket_size,
                  py_bool(c->average_in_collective));
}

static const char *thread_level_name(int level) {
    if (level == MPI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
    if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
    if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
    if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
    return "an unknown thread level";
}

tdm_ddp_progress tdm_ddp_progress_for_thread_level(int provided, tdm_ddp_progress wanted, tdm_strbuf *log) {
    /* The communication thread calls MPI while the compute thread may call MPI on
     * other communicators (token counts, gradient norm): only MULTIPLE allows that. */
    if (wanted == TDM_DDP_PROGRESS_THREAD && provided < MPI_THREAD_MULTIPLE) {
        if (log)
            tdm_sb_printf(log,
                          "MPI granted %s, not MPI_THREAD_MULTIPLE: falling back from the communication "
                          "thread to inline progress (MPI_Test between layers and at each final gradient)\n",
                          thread_level_name(provided));
        return TDM_DDP_PROGRESS_INLINE;
    }
    return wanted;
}

const char *tdm_ddp_progress_name(tdm_ddp_progress p) { return p == TDM_DDP_PROGRESS_INLINE ? "inline" : "thread"; }

int tdm_ddp_progress_parse(const char *s, tdm_ddp_progress *out, tdm_error *err) {
    if (strcmp(s, "thread") == 0) *out = TDM_DDP_PROGRESS_THREAD;
    else if (strcmp(s, "inline") == 0) *out = TDM_DDP_PROGRESS_INLINE;
    else return tdm_errorf(err, "--comm-progress %s: expected thread or inline", s);
    return 0;
}
