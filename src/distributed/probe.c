/* probe.c - the MPI library, its transport, and the measured cost of the collectives (probe.h). */
#include "distributed/probe.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "distributed/agree.h"
#include "distributed/comm.h"
#include "kernels/kernels.h"

#define SINGLE_COPY_VAR "OMPI_MCA_btl_vader_single_copy_mechanism"
#define MB              1e6

/* ------------------------------------------------------------------ the library */

static void copy_text(char *out, size_t n, const char *s) {
    size_t len = strnlen(s, n - 1);
    memcpy(out, s, len);
    out[len] = 0;
}

/* A control variable's value as text (an enum's item name, a string, or a number); 0 when the
 * library has no such variable. Needs MPI_T initialised. */
static int read_cvar(const char *name, char *out, size_t n) {
    int idx;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS) return 0;
    char nm[256], desc[8];
    int nlen = sizeof nm, dlen = sizeof desc, verbosity, bind, scope;
    MPI_Datatype dt;
    MPI_T_enum et;
    if (MPI_T_cvar_get_info(idx, nm, &nlen, &verbosity, &dt, &et, desc, &dlen, &bind, &scope) != MPI_SUCCESS) return 0;
    if (bind != MPI_T_BIND_NO_OBJECT) return 0;
    MPI_T_cvar_handle h;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS) return 0;
    int ok = 0;
    if (dt == MPI_CHAR && count > 0) {
        char *buf = calloc((size_t)count + 1, 1);
        if (buf && MPI_T_cvar_read(h, buf) == MPI_SUCCESS) copy_text(out, n, buf), ok = 1;
        free(buf);
    } else if (dt == MPI_INT && count == 1) {
        int v = 0;
        if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) {
            snprintf(out, n, "%d", v), ok = 1;
            int items = 0, elen = sizeof nm;
            if (et != MPI_T_ENUM_NULL && MPI_T_enum_get_info(et, &items, nm, &elen) == MPI_SUCCESS)
                for (int i = 0; i < items; i++) {
                    int val, ilen = sizeof nm;
                    if (MPI_T_enum_get_item(et, i, &val, nm, &ilen) == MPI_SUCCESS && val == v) {
                        copy_text(out, n, nm);
                        break;
                    }
                }
        }
    }
    MPI_T_cvar_handle_free(&h);
    return ok;
}

void tdm_mpi_info_get(MPI_Comm comm, tdm_mpi_info *m) {
    memset(m, 0, sizeof *m);
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    ver[len < (int)sizeof ver ? len : (int)sizeof ver - 1] = 0;
    int size = 1, local = 1;
    MPI_Comm_size(comm, &size);
    MPI_Comm sh;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &sh) == MPI_SUCCESS) {
        MPI_Comm_size(sh, &local);
        MPI_Comm_free(&sh);
    }
    int mine = local == size, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
    m->one_host = all;
    if (!strncmp(ver, "Open MPI", 8)) {
        m->kind = TDM_MPI_OPEN_MPI;
        snprintf(m->library, sizeof m->library, "%.*s", (int)strcspn(ver, ",\n"), ver);
    } else if (strstr(ver, "MPICH")) {
        m->kind = TDM_MPI_MPICH;
        const char *v = strstr(ver, "Version:");
        if (v) {
            v += 8;
            v += strspn(v, " \t");
            snprintf(m->library, sizeof m->library, "MPICH %.*s", (int)strcspn(v, " \t\n"), v);
        } else snprintf(m->library, sizeof m->library, "MPICH");
        const char *d = strstr(ver, "Device:");
        if (d) {
            d += 7;
            d += strspn(d, " \t");
            snprintf(m->transport, sizeof m->transport, "device %.*s", (int)strcspn(d, " \t\n"), d);
        }
    } else {
        m->kind = TDM_MPI_OTHER;
        snprintf(m->library, sizeof m->library, "%.*s", (int)strcspn(ver, ",\n"), ver);
    }
    if (m->kind != TDM_MPI_OPEN_MPI) {
        m->shared_memory = m->one_host; /* MPICH's devices move data between the ranks of a node in shared memory */
        if (!m->transport[0]) snprintf(m->transport, sizeof m->transport, "%s", m->one_host ? "one host" : "hosts");
        return;
    }
    int level = MPI_THREAD_SINGLE, provided;
    char pml[64] = "", btl[96] = "";
    /* at the level MPI_Init granted: Open MPI's MPI_T_init_thread sets the library's thread level to the one
     * asked for, and a lower one would leave the communication thread's calls unprotected */
    MPI_Query_thread(&level);
    if (MPI_T_init_thread(level, &provided) == MPI_SUCCESS) {
        read_cvar("pml", pml, sizeof pml);
        read_cvar("btl", btl, sizeof btl);
        read_cvar("btl_vader_single_copy_mechanism", m->single_copy, sizeof m->single_copy);
        MPI_T_finalize();
    }
    const char *env = getenv(SINGLE_COPY_VAR);
    const char *by_tandem = getenv("TANDEM_SINGLE_COPY_SET");
    if (by_tandem && env) snprintf(m->single_copy_from, sizeof m->single_copy_from, "set by tandem: %s", by_tandem);
    else if (env) snprintf(m->single_copy_from, sizeof m->single_copy_from, "%s", SINGLE_COPY_VAR);
    else snprintf(m->single_copy_from, sizeof m->single_copy_from, "Open MPI's default");
    /* "^ucx" (Debian's default) excludes; ob1 with btl vader is what ranks on one host get then */
    const int other_pml = pml[0] && pml[0] != '^' && strcmp(pml, "ob1") != 0;
    const int vader = !btl[0] || (btl[0] == '^' ? !strstr(btl, "vader") : strstr(btl, "vader") != NULL);
    if (other_pml) snprintf(m->transport, sizeof m->transport, "pml %s (vader's settings may not apply)", pml);
    else if (m->one_host && vader) snprintf(m->transport, sizeof m->transport, "shared memory (pml ob1, btl vader)");
    else snprintf(m->transport, sizeof m->transport, "pml ob1, btl %s", btl[0] ? btl : "Open MPI's choice");
    m->shared_memory = !other_pml && m->one_host && vader;
}

void tdm_mpi_info_format(const tdm_mpi_info *m, tdm_strbuf *sb) {
    tdm_sb_printf(sb, "%s, %s", m->library, m->transport);
    if (m->kind == TDM_MPI_OPEN_MPI && m->single_copy[0])
        tdm_sb_printf(sb, ", single-copy mechanism %s (%s)", m->single_copy, m->single_copy_from);
}

/* Whether this process may read a child's memory with process_vm_readv: what Open MPI's cross-memory
 * attach does between ranks. Containers without CAP_SYS_PTRACE and kernel.yama.ptrace_scope >= 2
 * refuse it (EPERM, or ENOSYS under a seccomp filter). */
static int cma_works(void) {
    int fds[2];
    if (pipe(fds) != 0) return 1; /* cannot tell: leave Open MPI's choice */
    volatile unsigned long probe = 0x7a6e646d;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return 1;
    }
    if (pid == 0) { /* the child waits until the parent has read (or failed to) */
        close(fds[1]);
        char c;
        while (read(fds[0], &c, 1) < 0 && errno == EINTR) {}
        _exit(0);
    }
    close(fds[0]);
    unsigned long got = 0;
    struct iovec local = {&got, sizeof got}, remote = {(void *)&probe, sizeof probe};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    close(fds[1]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    return n == (ssize_t)sizeof got && got == probe;
}

const char *tdm_mpi_choose_single_copy(void) {
    const char *reason = NULL;
    if (getenv(SINGLE_COPY_VAR)) return NULL;
    /* only Open MPI reads the variable; an MPICH build has no use for it */
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    if (strncmp(ver, "Open MPI", 8) != 0) return NULL;
    if (!cma_works()) reason = "cross-memory attach is refused here";
    if (!reason) return NULL;
    setenv(SINGLE_COPY_VAR, "none", 1);
    setenv("TANDEM_SINGLE_COPY_SET", reason, 1);
    return reason;
}

/* ------------------------------------------------------------------ measurements */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { MAX_REPS = 64 };

static int clamp_reps(int reps) { return reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps; }

static size_t bytes_of(double mb) {
    size_t b = (size_t)(mb * MB);
    b &= ~(size_t)4095;
    return b < 4096 ? 4096 : b;
}

double tdm_probe_memcpy(double mb, int reps) {
    reps = clamp_reps(reps);
    const size_t bytes = bytes_of(mb);
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) {
        free(a), free(b);
        return 0;
    }
    memset(a, 1, bytes), memset(b, 2, bytes);
    double t[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = tdm_now_ns();
        memcpy(r % 2 ? a : b, r % 2 ? b : a, bytes);
        t[r] = (double)(tdm_now_ns() - t0) / 1e6 / ((double)bytes / MB);
    }
    free(a), free(b);
    return median(t, reps);
}

void tdm_probe_page_faults(double mb, int reps, double *fresh_ms, double *reused_ms) {
    reps = clamp_reps(reps);
    const size_t bytes = bytes_of(mb);
    double f[MAX_REPS], u[MAX_REPS];
    char *keep = malloc(bytes);
    if (keep) memset(keep, 0, bytes);
    int nf = 0, nu = 0;
    for (int r = 0; r < reps; r++) {
        char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            uint64_t t0 = tdm_now_ns();
            memset(p, r + 1, bytes);
            f[nf++] = (double)(tdm_now_ns() - t0) / 1e6 / ((double)bytes / MB);
            munmap(p, bytes);
        }
        if (keep) {
            uint64_t t0 = tdm_now_ns();
            memset(keep, r + 1, bytes);
            u[nu++] = (double)(tdm_now_ns() - t0) / 1e6 / ((double)bytes / MB);
        }
    }
    free(keep);
    *fresh_ms = median(f, nf);
    *reused_ms = median(u, nu);
}

double tdm_probe_vector_sum(double mb, int reps) {
    reps = clamp_reps(reps);
    const size_t bytes = bytes_of(mb), n = bytes / sizeof(float);
    float *y = malloc(bytes), *x = malloc(bytes);
    if (!x || !y) {
        free(x), free(y);
        return 0;
    }
    for (size_t i = 0; i < n; i++) x[i] = 1e-7f, y[i] = 0;
    double t[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = tdm_now_ns();
        tdm_add_into(y, x, (int64_t)n);
        t[r] = (double)(tdm_now_ns() - t0) / 1e6 / ((double)bytes / MB);
    }
    free(x), free(y);
    return median(t, reps);
}

/* A buffer of about mb MB cut into one equal block of floats per rank of comm: the block's count, the ranks and
 * the buffer's bytes. */
static int floats_per_rank(MPI_Comm comm, double mb, int *size, size_t *bytes) {
    *size = 1;
    MPI_Comm_size(comm, size);
    const int per_rank = (int)(bytes_of(mb) / sizeof(float) / (size_t)*size);
    *bytes = (size_t)per_rank * (size_t)*size * sizeof(float);
    return per_rank;
}

/* Every rank of comm here before any goes on (a bounded all-reduce). */
static void probe_barrier(MPI_Comm comm, uint64_t timeout_ns) {
    int z = 0;
    tdm_allreduce_bounded(&z, 1, MPI_INT, MPI_MAX, comm, timeout_ns, "collective probe");
}

/* One collective through the engine: wall and calling-thread CPU, ms. */
static void timed_op(tdm_comm *c, tdm_comm_op *op, double *wall, double *cpu) {
    uint64_t t0 = tdm_now_ns(), c0 = tdm_thread_cpu_ns();
    tdm_comm_post(c, op);
    tdm_comm_wait(c, op);
    *cpu = (double)(tdm_thread_cpu_ns() - c0) / 1e6;
    *wall = (double)(tdm_now_ns() - t0) / 1e6;
}

int tdm_probe_collectives(MPI_Comm comm, double mb, int reps, uint64_t timeout_ns, tdm_coll_cost *out, tdm_error *err) {
    return tdm_probe_collectives_rs(comm, mb, reps, -1, timeout_ns, out, err);
}

int tdm_probe_collectives_rs(MPI_Comm comm, double mb, int reps, int mpi_op, uint64_t timeout_ns, tdm_coll_cost *out,
                             tdm_error *err) {
    memset(out, 0, sizeof *out);
    reps = clamp_reps(reps);
    int size;
    size_t bytes;
    const int per_rank = floats_per_rank(comm, mb, &size, &bytes);
    float *buf = malloc(bytes);
    int ok = buf != NULL, all = 0;
    all = ok;
    tdm_allreduce_bounded(&all, 1, MPI_INT, MPI_MIN, comm, timeout_ns, "collective probe");
    if (!all) {
        free(buf);
        return tdm_errorf(err, "collective probe: %.1f MB buffer: out of memory on some rank", mb);
    }
    for (size_t i = 0; i < bytes / sizeof(float); i++) buf[i] = 1.0f;
    MPI_Comm dup;
    MPI_Comm_dup(comm, &dup);
    tdm_comm *c = tdm_comm_create(dup, TDM_DDP_PROGRESS_INLINE, 2, 0, err);
    if (!c) {
        free(buf);
        return -1;
    }
    if (mpi_op >= 0) tdm_comm_set_reduce_scatter(c, !mpi_op);
    tdm_comm_set_timeout(c, timeout_ns);
    tdm_comm_op rs = {.kind = TDM_COMM_REDUCE_SCATTER, .buf = buf, .count = per_rank, .name = "probe-rs"};
    tdm_comm_op ag = {.kind = TDM_COMM_ALLGATHER, .buf = buf, .count = per_rank, .name = "probe-ag"};
    double w[2][MAX_REPS], u[2][MAX_REPS], d0, d1;
    timed_op(c, &rs, &d0, &d1); /* untimed: the library sets up its buffers and connections */
    timed_op(c, &ag, &d0, &d1);
    for (int r = 0; r < reps; r++) {
        probe_barrier(comm, timeout_ns);
        timed_op(c, &rs, &w[0][r], &u[0][r]);
        probe_barrier(comm, timeout_ns);
        timed_op(c, &ag, &w[1][r], &u[1][r]);
    }
    tdm_comm_free(c);
    free(buf);
    const double mbs = (double)bytes / MB;
    double v[5] = {median(w[0], reps) / mbs, median(u[0], reps) / mbs, median(w[1], reps) / mbs,
                   median(u[1], reps) / mbs, tdm_probe_memcpy(mbs, reps)};
    tdm_allreduce_bounded(v, 5, MPI_DOUBLE, MPI_MAX, comm, timeout_ns, "collective probe");
    out->mb = mbs;
    out->reps = reps;
    out->rs_wall_ms = v[0], out->rs_cpu_ms = v[1], out->ag_wall_ms = v[2], out->ag_cpu_ms = v[3];
    out->memcpy_ms = v[4];
    return 0;
}

/* ------------------------------------------------------------------ posted together */

/* ops[0 .. k) posted and waited for one by one (together 0), or all posted, then waited for in order; this rank
 * posts after `late_ms` of polling (the ranks of a step end their backward apart): ms from its first post. */
static double timed_group(tdm_comm *c, tdm_comm_op *ops, int k, int together, double late_ms) {
    const uint64_t go = tdm_now_ns() + (uint64_t)(late_ms * 1e6);
    while (tdm_now_ns() < go) tdm_comm_progress(c);
    const uint64_t t0 = tdm_now_ns();
    for (int i = 0; i < k; i++) {
        tdm_comm_post(c, &ops[i]);
        if (!together) tdm_comm_wait(c, &ops[i]);
    }
    for (int i = 0; together && i < k; i++) tdm_comm_wait(c, &ops[i]);
    return (double)(tdm_now_ns() - t0) / 1e6;
}

int tdm_probe_posted_together(MPI_Comm comm, double mb, int k, int reps, uint64_t timeout_ns, tdm_together_cost *out,
                              tdm_error *err) {
    memset(out, 0, sizeof *out);
    if (k < 2 || k > 64) return tdm_errorf(err, "posted-together probe: %d collectives: expected 2 to 64", k);
    reps = clamp_reps(reps);
    int size, rank;
    size_t bytes;
    const int per_rank = floats_per_rank(comm, mb, &size, &bytes);
    MPI_Comm_rank(comm, &rank);
    const size_t each = (size_t)per_rank * (size_t)size; /* floats of one collective's buffer */
    float *buf = malloc(each * (size_t)k * sizeof *buf);
    tdm_comm_op *ops = calloc((size_t)k, sizeof *ops);
    int all = buf && ops;
    tdm_allreduce_bounded(&all, 1, MPI_INT, MPI_MIN, comm, timeout_ns, "collective probe");
    if (!all) {
        free(buf), free(ops);
        return tdm_errorf(err, "posted-together probe: %d buffers of %.1f MB: out of memory on some rank", k, mb);
    }
    for (size_t i = 0; i < each * (size_t)k; i++) buf[i] = 1e-3f;
    MPI_Comm dup;
    MPI_Comm_dup(comm, &dup);
    tdm_comm *c = tdm_comm_create(dup, TDM_DDP_PROGRESS_INLINE, k, 0, err);
    if (!c) {
        free(buf), free(ops);
        return -1;
    }
    tdm_comm_set_timeout(c, timeout_ns);
    double t[2][2][MAX_REPS]; /* [kind][together][round], on the last rank */
    for (int kind = 0; kind < 2; kind++) {
        for (int i = 0; i < k; i++)
            ops[i] = (tdm_comm_op){.kind = kind ? TDM_COMM_ALLGATHER : TDM_COMM_REDUCE_SCATTER,
                                   .buf = buf + (size_t)i * each,
                                   .count = per_rank,
                                   .bucket = i,
                                   .name = kind ? "probe-ag" : "probe-rs"};
        probe_barrier(comm, timeout_ns);
        timed_group(c, ops, k, 1, 0); /* untimed: the library sets up */
        probe_barrier(comm, timeout_ns);
        double late = timed_group(c, ops, k, 0, 0) / k; /* one collective's time: the last rank's lateness */
        MPI_Bcast(&late, 1, MPI_DOUBLE, size - 1, comm);
        for (int r = 0; r < reps; r++)
            for (int j = 0; j < 2; j++) {
                const int together = (r + j) % 2;
                probe_barrier(comm, timeout_ns);
                t[kind][together][r] = timed_group(c, ops, k, together, rank == size - 1 ? late : 0);
            }
    }
    tdm_comm_free(c);
    free(buf), free(ops);
    double v[4] = {median(t[0][0], reps), median(t[0][1], reps), median(t[1][0], reps), median(t[1][1], reps)};
    MPI_Bcast(v, 4, MPI_DOUBLE, size - 1, comm);
    out->mb = (double)bytes / MB;
    out->k = k;
    out->rs_one_ms = v[0], out->rs_together_ms = v[1], out->ag_one_ms = v[2], out->ag_together_ms = v[3];
    return 0;
}

/* ------------------------------------------------------------------ beside compute */

enum { BESIDE_N = 256, BESIDE_D = 384 }; /* one piece: a 256-token linear forward of width 384, about 75 MFLOP */

typedef struct beside_work {
    float *x, *w, *y;
} beside_work;

static void beside_work_free(beside_work *k) { free(k->x), free(k->w), free(k->y); }

static void beside_piece(beside_work *k) { tdm_linear_forward(k->y, k->x, k->w, NULL, BESIDE_N, BESIDE_D, BESIDE_D); }

static double beside_compute(tdm_comm *c, beside_work *k, int pieces) {
    uint64_t t0 = tdm_now_ns();
    for (int i = 0; i < pieces; i++) {
        beside_piece(k);
        tdm_comm_progress(c);
    }
    return (double)(tdm_now_ns() - t0) / 1e6;
}

/* One round with the two collectives kept in flight: the compute's time, the MB completed while it ran, and the
 * alone-time those completed between the first completion and the last took, over that span (NaN: fewer than
 * 3 completed). The ranks then post the same collectives and wait for all of them. */
static double beside_round(tdm_comm *c, beside_work *k, int pieces, tdm_comm_op *ops, const double *alone_ms, double mb,
                           MPI_Comm comm, uint64_t timeout_ns, double *moved, double *speed) {
    int posted = 0, done = 0, seen[2] = {0, 0};
    for (; posted < 2; posted++) tdm_comm_post(c, &ops[posted]);
    uint64_t first = 0, last = 0;
    double span_alone = 0;
    uint64_t t0 = tdm_now_ns();
    for (int i = 0; i < pieces; i++) {
        beside_piece(k);
        tdm_comm_progress(c);
        for (int j = 0; j < 2; j++) {
            if (seen[j] || !tdm_comm_test(c, &ops[j])) continue;
            seen[j] = 1;
            const uint64_t at = ops[j].done_ns;
            if (done == 0 || at < first) first = at;
            if (done > 0) span_alone += alone_ms[j];
            if (at > last) last = at;
            done++;
        }
        /* every rank posts the two kinds in turn, the order MPI needs: the next one when it is free again */
        while (seen[posted % 2]) {
            tdm_comm_op *op = &ops[posted % 2];
            tdm_comm_wait(c, op); /* returns at once: frees it to be posted again */
            seen[posted % 2] = 0;
            tdm_comm_post(c, op);
            posted++;
        }
    }
    const double ms = (double)(tdm_now_ns() - t0) / 1e6;
    *moved = done * mb;
    *speed = done >= 3 && last > first ? span_alone / ((double)(last - first) / 1e6) : NAN;
    int most = posted;
    tdm_allreduce_bounded(&most, 1, MPI_INT, MPI_MAX, comm, timeout_ns, "collective probe");
    /* the ranks that posted fewer post the rest, in the same turn */
    tdm_comm_wait_all(c);
    for (int j = 0; j < 2; j++) tdm_comm_wait(c, &ops[j]);
    for (; posted < most; posted++) {
        tdm_comm_post(c, &ops[posted % 2]);
        tdm_comm_wait(c, &ops[posted % 2]);
    }
    return ms;
}

int tdm_probe_beside_compute(MPI_Comm comm, tdm_ddp_progress mode, int thread_nice, double mb, double compute_ms,
                             int reps, uint64_t timeout_ns, tdm_beside_cost *out, tdm_error *err) {
    memset(out, 0, sizeof *out);
    reps = clamp_reps(reps);
    int size;
    size_t bytes;
    const int per_rank = floats_per_rank(comm, mb, &size, &bytes);
    const size_t piece = (size_t)BESIDE_N * BESIDE_D;
    float *rs_buf = malloc(bytes), *ag_buf = malloc(bytes);
    beside_work k = {malloc(piece * sizeof(float)), malloc((size_t)BESIDE_D * BESIDE_D * sizeof(float)),
                     malloc(piece * sizeof(float))};
    int all = rs_buf && ag_buf && k.x && k.w && k.y;
    tdm_allreduce_bounded(&all, 1, MPI_INT, MPI_MIN, comm, timeout_ns, "collective probe");
    if (!all) {
        free(rs_buf), free(ag_buf), beside_work_free(&k);
        return tdm_errorf(err, "collective probe: two %.1f MB buffers: out of memory on some rank", mb);
    }
    for (size_t i = 0; i < bytes / sizeof(float); i++) rs_buf[i] = 1e-3f, ag_buf[i] = 1.0f;
    for (size_t i = 0; i < piece; i++) k.x[i] = (float)(i % 17) * 0.01f, k.y[i] = 0;
    for (size_t i = 0; i < (size_t)BESIDE_D * BESIDE_D; i++) k.w[i] = (float)(i % 11) * 0.001f;
    MPI_Comm dup;
    MPI_Comm_dup(comm, &dup);
    tdm_comm *c = tdm_comm_create(dup, mode, 2, thread_nice, err);
    if (!c) {
        free(rs_buf), free(ag_buf), beside_work_free(&k);
        return -1;
    }
    tdm_comm_set_timeout(c, timeout_ns);
    tdm_comm_op ops[2] = {{.kind = TDM_COMM_REDUCE_SCATTER, .buf = rs_buf, .count = per_rank, .name = "probe-rs"},
                          {.kind = TDM_COMM_ALLGATHER, .buf = ag_buf, .count = per_rank, .name = "probe-ag"}};
    /* the pieces a round takes, the same on every rank: the slowest rank's count for compute_ms */
    double t_piece[MAX_REPS], d0, d1;
    beside_piece(&k);
    for (int r = 0; r < reps; r++) t_piece[r] = beside_compute(c, &k, 4) / 4;
    double chunk = median(t_piece, reps);
    double pieces_d = chunk > 0 ? ceil(compute_ms / chunk) : 1;
    tdm_allreduce_bounded(&pieces_d, 1, MPI_DOUBLE, MPI_MAX, comm, timeout_ns, "collective probe");
    const int pieces = pieces_d < 1 ? 1 : pieces_d > 1e6 ? 1000000 : (int)pieces_d;
    double alone[2][MAX_REPS], lone[MAX_REPS], lost[MAX_REPS], moved[MAX_REPS], speed[MAX_REPS];
    for (int i = 0; i < 2; i++) timed_op(c, &ops[i], &d0, &d1); /* untimed: the library sets up */
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < 2; i++) {
            probe_barrier(comm, timeout_ns);
            timed_op(c, &ops[i], &alone[i][r], &d1);
        }
    }
    const double alone_ms[2] = {median(alone[0], reps), median(alone[1], reps)};
    int n_speed = 0;
    for (int r = 0; r < reps; r++) {
        probe_barrier(comm, timeout_ns);
        lone[r] = beside_compute(c, &k, pieces);
        probe_barrier(comm, timeout_ns);
        double v, ms = beside_round(c, &k, pieces, ops, alone_ms, (double)bytes / MB, comm, timeout_ns, &moved[r], &v);
        lost[r] = moved[r] > 0 ? (ms - lone[r]) * 1e3 / moved[r] : NAN;
        if (isfinite(v)) speed[n_speed++] = v;
    }
    tdm_comm_free(c);
    free(rs_buf), free(ag_buf), beside_work_free(&k);
    int n_lost = 0;
    for (int r = 0; r < reps; r++)
        if (isfinite(lost[r])) lost[n_lost++] = lost[r];
    /* means over ranks; a figure some rank could not measure stays NaN */
    double v[7] = {chunk,
                   median(lone, reps),
                   median(moved, reps),
                   n_lost ? median(lost, n_lost) : 0,
                   n_speed ? median(speed, n_speed) : 0,
                   n_lost > 0,
                   n_speed > 0};
    tdm_allreduce_bounded(v, 7, MPI_DOUBLE, MPI_SUM, comm, timeout_ns, "collective probe");
    out->mb = (double)bytes / MB;
    out->chunk_ms = v[0] / size, out->compute_ms = v[1] / size, out->moved_mb = v[2] / size;
    out->lost_us_per_mb = v[5] == size ? v[3] / size : NAN;
    out->speed = v[6] == size ? v[4] / size : NAN;
    return 0;
}

void tdm_probe_format_line(const tdm_mpi_info *m, const tdm_coll_cost *c, int dp, tdm_strbuf *sb) {
    tdm_sb_printf(sb, "data-parallel transport: ");
    tdm_mpi_info_format(m, sb);
    if (dp < 2 || !c || c->mb <= 0) {
        tdm_sb_printf(sb, "; 1 rank: no collectives");
        return;
    }
    tdm_sb_printf(sb,
                  " | measured over %.1f MB, %d ranks (ms/MB): reduce-scatter %.3f (CPU %.3f), all-gather %.3f "
                  "(CPU %.3f), memcpy %.3f",
                  c->mb, dp, c->rs_wall_ms, c->rs_cpu_ms, c->ag_wall_ms, c->ag_cpu_ms, c->memcpy_ms);
}
