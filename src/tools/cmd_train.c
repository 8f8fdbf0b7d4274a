/* cmd_train.c - `tandem train`: Megatron's flags, run under mpirun -np N.
 *
 * The front end's jobs: MPI with MPI_THREAD_MULTIPLE (the communication thread needs it;
 * the granted level is logged and the trainer falls back to inline progress), BLAS threads
 * per rank, glibc's mmap threshold raised (the project spec's data-parallel.md: MPI's per-call scratch
 * buffers then stay on the heap), the arguments block, and errors: one sentence, and a
 * non-zero exit on every rank (normal exit when all ranks failed together, MPI_Abort when
 * only some did, since the others may be blocked in a collective).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strbuf.h"
#include "distributed/agree.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/mpi_setup.h"
#include "train/args.h"
#include "train/hosts.h"
#include "train/trainer.h"

int cmd_train(int argc, char **argv) {
    int early = tdm_cli_early(tdm_train_args_parser(), argc, argv); /* --help, --version: before MPI */
    if (early >= 0) return early;
    int rank, world;
    tdm_tool_mpi_init(&argc, &argv, &rank, &world);

    tdm_train_args a;
    tdm_train_args_defaults(&a);
    tdm_error err = {{0}};
    /* With one command line a bad flag fails on every rank alike and rank 0 says why. An MPMD launch
     * (`-np 1 tandem train A : -np 1 tandem train B`) can refuse the flags of some ranks only: all
     * ranks agree first, so that none is left waiting in a collective for a rank that gave up, and
     * the lowest refused rank names itself. */
    int ok = tdm_train_args_parse(&a, argc - 1, argv + 1, &err) == 0;
    if (ok) tdm_train_args_resolve(&a, world);
    ok = ok && tdm_train_args_validate(&a, world, &err) == 0;
    int n_bad;
    const int first_bad = tdm_first_failed_rank(ok, MPI_COMM_WORLD, &n_bad);
    if (first_bad < world) {
        tdm_tool_report_refusal("train", rank, first_bad, n_bad == world, err.msg);
        MPI_Finalize();
        return 2;
    }
    tdm_hosts hosts;
    tdm_hosts_describe(MPI_COMM_WORLD, &hosts);
    tdm_args_extra extra[TDM_HOSTS_N];
    for (int i = 0; i < TDM_HOSTS_N; i++) extra[i] = (tdm_args_extra){tdm_hosts_names[i], hosts.value[i]};
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_train_args_format_block(&a, extra, TDM_HOSTS_N, &sb);
    tdm_hosts_free(&hosts);
    if (sb.len) sb.data[--sb.len] = 0;
    tdm_log_info("%s", sb.data);
    tdm_sb_free(&sb);

    tdm_train_install_signal_handlers();
    tdm_train_result res;
    int rc = tdm_train_run(&a, MPI_COMM_WORLD, &res, &err);
    if (rc != 0) {
        if (res.all_ranks_failed) {
            /* an error of some ranks only (a file missing on one node) says which rank */
            tdm_tool_report_refusal("train", rank, res.failed_rank < 0 ? 0 : res.failed_rank, !res.failed_alone,
                                    err.msg);
            tdm_train_result_free(&res);
            MPI_Finalize();
            return 1;
        }
        fprintf(stderr, "tandem train: rank %d: %s\n", rank, err.msg);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    tdm_log_info("training done: iteration %lld, consumed samples %lld, parameters checksum %016llx%s",
                 (long long)res.final_iteration, (long long)res.consumed_samples,
                 (unsigned long long)res.params_checksum, res.interrupted ? " (stopped early)" : "");
    tdm_train_result_free(&res);
    MPI_Finalize();
    return 0;
}
