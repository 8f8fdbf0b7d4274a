/* plan_doctor.c - tandem doctor's JSON report (tandem doctor --json FILE) as tandem plan takes it: one
 * progress mode's beside-compute figures (compute lost per MB, speed against alone), and the traced run's
 * settings that analysis.json beside a trace says (docs/plan.md, "Measuring the cost beside compute"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/json.h"
#include "plan/plan.h"

/* 256 KiB holds a doctor's report many times over */
#define DOCTOR_MAX ((size_t)1 << 18)

static const tdm_json *number(const tdm_json *obj, const char *key) {
    const tdm_json *v = tdm_json_get(obj, key);
    return v && v->type == TDM_JSON_NUMBER && isfinite(v->num) ? v : NULL;
}

double tdm_plan_lost_share(double lost_us_per_mb, double moved_mb, double compute_ms) {
    if (!isfinite(lost_us_per_mb) || !(moved_mb >= 0) || !(compute_ms > 0) || !isfinite(moved_mb + compute_ms))
        return NAN;
    const double lost_ms = (lost_us_per_mb > 0 ? lost_us_per_mb : 0) * moved_mb / 1e3;
    return lost_ms / (compute_ms + lost_ms);
}

int tdm_plan_doctor_parse(const char *text, size_t len, const char *name, const char *mode, tdm_plan_doctor *d,
                          tdm_error *err) {
    memset(d, 0, sizeof *d);
    d->shared_memory = -1;
    if (strcmp(mode, "thread") && strcmp(mode, "inline"))
        return tdm_errorf(err, "progress mode '%s': expected thread or inline", mode);
    tdm_error je;
    tdm_json_doc *doc = tdm_json_parse(text, len, name, &je);
    if (!doc) return tdm_errorf(err, "%s (expected tandem doctor's JSON report: tandem doctor --json FILE)", je.msg);
    const tdm_json *root = tdm_json_root(doc), *ver = number(root, "tandem_doctor");
    int rc = 0;
    if (!ver) {
        rc = tdm_errorf(err,
                        "%s: no \"tandem_doctor\" version: expected tandem doctor's JSON report (tandem doctor "
                        "--json FILE)",
                        name);
        goto out;
    }
    if (ver->num != 1) {
        rc = tdm_errorf(err, "%s: tandem_doctor %g: expected version 1 (run this tandem's doctor again)", name,
                        ver->num);
        goto out;
    }
    const tdm_json *ranks = number(root, "ranks"), *shm = tdm_json_get(root, "shared_memory"),
                   *tr = tdm_json_get(root, "transport");
    d->ranks = ranks && ranks->num >= 1 && ranks->num <= 1e7 ? (int)ranks->num : 0;
    if (shm && (shm->type == TDM_JSON_TRUE || shm->type == TDM_JSON_FALSE))
        d->shared_memory = shm->type == TDM_JSON_TRUE;
    if (tr && tr->type == TDM_JSON_STRING) snprintf(d->transport, sizeof d->transport, "%s", tr->str);
    const tdm_json *bc = tdm_json_get(root, "beside_compute");
    if (!bc || bc->type != TDM_JSON_OBJECT) {
        rc = tdm_errorf(err,
                        "%s: no beside_compute figures (the doctor ran on one rank or with --beside-ms 0): "
                        "expected a report of mpirun -np 2 (or more) tandem doctor --json FILE",
                        name);
        goto out;
    }
    const tdm_json *mb = number(bc, "mb"), *nice = number(bc, "comm_thread_nice"), *line = tdm_json_get(bc, mode);
    if (!line || line->type != TDM_JSON_OBJECT) {
        rc = tdm_errorf(err, "%s: beside_compute has no \"%s\" figures: expected an object for each progress mode",
                        name, mode);
        goto out;
    }
    const tdm_json *lost = number(line, "compute_lost_us_per_mb"), *speed = number(line, "speed"),
                   *moved = number(line, "moved_mb"), *compute = number(line, "compute_ms");
    if (!compute) compute = number(bc, "compute_ms"); /* the first mode's, all a report of 8c35bc8 says */
    if (!lost) {
        rc = tdm_errorf(err, "%s: beside_compute.%s.compute_lost_us_per_mb: expected a number", name, mode);
        goto out;
    }
    if (!speed || !(speed->num > 0)) {
        rc = tdm_errorf(err, "%s: beside_compute.%s.speed: %s", name, mode,
                        speed ? "expected a number above 0"
                              : "not measured (fewer than 3 collectives completed beside the compute): run tandem "
                                "doctor again with a longer --beside-ms");
        goto out;
    }
    snprintf(d->mode, sizeof d->mode, "%s", mode);
    /* as the doctor's printed flags take them: a loss below 0 is noise, a speed above 1 is alone's; and the
     * slowest speed tandem plan takes */
    d->cpu_us_per_mb = lost->num > 0 ? lost->num : 0;
    d->speed = speed->num > 1 ? 1 : speed->num < 0.001 ? 0.001 : speed->num;
    d->mb = mb && mb->num > 0 ? mb->num : NAN;
    d->lost_share = tdm_plan_lost_share(lost->num, moved ? moved->num : NAN, compute ? compute->num : NAN);
    d->comm_thread_nice = nice && nice->num >= 0 && nice->num <= 19 ? (int)nice->num : -1;
out:
    tdm_json_free(doc);
    return rc;
}

int tdm_plan_doctor_load(const char *path, const char *mode, tdm_plan_doctor *d, tdm_error *err) {
    size_t len;
    char *text = tdm_read_file(path, DOCTOR_MAX, &len, err);
    if (!text) return -1;
    int rc = tdm_plan_doctor_parse(text, len, path, mode, d, err);
    free(text);
    return rc;
}
