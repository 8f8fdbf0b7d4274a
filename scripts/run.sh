#!/usr/bin/env bash
# run.sh - starts N ranks of a program under whichever MPI launcher is installed, with the flags
# that launcher needs here, so that one line works as root and as a user, with Open MPI and MPICH:
#   scripts/run.sh -np 2 tandem train --model configs/tiny ...
#   scripts/run.sh -np 4 -H host1,host2 build/tandem train ...
# "tandem" means build/tandem of this checkout when no tandem is on PATH. The launcher is $MPIRUN
# (default: mpirun). Open MPI gets --bind-to none (tandem's ranks run BLAS threads of their own),
# --oversubscribe when N exceeds this machine's cores, --allow-run-as-root only for root, and
# OMPI_MCA_btl_vader_single_copy_mechanism=none (no cross-memory attach) inside a container or where
# ptrace is restricted (kernel.yama.ptrace_scope >= 2), unless already set or the program is tandem (which
# tries cross-memory attach itself and turns it off where it is refused). MPICH needs none of
# these. More launcher flags: MPIRUN_ARGS="...". RUN_DRY=1 prints the command instead of running it.
# See docs/user-guide.md (Launching).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
usage() {
  echo "usage: scripts/run.sh -np N [-H HOSTS] PROGRAM [ARGS...]   (e.g. scripts/run.sh -np 2 tandem train ...)" >&2
  exit 2
}
np="" hosts=""
while [ $# -gt 0 ]; do
  case "$1" in
    -np | -n)
      [ $# -ge 2 ] || usage
      np=$2
      shift 2 ;;
    -H | --host | -hosts)
      [ $# -ge 2 ] || usage
      hosts=$2
      shift 2 ;;
    -h | --help) usage ;;
    -*) echo "scripts/run.sh: $1: expected -np N, -H HOSTS or the program (other launcher flags: MPIRUN_ARGS)" >&2
      exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
case "$np" in
  "" ) echo "scripts/run.sh: -np N is required (the number of ranks)" >&2; exit 2 ;;
  *[!0-9]* | 0*) echo "scripts/run.sh: -np $np: expected a positive whole number of ranks" >&2; exit 2 ;;
esac
prog=$1
shift
if [ "$prog" = tandem ] && ! command -v tandem >/dev/null 2>&1; then
  prog=$here/build/tandem
  [ -x "$prog" ] || { echo "scripts/run.sh: $prog: not built (run make)" >&2; exit 2; }
fi

MPIRUN=${MPIRUN:-mpirun}
command -v "$MPIRUN" >/dev/null 2>&1 || { echo "scripts/run.sh: $MPIRUN: no such launcher (install Open MPI or MPICH, or set MPIRUN)" >&2; exit 2; }
version=$("$MPIRUN" --version 2>&1 </dev/null)
flags=()
if printf '%s' "$version" | grep -qiE 'open ?mpi|openrte'; then
  flags+=(--bind-to none)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
  [ -z "$hosts" ] && [ "$np" -gt "$(nproc)" ] && flags+=(--oversubscribe)
  # tandem tries cross-memory attach itself before MPI_Init and turns it off only where it is refused (where it
  # works it costs less than copying through the shared segment: docs/benchmarks.md); other programs get the guess
  if [ -z "${OMPI_MCA_btl_vader_single_copy_mechanism:-}" ] && [ "$(basename "$prog")" != tandem ]; then
    scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
    if [ -e /.dockerenv ] || [ -e /run/.containerenv ] || [ -n "${container:-}" ] || [ "$scope" -ge 2 ] ||
       grep -qE 'docker|kubepods|containerd|lxc' /proc/1/cgroup 2>/dev/null; then
      export OMPI_MCA_btl_vader_single_copy_mechanism=none
    fi
  fi
elif ! printf '%s' "$version" | grep -qiE 'hydra|mpich'; then
  echo "scripts/run.sh: $MPIRUN: neither Open MPI nor MPICH (by its --version); running it with -np only" >&2
fi
[ -n "$hosts" ] && flags+=(-H "$hosts")
# shellcheck disable=SC2206 # MPIRUN_ARGS is split into words on purpose
extra=(${MPIRUN_ARGS:-})
cmd=("$MPIRUN" "${flags[@]}" "${extra[@]}" -np "$np" "$prog" "$@")
if [ -n "${RUN_DRY:-}" ]; then
  [ -n "${OMPI_MCA_btl_vader_single_copy_mechanism:-}" ] &&
    printf 'OMPI_MCA_btl_vader_single_copy_mechanism=%s ' "$OMPI_MCA_btl_vader_single_copy_mechanism"
  printf '%s\n' "${cmd[*]}"
  exit 0
fi
exec "${cmd[@]}"
