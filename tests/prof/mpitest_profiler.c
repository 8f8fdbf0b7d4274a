/* Multi-rank test of a profiler session (run under mpirun -np 2): the tool config's
 * step range is honoured, each rank writes its trace, rank 0 writes a merged trace that
 * parses back with both ranks, balanced events, and the analysis of exactly the
 * profiled steps. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "harness.h"
#include "prof/profiler.h"
#include "prof/trace.h"

static int rank, world;
static char dir[256];

static void spin_us(int us) {
    uint64_t end = tdm_now_ns() + (uint64_t)us * 1000;
    while (tdm_now_ns() < end) {}
}

static void test_session(void) {
    char cfgtext[512];
    snprintf(cfgtext, sizeof cfgtext,
             "{\"profile\": {\"enable\": true, \"ranks\": [-1], \"start_step\": 2, \"end_step\": 3,"
             " \"level\": 1, \"save_path\": \"%s\"}}",
             dir);
    tdm_prof_config cfg;
    tdm_error err = {{0}};
    CHECK(tdm_prof_config_parse(cfgtext, strlen(cfgtext), "tools.json", &cfg, &err) == 0, "%s", err.msg);
    CHECK(tdm_prof_session_start(&cfg, MPI_COMM_WORLD, &err) == 0, "%s", err.msg);
    for (int step = 1; step <= 4; step++) {
        tdm_prof_step_begin(step);
        tdm_prof_begin(TDM_PROF_PHASE, 0, "forward", -1);
        spin_us(200);
        tdm_prof_end(TDM_PROF_PHASE, 0);
        uint64_t c0 = tdm_now_ns();
        spin_us(100);
        tdm_prof_complete(TDM_PROF_COMM, 1, "allreduce", c0, tdm_now_ns(), step);
        tdm_prof_step_end(step);
    }
    CHECK(tdm_prof_session_finish(MPI_COMM_WORLD, &err) == 0, "%s", err.msg);
    MPI_Barrier(MPI_COMM_WORLD);
    char path[512];
    snprintf(path, sizeof path, "%s/trace_rank%d.json", dir, rank);
    CHECK(tdm_file_exists(path), "%s written", path);
    if (rank != 0) return;
    tdm_prof_trace t;
    snprintf(path, sizeof path, "%s/trace.json", dir);
    int rc = tdm_prof_trace_load(path, 1 << 26, &t, &err);
    CHECK(rc == 0, "merged trace parses: %s", err.msg);
    if (rc == 0) {
        CHECK(t.n_ranks == world, "ranks %d", t.n_ranks);
        int steps[8] = {0}, comm = 0;
        for (int64_t i = 0; i < t.n; i++) {
            if (!strcmp(t.recs[i].name, "step") && t.recs[i].arg >= 0 && t.recs[i].arg < 8) steps[t.recs[i].arg]++;
            if (t.recs[i].cat == TDM_PROF_COMM) comm++;
            CHECK(t.recs[i].t1_us >= t.recs[i].t0_us, "balanced");
        }
        CHECK(steps[1] == 0 && steps[2] == world && steps[3] == world && steps[4] == 0, "steps 2..3 only");
        CHECK(comm == 2 * world, "comm events %d", comm);
        tdm_prof_trace_free(&t);
    }
    snprintf(path, sizeof path, "%s/analysis.json", dir);
    size_t len;
    char *text = tdm_read_file(path, 1 << 24, &len, &err);
    CHECK(text != NULL, "%s", err.msg);
    if (text) {
        tdm_json_doc *d = tdm_json_parse(text, len, path, &err);
        CHECK(d != NULL, "%s", err.msg);
        if (d) {
            const tdm_json *r = tdm_json_root(d);
            const tdm_json *steps = tdm_json_get(r, "steps");
            CHECK(steps && (int)steps->len == 2 * world, "per-rank, per-step rows");
            const tdm_json *th = tdm_json_get(r, "threads");
            CHECK(th && th->len >= (size_t)world, "CPU statistics of each rank's threads");
            double exposed = -1;
            tdm_json_get_num(tdm_json_get(r, "mean"), "exposed_comm_ms", &exposed, &err);
            CHECK(exposed > 0.05, "the comm ran outside compute: exposed %g ms", exposed);
            tdm_json_free(d);
        }
        free(text);
    }
}

static void test_disabled_writes_nothing(void) {
    tdm_prof_config cfg;
    tdm_prof_config_default(&cfg);
    snprintf(cfg.save_path, sizeof cfg.save_path, "%s/off", dir);
    tdm_error err = {{0}};
    CHECK(tdm_prof_session_start(&cfg, MPI_COMM_WORLD, &err) == 0, "%s", err.msg);
    tdm_prof_step_begin(1);
    CHECK(!tdm_prof_on(0), "not recording");
    tdm_prof_step_end(1);
    CHECK(tdm_prof_session_finish(MPI_COMM_WORLD, &err) == 0, "%s", err.msg);
    CHECK(!tdm_file_exists(cfg.save_path), "nothing written");
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int pid = (int)getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(dir, sizeof dir, "/tmp/tdm_mpitest_profiler_%d", pid);
    RUN(test_session);
    RUN(test_disabled_writes_nothing);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    int failed = t_failed, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) {
        if (any && !t_failed) t_failed = 1; /* another rank failed a check */
        return TEST_SUMMARY();
    }
    return any ? 1 : 0;
}
