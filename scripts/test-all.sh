#!/usr/bin/env bash
# The README's second command: set everything up, then build and run every test:
# the normal build (all runners), the kernel, model and multi-rank tests again in the portable
# build (make PORTABLE=v3: a processor difference must show up as a failing test on any
# machine, and tests/train/cli_targets.sh trains with both binaries and with a third tuned for
# another processor, expecting the same bits), the unit and multi-rank tests under
# AddressSanitizer + UBSan (and LeakSanitizer), the multi-rank and multi-threaded tests under
# ThreadSanitizer (communication thread, loader thread, profiler, tokenizer), and the
# fuzzers for their CI time budget.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || { echo "setup failed"; exit 1; }
J=${JOBS:-$(nproc)}
rc=0
make -j"$J" all || { echo "build failed"; exit 1; }
make -j"$J" PORTABLE=v3 all >/dev/null || { echo "portable build failed"; exit 1; }
# the compiler tuned for another processor than this one (a Zen 3 tuning on any host; AVX-512 where
# this CPU has it): the same sources must compute the same bits whatever the tuning decides
retuned=-march=x86-64-v3
grep -qw avx512f /proc/cpuinfo && retuned=-march=x86-64-v4
make -j"$J" BUILD=build-retuned ARCH="$retuned -mtune=znver3" build-retuned/tandem >/dev/null \
  || { echo "retuned build failed"; exit 1; }
TANDEM_PORTABLE=build-v3/tandem TANDEM_RETUNED=build-retuned/tandem BUILD=build scripts/test.sh || rc=1
TANDEM_UNIT_ONLY=1 BUILD=build-v3 scripts/test.sh "kernels/|model/|mpitest" || rc=1

make -j"$J" SAN=address tests >/dev/null || { echo "ASan build failed"; exit 1; }
# LeakSanitizer on, with MPI's own allocations suppressed (tests/lsan.supp); components stay loaded
# so that their frames are named in a report
ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
  OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1 \
  UBSAN_OPTIONS=print_stacktrace=1 TANDEM_UNIT_ONLY=1 BUILD=build-asan scripts/test.sh || rc=1

make -j"$J" SAN=thread tests >/dev/null || { echo "TSan build failed"; exit 1; }
# the longest history per thread (4M accesses): MPI's own copies into a collective's buffers are suppressed by
# their stack (tests/tsan.supp), which TSan can restore only while it holds them; with the default (128K) a report
# of the communication thread reading a buffer MPI wrote on the main thread sometimes came without it
TSAN_OPTIONS="halt_on_error=1 history_size=7 suppressions=$PWD/tests/tsan.supp" TANDEM_UNIT_ONLY=1 BUILD=build-tsan \
  scripts/test.sh "mpitest|test_prof|test_data|test_tokenizer|test_core" || rc=1

# each fuzzer 30 s in CI (scripts/fuzz.sh alone: 60 s); the regression inputs are replayed first either way
if [ -x scripts/fuzz.sh ]; then FUZZ_SECONDS=${FUZZ_SECONDS:-30} scripts/fuzz.sh || rc=1; fi
exit $rc
