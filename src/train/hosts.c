/* hosts.c - see hosts.h. */
#include "train/hosts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/platform.h"
#include "core/strbuf.h"
#include "distributed/comm.h"
#include "kernels/kernels.h"

enum { ITEM = 160 }; /* bytes per item per rank, NUL included */

const char *const tdm_hosts_names[TDM_HOSTS_N] = {"host_cpu", "host_vector_isa", "build_target", "openblas_kernels",
                                                  "comm_wait_poll"};

char *tdm_hosts_combine(const char *const *per_rank, int world) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    char *same = tdm_xcalloc((size_t)world, 1), *done = tdm_xcalloc((size_t)world, 1);
    for (int r = 0; r < world; r++) {
        if (done[r]) continue;
        int n = 0;
        for (int q = 0; q < world; q++) n += same[q] = !done[q] && !strcmp(per_rank[r], per_rank[q]);
        if (sb.len) tdm_sb_puts(&sb, "; ");
        tdm_sb_puts(&sb, per_rank[r]);
        if (n == world) break;
        tdm_sb_printf(&sb, " (rank%s", n > 1 ? "s" : "");
        const char *sep = " ";
        for (int q = 0; q < world; q++) {
            if (!same[q]) continue;
            int e = q;
            while (e + 1 < world && same[e + 1]) e++;
            if (e > q) tdm_sb_printf(&sb, "%s%d-%d", sep, q, e);
            else tdm_sb_printf(&sb, "%s%d", sep, q);
            sep = ", ";
            for (int k = q; k <= e; k++) done[k] = 1;
            q = e;
        }
        tdm_sb_putc(&sb, ')');
    }
    free(same), free(done);
    return sb.data ? sb.data : tdm_xstrdup("");
}

void tdm_hosts_describe(MPI_Comm comm, tdm_hosts *h) {
    int world;
    MPI_Comm_size(comm, &world);
    tdm_platform p;
    tdm_platform_read(&p);
    char mine[TDM_HOSTS_N][ITEM];
    snprintf(mine[TDM_HOSTS_CPU], ITEM, "%s", p.cpu);
    snprintf(mine[TDM_HOSTS_ISA], ITEM, "%s", p.isa);
    snprintf(mine[TDM_HOSTS_BUILD_TARGET], ITEM, "%s", p.build_target);
    tdm_blas_describe(mine[TDM_HOSTS_BLAS], ITEM);
    tdm_comm_describe_wait_poll(mine[TDM_HOSTS_WAIT_POLL], ITEM);
    char *all = tdm_xmalloc((size_t)world * sizeof mine);
    MPI_Allgather(mine, (int)sizeof mine, MPI_CHAR, all, (int)sizeof mine, MPI_CHAR, comm);
    const char **per_rank = tdm_xcalloc((size_t)world, sizeof *per_rank);
    h->mixed = 0;
    for (int i = 0; i < TDM_HOSTS_N; i++) {
        for (int r = 0; r < world; r++) per_rank[r] = all + (size_t)r * sizeof mine + (size_t)i * ITEM;
        h->value[i] = tdm_hosts_combine(per_rank, world);
        h->mixed |= strcmp(h->value[i], mine[i]) != 0;
    }
    free(per_rank);
    free(all);
}

void tdm_hosts_free(tdm_hosts *h) {
    for (int i = 0; i < TDM_HOSTS_N; i++) free(h->value[i]), h->value[i] = NULL;
}
