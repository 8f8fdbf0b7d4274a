/* plan.h - a model of one training step, built from a measured baseline, that predicts the step
 * time of other settings (overlap flags, bucket size or count, dp size, link rate) by
 * simulating the schedule src/distributed runs (docs/plan.md).
 *
 *   tdm_plan_model m;                          // from a trace: tdm_plan_from_trace (plan_trace.c)
 *   tdm_plan_config c = m.baseline;            // the baseline's settings
 *   c.overlap_grad = 1;                        // a candidate
 *   tdm_plan_result r;
 *   if (tdm_plan_simulate(&m, &c, &r, &err) == 0) use(r.step_us, r.hidden_us, r.exposed_us);
 *   tdm_plan_result_free(&r);
 *   tdm_plan_model_free(&m);
 *
 * The schedule (one compute thread, one link):
 *   head | micro-batches: forward units 0..U-1, fb_other, backward units U-1..0 | launch the
 *   buckets not yet launched, wait for every collective | sync | optimizer | (parameter
 *   all-gathers, posted and waited, when not overlapped)
 * - Buckets: the trainable parameters in reverse registration order, cut as
 *   src/distributed/layout.c cuts them (alignment with the distributed optimizer included).
 * - A unit's gradients are ready in reverse registration order through its backward in the last
 *   micro-batch, each at the share of the unit's elements up to it (src/model reports each right
 *   after its own kernels); a bucket is ready when all its parameters are; with overlap_grad,
 *   ready buckets are launched in bucket order (a bucket waits for the ones before it), the rest
 *   after the backward.
 * - With overlap_param the all-gathers are posted at the step's start, two ahead, and the first
 *   micro-batch's forward waits per bucket before the first unit that reads it (prefetch as in
 *   param_gather.c); a gradient launch first dispatches every all-gather not yet dispatched.
 * - The link carries one collective at a time, in posting order (FIFO); a collective of n bytes
 *   on p ranks costs the ring formulas below; gradient collectives posted at one instant take
 *   grad_together times as long in all.
 * - While a collective is in flight behind compute, its CPU cost (cpu_us_per_mb per MB moved)
 *   is taken from the compute it overlaps (inline progress, or a communication thread that has
 *   no core of its own); 0 when the thread has a core. With comm_share (a thread making the
 *   copies of shared memory, at the scheduler's share of the core) the collective also slows
 *   there: its CPU-bound part runs at that share.
 * Times are µs; sizes are elements unless a name says bytes.
 */
#ifndef TDM_PLAN_PLAN_H
#define TDM_PLAN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

enum { TDM_PLAN_REDUCE_SCATTER = 0, TDM_PLAN_ALL_GATHER, TDM_PLAN_ALL_REDUCE, TDM_PLAN_KINDS };

typedef struct tdm_plan_link {
    double alpha_us; /* latency of one step of the algorithm */
    double gbps;     /* bandwidth, Gbit/s */
    int tree;        /* 1: all-reduces by NCCL's double binary tree (NCCL_ALGO=Tree); 0: every collective by ring */
} tdm_plan_link;

/* Cost of a collective over `bytes` n (the whole buffer: a reduce-scatter's input, an all-gather's
 * output, an all-reduce's buffer) on p ranks, alpha the link's latency and beta its bandwidth:
 *   ring reduce-scatter, all-gather  (p-1) alpha + (p-1)/p n / beta
 *   ring all-reduce                  2 (p-1) alpha + 2 (p-1)/p n / beta
 *   tree all-reduce                  2 ceil(log2 p) alpha + 2 n / beta   (reduce up two pipelined binary
 *                                    trees, each rank interior in one, then broadcast down)
 * Reduce-scatter and all-gather run as rings under tree too (NCCL has no tree for them). 0 for p = 1. */
double tdm_plan_coll_us(int kind, double bytes, int p, const tdm_plan_link *l);
/* The two factors of the formula: steps (multiplies alpha) and bytes on the wire per rank. */
void tdm_plan_coll_factors(int kind, double bytes, int p, const tdm_plan_link *l, double *steps, double *wire_bytes);
const char *tdm_plan_kind_name(int kind);

#define TDM_PLAN_NAME_MAX 48

typedef struct tdm_plan_unit {
    char name[TDM_PLAN_NAME_MAX]; /* the profiler's layer name (layer.3, lm_head, vision.block.0) */
    double fwd_us, bwd_us;        /* per micro-batch */
} tdm_plan_unit;

typedef struct tdm_plan_param {
    int64_t numel;
    int unit; /* index into units: the unit that reads it in forward and makes its gradient */
    int trainable;
} tdm_plan_param;

typedef struct tdm_plan_config {
    int dp;
    int distributed; /* --use-distributed-optimizer: reduce-scatter + all-gather, else all-reduce */
    int overlap_grad, overlap_param;
    int64_t bucket_size; /* elements; 0: from num_buckets or the default */
    int num_buckets;     /* 0: from bucket_size */
    int bf16_params;     /* all-gathers move 2-byte values */
    int given_cut;       /* 1: the model's given_buckets (a PyTorch trace's measured buckets); a bucket
                            size or count clears it */
    tdm_plan_link link;
} tdm_plan_config;

typedef struct tdm_plan_model {
    tdm_plan_unit *units; /* forward order */
    int n_units;
    tdm_plan_param *params; /* registration (forward) order */
    int n_params;
    int n_micro;        /* micro-batches per step on a rank */
    double head_us;     /* per step, before the first forward (data, logging) */
    double fb_other_us; /* per micro-batch: forward-backward time outside the units (loss), after the forward */
    double sync_us;     /* gradient sync's own time after the waits (the ranks' agreement) */
    double opt_us;      /* optimizer, without waits for all-gathers */
    double cpu_us_per_mb;
    /* the share of a core a communication thread without a core of its own gets while compute runs beside it
     * (tdm_plan_nice_share); its collectives' CPU-bound part runs that much slower there. 0: the thread runs first
     * (nothing slows) */
    double comm_share;
    /* > 0: given (tandem doctor's "beside compute"): every collective moves at this share of its speed alone where
     * compute runs, in place of comm_share's */
    double speed_beside;
    /* > 1: gradient collectives posted at one instant (no compute between them, as the buckets left after the
     * backward are) take this many times as long as posted one by one */
    double grad_together;
    /* > 0: given (tandem doctor's thread line): compute loses this share of its time while any collective is in
     * flight beside it (posted and not done), in place of the CPU per MB */
    double lost_share;
    /* cores the ranks of one host share (0: as many as they need): compute is scaled by max(1, dp / cores) over the
     * baseline's, for dp sizes that oversubscribe one host */
    int cores;
    tdm_plan_config baseline; /* the settings the measurement ran with, link fitted or given */
    double measured_step_us;  /* mean over the traced steps and ranks; NaN when built by hand */
    int n_steps_measured;
    int n_traced_steps;            /* the steps every rank's trace holds: what tdm_plan_trace_in's step_weight counts */
    struct tdm_plan_seg *measured; /* the first rank's last traced step, from its start (backward 2: a collective) */
    int n_measured;
    double measured_one_us;        /* that step's length */
    double measured_cpu_us_per_mb; /* from analysis.json; NaN when not there */
    int64_t *given_buckets;        /* [n_given_buckets] elements per bucket in bucket order, for given_cut */
    int n_given_buckets;
    /* The ranks apart, per traced step (tandem's trace; 0 steps elsewhere): where the ranks meet (a collective that
     * cannot complete without every rank), each waits for the slowest to arrive, so a step with more meeting points
     * waits for the slowest rank of each stretch between them rather than of the whole step (tdm_plan_rank_wait_us).
     * apart_at[(k * apart_ranks + r) * (n_units + 1) + u]: rank r's compute in step k, from the step's start (a
     * meeting point: the previous step's all-gathers, or its reduce-scatters and agreement) to its first forward of
     * unit u, waits left out; [n_units]: to the backward's end (the reduce-scatters' wait). */
    int apart_steps, apart_ranks;
    double *apart_at;
    double *apart_weight; /* [apart_steps] each step's weight (a resample's count) */
    int *apart_ref;       /* [apart_steps] the rank whose compute the model's is (the most layer time) */
    double apart_scale;   /* the compute's factor (tdm_plan_calibrate; 0: 1) */
    /* After the gradient collectives the ranks agree (src/distributed/grad_sync.c), which waits for the rank whose
     * collectives completed last: the mean over the traced steps of the longest such wait of any rank (0 from
     * other traces). Taken as is for every candidate with dp > 1 (docs/plan.md, limits). */
    double agree_us;
} tdm_plan_model;

void tdm_plan_model_free(tdm_plan_model *m);

/* The share of a core a thread at `nice` gets beside a compute thread at nice 0, by the Linux
 * scheduler's weights (1024 / 1.25^nice): 0.5 at 0, 0.097 at tandem's default 10. */
double tdm_plan_nice_share(int nice);
/* The time alone (nothing beside it) of a collective moving `bytes` that took wall_us with a
 * fraction `beside` of it run beside compute: the inverse of the slow-down comm_share makes. */
double tdm_plan_alone_us(const tdm_plan_model *m, double bytes, double wall_us, double beside);

typedef struct tdm_plan_coll {
    int kind, bucket;
    double bytes;
    double post_us, start_us, end_us; /* from the step's start */
    double hidden_us;                 /* the part that ran while the compute thread computed */
} tdm_plan_coll;

typedef struct tdm_plan_seg {
    double t0_us, t1_us;
    int unit; /* -1: not a unit (head, fb_other, sync, optimizer); TDM_PLAN_SEG_RANKS: a wait for the slowest rank */
    int backward; /* 1 backward; 0 forward or other */
    const char *what;
    double cpu_us; /* of its length, the CPU that driving collectives took from it (simulated) */
} tdm_plan_seg;

#define TDM_PLAN_SEG_RANKS (-2)

typedef struct tdm_plan_result {
    double step_us, compute_us, comm_us, hidden_us, exposed_us, cpu_taken_us;
    double rank_wait_us; /* of the step, the waits for the slowest rank beyond the model's (tdm_plan_rank_wait_us) */
    int n_buckets;
    int64_t *bucket_padded; /* [n_buckets] elements */
    tdm_plan_coll *colls;
    int n_colls;
    tdm_plan_seg *segs;
    int n_segs;
} tdm_plan_result;

/* The trainable parameters' elements in all. */
int64_t tdm_plan_trainable(const tdm_plan_model *m);

/* Buckets of the parameters for config c, as layout.c cuts them: padded sizes into *padded
 * (malloc'd, n returned) and each parameter's bucket into *bucket_of ([n_params], -1 frozen;
 * malloc'd; bucket_of may be NULL). -1 with a sentence on bad input. */
int tdm_plan_buckets(const tdm_plan_model *m, const tdm_plan_config *c, int64_t **padded, int **bucket_of,
                     tdm_error *err);

/* Sets c's cut to the run's, n buckets of elems[b] padded elements each (elems NULL: any n buckets): the
 * least --ddp-num-buckets that cuts them (returns 1), else a --ddp-bucket-size (2): every size from range[0] to
 * range[1] cuts them (range may be NULL), and c takes the roundest. 0, c unchanged, when neither does
 * (another model, freeze flags or alignment). */
int tdm_plan_match_cut(const tdm_plan_model *m, tdm_plan_config *c, const int64_t *elems, int n, int64_t range[2]);

/* The time a step waits for the slowest rank, beyond the model's compute (the rank with the most layer time),
 * over the stretch of compute from unit `from` (-1: the step's start) to unit `to` (n_units: the backward's end)
 * when the ranks meet at both ends: the mean over the traced steps of the slowest rank's compute over the stretch
 * less the model's rank's. 0 without the ranks apart (m->apart_steps 0). */
double tdm_plan_rank_wait_us(const tdm_plan_model *m, int from, int to);

/* Simulates one step of m under c. Fails with one sentence when c is unusable (dp < 1, no
 * trainable parameter, a link without bandwidth). */
int tdm_plan_simulate(const tdm_plan_model *m, const tdm_plan_config *c, tdm_plan_result *r, tdm_error *err);
void tdm_plan_result_free(tdm_plan_result *r);

/* Scales m's compute (the units, loss, head, sync and optimizer) by one factor, returned in
 * *factor, so that the baseline's simulated step is measured_us: a mean step of the traced setting
 * measured without the profiler (its log). The profiler slows what it records and runs of one
 * setting differ; a candidate keeps its predicted change and its absolute step follows the
 * measured baseline. Fails with one sentence, m unchanged, when no factor from 1/100 to 100 does. */
int tdm_plan_calibrate(tdm_plan_model *m, double measured_us, double *factor, tdm_error *err);

/* Parses candidate flags ("--overlap-grad-reduce --ddp-bucket-size 2e6 --dp 4 --link-gbps 1")
 * onto *c (which holds the settings they change). Flags: --overlap-grad-reduce,
 * --no-overlap-grad-reduce, --overlap-param-gather, --no-overlap-param-gather,
 * --ddp-bucket-size N, --ddp-num-buckets N, --dp N (or --data-parallel-size N),
 * --use-distributed-optimizer, --no-distributed-optimizer, --bf16, --link-gbps X,
 * --link-scale X (the bandwidth so far, fitted or given, times X), --link-latency-us X,
 * --link-algo ring|tree. */
int tdm_plan_parse_flags(const char *flags, tdm_plan_config *c, tdm_error *err);
/* The same settings as flags for `tandem train` / `tandem ab` (into out[cap]); relative to base. */
void tdm_plan_config_flags(const tdm_plan_config *c, const tdm_plan_config *base, char *out, int cap);

/* The `tandem ab` sides that confirm the suggested settings best against m's baseline, as train takes flags
 * (a side's flags override the run's; train has no --no- form of a flag): into base the flags the suggestion
 * turns off (the run's flags without them are the common ones), into cand the rest (tdm_plan_config_flags); for a
 * baseline of --ddp-bucket-size a bucket count as that size (train takes no count beside a size). */
void tdm_plan_confirm_flags(const tdm_plan_model *m, const tdm_plan_config *best, char *base, int base_cap, char *cand,
                            int cand_cap);

/* Appends one line, printf-formatted, to the NUL-terminated notes of capacity cap (a line that does not fit is
 * cut; nothing is written once the notes are full). notes may be NULL. */
void tdm_plan_note(char *notes, int cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- plan_svg.c ---------------------------------------------------------------------------- */

/* An SVG timeline: the measured step (when m has one) above each predicted one (compute and link). */
struct tdm_strbuf;
void tdm_plan_svg(struct tdm_strbuf *sb, const tdm_plan_model *m, const tdm_plan_result *res, const char *const *names,
                  int n);

/* ---- plan_trace.c -------------------------------------------------------------------------- */

/* Builds m from tandem's trace (trace.json, or a folder holding it) and the parameter table
 * the caller gives (units in forward order by name, params in registration order, as
 * model/qwen3vl.h registers them). The baseline's settings are read from the trace (dp, the
 * overlap flags, distributed or not, the bucket count as --ddp-num-buckets), then
 * baseline_flags (tdm_plan_parse_flags) change what the trace cannot show (a --ddp-bucket-size,
 * --bf16). The link is fitted to the measured collectives, keeping link.alpha_us when >= 0 and
 * link.gbps when > 0. */
struct tdm_prof_trace;
typedef struct tdm_plan_trace_in {
    const char *path;
    const char *const *unit_names; /* [n_units] */
    int n_units;
    const tdm_plan_param *params; /* [n_params] */
    int n_params;
    const char *baseline_flags; /* NULL: none */
    tdm_plan_link link;
    int comm_thread_nice; /* the run's --comm-thread-nice: the share its communication thread gets beside compute */
    double cpu_us_per_mb; /* < 0: measured, the communication threads' CPU time (analysis.json beside the
                             trace) over the bytes their collectives moved; 0 when not there */
    double speed_beside;  /* > 0: the model's speed_beside (also to fit the link to an overlapped baseline) */
    double lost_share;    /* > 0: the model's lost_share */
    /* the run's --comm-progress (thread | inline); NULL or "": analysis.json's, else thread */
    const char *comm_progress;
    const struct tdm_prof_trace *trace; /* the trace already read (tdm_plan_trace_read), or NULL: read path */
    /* what analysis.json beside it says, already read (tdm_plan_run_info_read), or NULL: read it */
    const struct tdm_plan_run_info *run;
    double run_comm_cpu_ms; /* with run: the communication threads' CPU ms it gave */
    const int *step_weight; /* [n_step_weight]: how many times each of the steps all ranks hold counts (a resample
                               of them); NULL: each once. The others count 0 */
    int n_step_weight;
} tdm_plan_trace_in;

int tdm_plan_from_trace(const tdm_plan_trace_in *in, tdm_plan_model *m, char *notes, int notes_cap, tdm_error *err);
/* Reads tandem's trace (trace.json, or the folder holding it) for tdm_plan_trace_in's trace; free it with
 * tdm_prof_trace_free. */
int tdm_plan_trace_read(const char *path, struct tdm_prof_trace *pt, tdm_error *err);

/* Fits own time = alpha * steps + wire / beta (tdm_plan_coll_factors) over n measured
 * collectives; keeps l->alpha_us when alpha_given and l->gbps when gbps_given. */
void tdm_plan_fit_link(const double *steps, const double *wire, const double *own_us, int n, tdm_plan_link *l,
                       int alpha_given, int gbps_given);

/* What analysis.json beside a tandem trace (the trace file or its folder) says of the traced run: -1 / "" for
 * what it does not say (no file, or a trace written before it said so). */
typedef struct tdm_plan_run_info {
    int shared_memory;      /* the ranks' collectives went through shared memory */
    char transport[160];    /* "shared memory (pml ob1, btl vader)", "MPICH device ch4:ofi" */
    char comm_progress[16]; /* thread | inline: the run's --comm-progress */
    int comm_thread_nice;   /* the run's --comm-thread-nice (a run with a communication thread) */
} tdm_plan_run_info;

/* Reads analysis.json beside trace_path (the trace file or its folder) into *ri, and the CPU ms the threads named
 * comm... took beside compute less their polls while compute waited (NaN when the file has no thread table);
 * no file gives what it does not say. -1 (err: one sentence naming the file) when it cannot be read, does not
 * parse, or holds a field of its own of another type or range than the profiler writes. */
/* What a trace without analysis.json says: nothing (-1, ""). */
void tdm_plan_run_info_init(tdm_plan_run_info *ri);
int tdm_plan_run_info_read(const char *trace_path, tdm_plan_run_info *ri, double *comm_cpu_ms, tdm_error *err);
/* The same from the file's text (name: for the messages); exposed for the fuzz target. */
int tdm_plan_run_info_parse(const char *text, size_t len, const char *name, tdm_plan_run_info *ri, double *comm_cpu_ms,
                            tdm_error *err);

/* ---- plan_doctor.c ------------------------------------------------------------------------- */

/* One progress mode's line of tandem doctor's JSON report (tandem doctor --json FILE), as tandem plan takes it
 * (--doctor FILE): the compute lost per MB moved (0 for a figure below 0, noise) and the collectives' speed
 * beside compute against alone (clipped to 0.001..1), with what the report says of where it was measured. */
typedef struct tdm_plan_doctor {
    char mode[16];        /* thread | inline */
    double cpu_us_per_mb; /* the model's cpu_us_per_mb */
    double speed;         /* the model's speed_beside */
    double lost_share;    /* the model's lost_share: the compute lost over the compute's time beside the collectives
                             (alone plus lost); NaN when the report does not say the compute's time */
    double mb;            /* each collective's buffer in the probe; NaN when not said */
    int comm_thread_nice; /* the probe's communication thread's niceness; -1 when not said */
    int ranks;            /* 0 when not said */
    int shared_memory;    /* -1 when not said */
    char transport[160];
} tdm_plan_doctor;

/* The share of its time compute loses while collectives are in flight beside it: lost_us_per_mb (0 below 0) times
 * moved_mb over the compute's time there (compute_ms alone plus what it lost). NaN when a figure is missing. */
double tdm_plan_lost_share(double lost_us_per_mb, double moved_mb, double compute_ms);

/* Parses the report's text (`name` starts the sentences) for progress mode `mode` (thread or inline); -1
 * with one sentence when it is not a doctor's report of this version, or has no usable line for the mode. */
int tdm_plan_doctor_parse(const char *text, size_t len, const char *name, const char *mode, tdm_plan_doctor *d,
                          tdm_error *err);
int tdm_plan_doctor_load(const char *path, const char *mode, tdm_plan_doctor *d, tdm_error *err);

/* ---- plan_torch.c -------------------------------------------------------------------------- */

/* Builds m from a PyTorch DDP trace (Kineto JSON, read by runs/trace.h; the first rank of a
 * file or folder): per ProfilerStep the compute streams' timeline, the forward (kernels
 * launched from the step's thread) and the backward (from autograd's thread), each gradient
 * all-reduce's launch mapped to the compute it followed (its bucket's ready time) with its
 * bytes, the optimizer after the backward, the link fitted to the all-reduces at the trace's
 * group size (keeping link.alpha_us when >= 0 and link.gbps when > 0). Ready time is
 * interpolated linearly over the cumulative bytes of each measured bucket, so other bucket
 * sizes can be cut (docs/plan.md). Baseline: DDP, overlap-grad-reduce on, the measured
 * buckets (given_cut), CPU per MB cpu_us_per_mb (< 0: 0, device collectives take no compute).
 * Tandem's own trace fails with a sentence asking for --model. */
int tdm_plan_from_torch(const char *path, tdm_plan_link link, double cpu_us_per_mb, tdm_plan_model *m, char *notes,
                        int notes_cap, tdm_error *err);
/* The same from traces already read (runs/trace.h); path names them in the sentences. */
struct tdm_runs_set;
int tdm_plan_from_runs(const struct tdm_runs_set *runs, const char *path, tdm_plan_link link, double cpu_us_per_mb,
                       tdm_plan_model *m, char *notes, int notes_cap, tdm_error *err);

#endif
