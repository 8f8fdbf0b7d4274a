/* trace_tandem.c - tandem's own traces (prof/trace.h) read as runs: one trace per rank, its
 * per-step figures computed by tandem's in-process analysis (prof/analysis.h), so that
 * `tandem analyze` reports the same hidden and exposed time as the run did. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "prof/analysis.h"
#include "prof/prof.h"
#include "prof/profiler.h"
#include "prof/trace.h"
#include "runs/trace.h"
#include "runs/trace_internal.h"

/* tandem writes ranks' traces of a few MB; a bound keeps a wrong file from taking the memory */
#define TANDEM_TRACE_MAX ((size_t)2 << 30)

int tdm_runs_read_tandem(tdm_runs_set *s, const char *path, tdm_error *err);

int tdm_runs_read_tandem(tdm_runs_set *s, const char *path, tdm_error *err) {
    tdm_prof_trace pt;
    if (tdm_prof_trace_load(path, TANDEM_TRACE_MAX, &pt, err) != 0) return -1;
    for (int ri = 0; ri < pt.n_ranks; ri++) {
        int32_t rank = pt.ranks[ri];
        int64_t lo = 0, hi;
        while (lo < pt.n && pt.recs[lo].rank != rank) lo++;
        for (hi = lo; hi < pt.n && pt.recs[hi].rank == rank; hi++) continue;
        tdm_runs_trace *t = tdm_runs_trace_new(path);
        t->format = TDM_RUNS_FMT_TANDEM;
        t->rank = rank;
        t->world_size = pt.n_ranks;
        snprintf(t->backend, sizeof t->backend, "tandem");
        int64_t k = tdm_prof_analyze_rank(pt.recs + lo, hi - lo, rank, NULL, 0);
        tdm_prof_step_stats *st = tdm_xmalloc((size_t)(k + 1) * sizeof *st);
        k = tdm_prof_analyze_rank(pt.recs + lo, hi - lo, rank, st, k);
        t->given = tdm_xmalloc((size_t)(k + 1) * sizeof *t->given);
        for (int64_t i = 0; i < k; i++) {
            const tdm_prof_step_stats *a = &st[i];
            double step = a->step_ms * 1e3, compute = a->compute_ms * 1e3, exposed = a->exposed_ms * 1e3;
            double idle = step - compute - exposed;
            t->given[i] = (tdm_runs_given_step){.number = a->step,
                                                .step = step,
                                                .compute = compute,
                                                .comm = a->comm_ms * 1e3,
                                                .exposed = exposed,
                                                .hidden = a->hidden_ms * 1e3,
                                                .idle = idle > 0 ? idle : 0,
                                                .last_comm = a->last_comm_ms * 1e3};
        }
        t->n_given = k;
        free(st);
        /* spans for the timeline: one lane per (thread) of the rank */
        int32_t tids[256];
        int n_tids = 0;
        for (int64_t i = lo; i < hi; i++) {
            const tdm_prof_rec *r = &pt.recs[i];
            if (r->instant) continue;
            int lane;
            for (lane = 0; lane < n_tids && tids[lane] != r->tid; lane++) continue;
            if (lane == n_tids) {
                if (n_tids == 256) continue;
                tids[n_tids++] = r->tid;
            }
            int envelope =
                r->cat == TDM_PROF_PHASE && r->thread_kind == TDM_PROF_THREAD_COMPUTE && !strcmp(r->name, "step");
            if (envelope) tdm_runs_add_step(t, r->arg, r->t0_us, r->t1_us - r->t0_us);
            tdm_runs_span *sp = tdm_runs_add_span(t);
            sp->ts = r->t0_us;
            sp->dur = r->t1_us - r->t0_us;
            sp->name = tdm_runs_intern(t, r->name, strlen(r->name));
            sp->lane = lane;
            sp->kind = envelope || r->cat == TDM_PROF_WAIT || r->cat == TDM_PROF_DATA || r->cat == TDM_PROF_MARK
                           ? TDM_RUNS_OTHER
                       : r->thread_kind == TDM_PROF_THREAD_COMM || r->cat == TDM_PROF_COMM ? TDM_RUNS_COMM
                                                                                           : TDM_RUNS_COMPUTE;
            if (r->cat == TDM_PROF_COMM) { /* a collective ("grad reduce-scatter", "param all-gather"), started to
                                              done, with its bytes where the trace has them */
                const int k = tdm_runs_coll_kind_of(r->name);
                tdm_runs_coll c = {.span = (int32_t)(sp - t->spans),
                                   .kind = (uint8_t)(k < 0 ? TDM_RUNS_COLL_OTHER : k),
                                   .launch_ts = NAN,
                                   .ts = sp->ts,
                                   .dur = sp->dur,
                                   .bytes = r->bytes,
                                   .group_size = pt.n_ranks};
                sp->coll = tdm_runs_add_coll(t, &c);
            }
        }
        t->threads = tdm_xmalloc((size_t)(n_tids + 1) * sizeof *t->threads);
        for (int i = 0; i < n_tids; i++) {
            char b[64];
            snprintf(b, sizeof b, "thread %d", tids[i] % TDM_PROF_TRACE_LANE_TID);
            t->threads[i] = tdm_xstrdup(b);
        }
        t->n_threads = n_tids;
        tdm_runs_trace_finish(t);
        tdm_runs_set_add(s, t);
    }
    tdm_prof_trace_free(&pt);
    return 0;
}
