/* trace_internal.h - what the readers of src/runs share beyond trace.h: the growth state of a
 * trace's arrays and its name index, and the helpers that fill them. Not for other modules. */
#ifndef TDM_RUNS_TRACE_INTERNAL_H
#define TDM_RUNS_TRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "runs/trace.h"

struct tdm_runs_x {
    int32_t *index; /* open addressing over names, -1 empty */
    size_t index_cap;
    uint64_t *hashes; /* per name */
    size_t *lens;
    char **raws; /* the bytes as read (== names[i] unless sanitising changed them) */
    size_t names_cap, spans_cap, steps_cap, colls_cap;
    int8_t *kinds;         /* per name: [2 * id] as a device kernel, [2 * id + 1] as a CPU operator; -1 unknown */
    int64_t *step_numbers; /* distinct ProfilerStep numbers seen (HTA counts them) */
    int64_t n_step_numbers, step_numbers_cap;
};

void tdm_runs_add_step(tdm_runs_trace *t, int64_t number, double ts, double dur);
/* Appends c; returns its index. c->span is the index of the span it describes (as read). */
int32_t tdm_runs_add_coll(tdm_runs_trace *t, const tdm_runs_coll *c);
/* The step whose CPU window holds ts, -1 when none (after tdm_runs_trace_finish). */
int64_t tdm_runs_step_at(const tdm_runs_trace *t, double ts);
/* The kind of a CPU operator: communication (gloo:, nccl:, c10d::, record_param_comms, hccl:),
 * other (ProfilerStep envelopes) or compute. */
int tdm_runs_cpu_kind(const char *name);
/* tdm_runs_kind_of (device) or tdm_runs_cpu_kind of names[id], computed once per name. */
int tdm_runs_name_kind(tdm_runs_trace *t, int32_t id, int device);
/* Records a ProfilerStep#N name seen on a non-kernel event, for HTA's rules. */
void tdm_runs_saw_step_name(tdm_runs_trace *t, int64_t number, double ts, double dur);

#endif
