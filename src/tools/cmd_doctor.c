/* cmd_doctor.c - `tandem doctor`: measures in a few seconds what data parallelism costs on this machine
 * (the sgemm ceiling, memcpy, page faults, tandem's vector sum, and the reduce-scatter and all-gather of
 * the ranks it was started with, per MB), names the MPI library and transport, and says which settings
 * tandem uses and why (docs/user-guide.md, "tandem doctor"). Under mpirun -np 2 (or more); with one
 * rank only the local measurements.
 */
#include <math.h>
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "distributed/agree.h"
#include "distributed/comm.h"
#include "distributed/probe.h"
#include "kernels/kernels.h"
#include "plan/plan.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/mpi_setup.h"
#include "train/hosts.h"

int openblas_get_num_threads(void);

typedef struct doctor_opts {
    double max_mb;
    int reps;
    int gemm_n;
    double beside_ms, beside_mb;
    int together;
    int comm_thread_nice;
    const char *json;
} doctor_opts;

static const tdm_flag FLAGS[] = {
    {.name = "max-mb",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(doctor_opts, max_mb),
     .lo = 0.25,
     .hi = 1024,
     .def = "16",
     .metavar = "MB",
     .help = "the largest buffer the collectives are measured on; also a quarter and a sixteenth of it, and the "
             "size of the local measurements"},
    {.name = "reps",
     .kind = TDM_FLAG_INT,
     .off = offsetof(doctor_opts, reps),
     .lo = 1,
     .hi = 64,
     .def = "5",
     .metavar = "N",
     .help = "timed repetitions of each measurement (the median is shown)"},
    {.name = "gemm-size",
     .kind = TDM_FLAG_INT,
     .off = offsetof(doctor_opts, gemm_n),
     .lo = 64,
     .hi = 8192,
     .def = "1024",
     .metavar = "N",
     .help = "the sgemm ceiling's product is N x N x N"},
    {.name = "beside-ms",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(doctor_opts, beside_ms),
     .lo = 0,
     .hi = 60000,
     .def = "300",
     .metavar = "MS",
     .help = "compute a round of the beside-compute probe lasts (a reduce-scatter and an all-gather of a quarter "
             "of --max-mb, or --beside-mb, kept in flight beside it); 0 skips it"},
    {.name = "beside-mb",
     .kind = TDM_FLAG_DOUBLE,
     .off = offsetof(doctor_opts, beside_mb),
     .lo = 0,
     .hi = 1024,
     .def = "0",
     .metavar = "MB",
     .help = "each collective's buffer in the beside-compute probe: about a gradient bucket of the run to plan "
             "(a collective's speed there depends on its size); 0: a quarter of --max-mb"},
    {.name = "together",
     .kind = TDM_FLAG_INT,
     .off = offsetof(doctor_opts, together),
     .lo = 0,
     .hi = 64,
     .def = "8",
     .metavar = "K",
     .help = "K reduce-scatters (and K all-gathers) of --max-mb / K each posted at once against one by one: what "
             "a step pays when its buckets go out together; 0 or 1 skips it"},
    {.name = "comm-thread-nice",
     .kind = TDM_FLAG_INT,
     .off = offsetof(doctor_opts, comm_thread_nice),
     .lo = 0,
     .hi = 19,
     .def = "10",
     .metavar = "N",
     .help = "the communication thread's niceness in the beside-compute probe (as tandem train's flag)"},
    {.name = "json",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(doctor_opts, json),
     .metavar = "FILE",
     .help = "also write every figure to FILE as JSON (written whole or not at all): tandem plan --doctor reads "
             "its beside-compute figures"},
};

static const tdm_flags P = {
    .command = "tandem doctor",
    .usage = "mpirun -np 2 tandem doctor [flags]   (or tandem doctor: one rank, local measurements only)",
    .about = "Measures what data parallelism costs on this machine, in a few seconds: the sgemm ceiling, memcpy,\n"
             "first-touch page faults, tandem's vector sum, and the reduce-scatter and all-gather between the\n"
             "ranks per MB (wall time and the calling thread's CPU time); what a collective in flight costs the\n"
             "compute beside it and how fast it moves there (what tandem plan needs to predict an overlap);\n"
             "names the MPI library and its transport; and says which settings tandem uses and why.",
    .flags = FLAGS,
    .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
};

static double max_over(double v) {
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return v;
}

static double min_over(double v) {
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    return v;
}

/* The flags tandem plan takes for one progress mode's figures: a loss below 0 (noise) as 0, a speed above 1 as 1;
 * a communication thread's cost as the share of the compute's time it takes (it follows the time its collectives
 * are in flight), inline progress's per MB moved (it follows the bytes). */
static void plan_flags(const tdm_beside_cost *b, double share, int thread, char *out, size_t cap) {
    if (thread)
        snprintf(out, cap, "--comm-lost-share %.3f --comm-speed-beside %.3f", share, b->speed < 1 ? b->speed : 1.0);
    else
        snprintf(out, cap, "--comm-cpu-us-per-mb %.0f --comm-speed-beside %.3f",
                 b->lost_us_per_mb > 0 ? b->lost_us_per_mb : 0.0, b->speed < 1 ? b->speed : 1.0);
}

/* What a collective in flight costs the compute beside it, per progress mode, and the flags that give it to
 * tandem plan; the figures into js (rank 0) as the "beside_compute" object. */
static int beside(const doctor_opts *o, int rank, tdm_strbuf *js, tdm_error *err) {
    static const struct {
        tdm_ddp_progress mode;
        const char *name;
    } modes[] = {{TDM_DDP_PROGRESS_THREAD, "thread"}, {TDM_DDP_PROGRESS_INLINE, "inline"}};
    tdm_beside_cost b[2];
    double share[2]; /* the share of the compute's time lost (tdm_plan_lost_share) */
    for (int i = 0; i < 2; i++) {
        if (tdm_probe_beside_compute(MPI_COMM_WORLD, modes[i].mode, o->comm_thread_nice,
                                     o->beside_mb > 0 ? o->beside_mb : o->max_mb / 4, o->beside_ms, o->reps, 0, &b[i],
                                     err) != 0)
            return -1;
        share[i] = tdm_plan_lost_share(b[i].lost_us_per_mb, b[i].moved_mb, b[i].compute_ms);
        if (rank == 0 && i == 0)
            printf("  beside compute   a reduce-scatter and an all-gather of %.2f MB each kept in flight while the "
                   "rank computes\n"
                   "                   %.0f ms (pieces of %.2f ms, a progress call after each); the thread at nice "
                   "%d\n"
                   "      progress   compute lost us/MB   share of its time   speed vs alone   MB moved\n",
                   b[i].mb, b[i].compute_ms, b[i].chunk_ms, o->comm_thread_nice);
        if (rank == 0) {
            printf("      %-8s   %18.1f   %17.3f   %14.3f   %8.1f\n", modes[i].name, b[i].lost_us_per_mb, share[i],
                   b[i].speed, b[i].moved_mb);
            fflush(stdout);
        }
    }
    if (rank == 0) {
        tdm_sb_puts(js, ",\n\"beside_compute\": {");
        tdm_sb_json_key_num(js, "mb", b[0].mb), tdm_sb_puts(js, ", ");
        tdm_sb_json_key_num(js, "compute_ms", b[0].compute_ms), tdm_sb_puts(js, ", ");
        tdm_sb_json_key_num(js, "piece_ms", b[0].chunk_ms);
        tdm_sb_printf(js, ", \"comm_thread_nice\": %d", o->comm_thread_nice);
        for (int i = 0; i < 2; i++) {
            char flags[128] = "";
            if (isfinite(b[i].speed))
                plan_flags(&b[i], share[i], modes[i].mode == TDM_DDP_PROGRESS_THREAD, flags, sizeof flags);
            if (!isfinite(b[i].speed))
                printf("  tandem plan      %s: fewer than 3 collectives completed beside the compute; raise "
                       "--beside-ms\n",
                       modes[i].name);
            else printf("  tandem plan      %s: %s\n", modes[i].name, flags);
            tdm_sb_printf(js, ",\n  \"%s\": {", modes[i].name);
            tdm_sb_json_key_num(js, "compute_ms", b[i].compute_ms), tdm_sb_puts(js, ", ");
            tdm_sb_json_key_num(js, "compute_lost_us_per_mb", b[i].lost_us_per_mb), tdm_sb_puts(js, ", ");
            tdm_sb_json_key_num(js, "compute_lost_share", share[i]), tdm_sb_puts(js, ", ");
            tdm_sb_json_key_num(js, "speed", b[i].speed), tdm_sb_puts(js, ", ");
            tdm_sb_json_key_num(js, "moved_mb", b[i].moved_mb), tdm_sb_puts(js, ", ");
            tdm_sb_json_key_string(js, "plan_flags", flags);
            tdm_sb_putc(js, '}');
        }
        tdm_sb_puts(js, "}");
        fflush(stdout);
    }
    return 0;
}

/* K collectives posted at once against one by one, per kind; the figures into js (rank 0) as "posted_together". */
static int together(const doctor_opts *o, int rank, tdm_strbuf *js, tdm_error *err) {
    tdm_together_cost t;
    if (tdm_probe_posted_together(MPI_COMM_WORLD, o->max_mb / o->together, o->together, o->reps, 0, &t, err) != 0)
        return -1;
    const double rs = t.rs_one_ms > 0 ? t.rs_together_ms / t.rs_one_ms : NAN,
                 ag = t.ag_one_ms > 0 ? t.ag_together_ms / t.ag_one_ms : NAN;
    if (rank != 0) return 0;
    printf("  posted together  %d collectives of %.2f MB posted at once, then waited for, against one by one: ms for "
           "all\n"
           "                   on the rank that posts one collective's time after the others\n"
           "      kind             one by one   together   together / one by one\n"
           "      reduce-scatter   %10.2f   %8.2f   %21.3f\n"
           "      all-gather       %10.2f   %8.2f   %21.3f\n",
           t.k, t.mb, t.rs_one_ms, t.rs_together_ms, rs, t.ag_one_ms, t.ag_together_ms, ag);
    fflush(stdout);
    tdm_sb_printf(js, ",\n\"posted_together\": {\"k\": %d, ", t.k);
    tdm_sb_json_key_num(js, "mb", t.mb);
    const double f[2][3] = {{t.rs_one_ms, t.rs_together_ms, rs}, {t.ag_one_ms, t.ag_together_ms, ag}};
    for (int i = 0; i < 2; i++) {
        tdm_sb_printf(js, ", \"%s\": {", i ? "all_gather" : "reduce_scatter");
        tdm_sb_json_key_num(js, "one_by_one_ms", f[i][0]), tdm_sb_puts(js, ", ");
        tdm_sb_json_key_num(js, "together_ms", f[i][1]), tdm_sb_puts(js, ", ");
        tdm_sb_json_key_num(js, "ratio", f[i][2]);
        tdm_sb_putc(js, '}');
    }
    tdm_sb_putc(js, '}');
    return 0;
}

/* One collectives row of the report: the figures' keys, without the braces around them. */
static void json_coll_cost(tdm_strbuf *js, const tdm_coll_cost *c) {
    tdm_sb_json_key_num(js, "mb", c->mb), tdm_sb_puts(js, ", ");
    tdm_sb_json_key_num(js, "reduce_scatter_ms_per_mb", c->rs_wall_ms), tdm_sb_puts(js, ", ");
    tdm_sb_json_key_num(js, "reduce_scatter_cpu_ms_per_mb", c->rs_cpu_ms), tdm_sb_puts(js, ", ");
    tdm_sb_json_key_num(js, "all_gather_ms_per_mb", c->ag_wall_ms), tdm_sb_puts(js, ", ");
    tdm_sb_json_key_num(js, "all_gather_cpu_ms_per_mb", c->ag_cpu_ms);
}

int cmd_doctor(int argc, char **argv) {
    int early = tdm_cli_early(&P, argc, argv); /* --help, --version: before MPI */
    if (early >= 0) return early;
    int rank, world;
    tdm_tool_mpi_init(&argc, &argv, &rank, &world);
    doctor_opts o;
    memset(&o, 0, sizeof o);
    tdm_flags_defaults(&P, &o);
    tdm_error err = {{0}};
    int ok = tdm_flags_parse(&P, &o, argc - 1, argv + 1, NULL, NULL, &err) == 0;
    int n_bad;
    const int first_bad = tdm_first_failed_rank(ok, MPI_COMM_WORLD, &n_bad);
    if (first_bad < world) {
        tdm_tool_report_refusal("doctor", rank, first_bad, n_bad == world, err.msg);
        MPI_Finalize();
        return 2;
    }

    tdm_hosts hosts;
    tdm_hosts_describe(MPI_COMM_WORLD, &hosts);
    tdm_mpi_info mi;
    tdm_mpi_info_get(MPI_COMM_WORLD, &mi);
    const int threads = openblas_get_num_threads();
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    tdm_strbuf sb, js; /* js: the JSON report, built on rank 0 as the figures come */
    tdm_sb_init(&sb);
    tdm_sb_init(&js);
    tdm_mpi_info_format(&mi, &sb);
    if (rank == 0) {
        tdm_sb_printf(&js, "{\"tandem_doctor\": 1, \"tandem_version\": ");
        tdm_sb_json_string(&js, tdm_version(), strlen(tdm_version()));
        tdm_sb_printf(&js, ", \"ranks\": %d, \"one_host\": %s, \"cores\": %ld, \"blas_threads\": %d,\n", world,
                      mi.one_host ? "true" : "false", cores, threads);
        tdm_sb_json_key_string(&js, "processor", hosts.value[TDM_HOSTS_CPU]), tdm_sb_puts(&js, ", ");
        tdm_sb_json_key_string(&js, "isa", hosts.value[TDM_HOSTS_ISA]), tdm_sb_puts(&js, ", ");
        tdm_sb_json_key_string(&js, "openblas", hosts.value[TDM_HOSTS_BLAS]), tdm_sb_puts(&js, ",\n");
        tdm_sb_json_key_string(&js, "mpi", sb.data), tdm_sb_puts(&js, ", ");
        tdm_sb_json_key_string(&js, "transport", mi.transport);
        tdm_sb_printf(&js, ", \"shared_memory\": %s", mi.shared_memory ? "true" : "false");
        printf("tandem doctor: %d rank%s%s, %ld cores online on rank 0's host, %d BLAS thread%s per rank\n", world,
               world == 1 ? "" : "s", mi.one_host ? " on one host" : " on several hosts", cores, threads,
               threads == 1 ? "" : "s");
        printf("  processor        %s (%s)\n", hosts.value[TDM_HOSTS_CPU], hosts.value[TDM_HOSTS_ISA]);
        printf("  OpenBLAS         %s\n", hosts.value[TDM_HOSTS_BLAS]);
        printf("  MPI              %s\n", sb.data);
        fflush(stdout);
    }
    tdm_hosts_free(&hosts);

    /* every rank computes at once, as in training */
    MPI_Barrier(MPI_COMM_WORLD);
    const double gf = tdm_blas_sgemm_gflops(o.gemm_n, 0.4);
    const double gf_min = min_over(gf), gf_max = max_over(gf);
    const double mb = o.max_mb;
    const double cp = max_over(tdm_probe_memcpy(mb, o.reps));
    const double vs = max_over(tdm_probe_vector_sum(mb, o.reps));
    double fresh, reused;
    tdm_probe_page_faults(mb, o.reps, &fresh, &reused);
    fresh = max_over(fresh), reused = max_over(reused);
    if (rank == 0) {
        tdm_sb_printf(&js, ",\n\"sgemm_n\": %d, ", o.gemm_n);
        tdm_sb_json_key_num(&js, "sgemm_gflops_fastest", gf_max), tdm_sb_puts(&js, ", ");
        tdm_sb_json_key_num(&js, "sgemm_gflops_slowest", gf_min), tdm_sb_puts(&js, ",\n");
        tdm_sb_json_key_num(&js, "memcpy_ms_per_mb", cp), tdm_sb_puts(&js, ", ");
        tdm_sb_json_key_num(&js, "vector_sum_ms_per_mb", vs), tdm_sb_puts(&js, ", ");
        tdm_sb_json_key_num(&js, "page_faults_fresh_ms_per_mb", fresh), tdm_sb_puts(&js, ", ");
        tdm_sb_json_key_num(&js, "page_faults_reused_ms_per_mb", reused);
        printf("  sgemm ceiling    %.1f GFLOP/s per rank (%d^3, every rank at once; slowest rank %.1f)\n", gf_max,
               o.gemm_n, gf_min);
        printf("  memcpy           %.3f ms/MB (%.1f MB)\n", cp, mb);
        printf("  vector sum       %.3f ms/MB (tandem's y += x, per MB of x)\n", vs);
        printf("  page faults      %.3f ms/MB first touch of fresh pages, %.3f ms/MB reused (%.1fx)\n", fresh, reused,
               reused > 0 ? fresh / reused : 0.0);
        fflush(stdout);
    }

    tdm_coll_cost big = {0}, other = {0}; /* other: the engine tandem does not use here */
    if (world > 1) {
        if (rank == 0)
            printf("  collectives      %d ranks, per MB of the buffer (ms/MB; CPU: the calling thread's)\n"
                   "      size MB   reduce-scatter    CPU   all-gather    CPU   memcpy   CPU/memcpy: RS    AG\n",
                   world);
        if (rank == 0) tdm_sb_puts(&js, ",\n\"collectives\": [");
        for (int k = 2; k >= 0; k--) {
            tdm_coll_cost c;
            double size = mb / (double)(1 << (2 * k));
            if (tdm_probe_collectives(MPI_COMM_WORLD, size, o.reps, 0, &c, &err) != 0) {
                if (rank == 0) fprintf(stderr, "tandem doctor: %s\n", err.msg);
                tdm_sb_free(&sb);
                tdm_sb_free(&js);
                MPI_Finalize();
                return 1;
            }
            if (rank == 0) {
                /* each collective's CPU against one memcpy of the buffer it moves */
                const double per = c.memcpy_ms > 0 ? 1.0 / c.memcpy_ms : 0.0;
                printf("      %7.2f   %14.3f %6.3f   %10.3f %6.3f   %6.3f   %14.2f %5.2f\n", c.mb, c.rs_wall_ms,
                       c.rs_cpu_ms, c.ag_wall_ms, c.ag_cpu_ms, c.memcpy_ms, c.rs_cpu_ms * per, c.ag_cpu_ms * per);
                fflush(stdout);
                tdm_sb_puts(&js, k == 2 ? "\n  {" : ",\n  {");
                json_coll_cost(&js, &c);
                tdm_sb_puts(&js, "}");
            }
            big = c;
        }
        tdm_coll_cost m;
        const int own = tdm_comm_default_own_reduce_scatter();
        if (tdm_probe_collectives_rs(MPI_COMM_WORLD, mb, o.reps, own, 0, &m, &err) == 0 && rank == 0) {
            printf("      %7.2f   %14.3f %6.3f   %10.3f %6.3f   (%s)\n", m.mb, m.rs_wall_ms, m.rs_cpu_ms, m.ag_wall_ms,
                   m.ag_cpu_ms,
                   own ? "MPI_Ireduce_scatter_block and MPI's op, MPI_Iallgather"
                       : "tandem's exchange: vector sum, all-gather in place");
            fflush(stdout);
        }
        other = m;
        if (rank == 0) {
            tdm_sb_puts(&js, "]");
            if (other.mb > 0) { /* the engine TANDEM_REDUCE_SCATTER would switch to, at the largest size */
                tdm_sb_puts(&js, ",\n\"other_engine\": {");
                tdm_sb_json_key_string(&js, "engine", own ? "mpi" : "tandem"), tdm_sb_puts(&js, ", ");
                json_coll_cost(&js, &other);
                tdm_sb_puts(&js, "}");
            }
        }
        if ((o.together >= 2 && together(&o, rank, &js, &err) != 0) ||
            (o.beside_ms > 0 && beside(&o, rank, &js, &err) != 0)) {
            if (rank == 0) fprintf(stderr, "tandem doctor: %s\n", err.msg);
            tdm_sb_free(&sb);
            tdm_sb_free(&js);
            MPI_Finalize();
            return 1;
        }
    } else if (rank == 0) {
        printf("  collectives      not measured: one rank (run under mpirun -np 2 to measure them)\n");
    }

    if (rank == 0) {
        printf("settings tandem uses\n");
        printf("  BLAS threads     %d per rank: %s\n", threads,
               getenv("OPENBLAS_NUM_THREADS") ? "OPENBLAS_NUM_THREADS" : "the cores divided by the ranks on the host");
        if (mi.kind == TDM_MPI_OPEN_MPI && mi.single_copy[0]) {
            const char *why = getenv("TANDEM_SINGLE_COPY_SET");
            printf("  single copy      %s: %s\n", mi.single_copy,
                   why                                                  ? why
                   : getenv("OMPI_MCA_btl_vader_single_copy_mechanism") ? "your setting is kept"
                                                                        : "Open MPI's choice (cross-memory "
                                                                          "attach works here)");
        }
        if (world > 1 && other.mb > 0) {
            const int own = tdm_comm_default_own_reduce_scatter();
            const char *tandem = "tandem's exchange and vector sum", *mpi = "MPI_Ireduce_scatter_block and MPI's op";
            printf("  reduce-scatter   %s: %.3f ms/MB of CPU here against %.3f with %s (%s)\n", own ? tandem : mpi,
                   big.rs_cpu_ms, other.rs_cpu_ms, own ? mpi : tandem,
                   getenv("TANDEM_REDUCE_SCATTER") ? "TANDEM_REDUCE_SCATTER chose"
                   : own ? "tandem's default under Open MPI; TANDEM_REDUCE_SCATTER=mpi for MPI's"
                         : "the default under this MPI; TANDEM_REDUCE_SCATTER=tandem for tandem's");
            printf("  all-gather       %s: %.3f ms/MB of CPU here against %.3f with %s (the same choice)\n",
                   own ? "tandem's exchange" : "MPI_Iallgather", big.ag_cpu_ms, other.ag_cpu_ms,
                   own ? "MPI_Iallgather" : "tandem's exchange");
        }
        printf("  progress         a communication thread per rank at nice 10 (--comm-progress, "
               "--comm-thread-nice)\n");
        if (world > 1 && big.mb > 0) {
            /* A step that trains T tokens per rank costs about 6 N T / F of compute for N trainable parameters
             * at F FLOP/s, and moves 4 N bytes through a reduce-scatter and an all-gather. The extra ranks save
             * compute x (1 - 1/dp); they pay when that exceeds the communication, for any N. */
            const double per_mb = big.rs_wall_ms + big.ag_wall_ms;
            const double tokens = 4.0 * per_mb * gf_min / (6.0 * (1.0 - 1.0 / world));
            printf("  verdict          a step moves 4 bytes per trainable parameter each way: %.2f ms per MB of "
                   "gradients here;\n"
                   "                   %d ranks pay for themselves when each trains more than about %.0f tokens per "
                   "step\n"
                   "                   (at the sgemm ceiling; fewer when the products run below it)\n",
                   per_mb, world, ceil(tokens));
        }
        fflush(stdout);
    }
    /* the report: rank 0 writes it whole; every rank leaves with its outcome */
    int rc = 0;
    if (o.json && rank == 0) {
        tdm_sb_puts(&js, "}\n");
        if (tdm_write_file_atomic(o.json, js.data, js.len, &err) != 0) {
            fprintf(stderr, "tandem doctor: --json: %s\n", err.msg);
            rc = 1;
        } else printf("  report           %s\n", o.json);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    tdm_sb_free(&sb);
    tdm_sb_free(&js);
    MPI_Finalize();
    return rc;
}
