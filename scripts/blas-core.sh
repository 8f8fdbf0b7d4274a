#!/usr/bin/env bash
# Prints the OpenBLAS kernel set this CPU can run when OpenBLAS's own choice falls short of
# it, and nothing otherwise (or when OPENBLAS_CORETYPE is already set).
#
# OpenBLAS's DYNAMIC_ARCH build picks its kernels from the CPU's family and model number.
# A CPU newer than the library (Debian 12's 0.3.21 on an Intel family 6 model 207 Xeon, for
# one) gets its generic Prescott (SSE3) kernels: on the trainer's matrix products 3-6x
# slower than the AVX-512 ones the CPU runs. Benchmarks that compare two programs calling
# the same OpenBLAS (tandem and PyTorch) pin the same set for both with
#   export OPENBLAS_CORETYPE=$(scripts/blas-core.sh PROGRAM)
# where PROGRAM is any binary linked to OpenBLAS (default build/tandem).
set -euo pipefail
[ -n "${OPENBLAS_CORETYPE:-}" ] && exit 0
prog=${1:-build/tandem}
core=$(OPENBLAS_VERBOSE=2 "$prog" --help 2>&1 >/dev/null | sed -n 's/^Core: //p' | head -1 || true)
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
want=
if has avx512f avx512bw avx512vl avx512dq avx512cd; then want=SkylakeX
elif has avx2 fma; then want=Haswell
fi
case "$core" in
  # kernel sets at least as good as the ones named above: keep OpenBLAS's choice
  ""|Haswell|SkylakeX|Cooperlake|SapphireRapids|Zen|Zen*|Excavator|Steamroller) ;;
  *) [ -n "$want" ] && echo "$want" ;;
esac
exit 0
