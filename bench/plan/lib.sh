# lib.sh - the set-up of bench/plan's shared-memory scripts (sourced from the repository root): TANDEM
# (build/tandem), MPIRUN (mpirun.openmpi) and its MPIFLAGS, the environment tandem's runs use, and $W, a
# temporary folder removed on exit (KEEP=1 keeps it and says where), holding generated data ($W/data), the
# tiny configuration ($W/model) and a tokenizer trained on the data ($W/tok.json); BASE, the train flags every
# run shares (vision tower and projector frozen, distributed optimizer, micro-batch 1), FREEZE, and
# machine_line (the host and its load).
TANDEM=${TANDEM:-build/tandem}
MPIRUN=${MPIRUN:-mpirun.openmpi}
case "$MPIRUN" in *openmpi*) MPIFLAGS=(--allow-run-as-root --oversubscribe --bind-to none) ;; *) MPIFLAGS=() ;; esac
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
W=$(mktemp -d "/tmp/tdm_$(basename "$0" .sh).XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then trap 'echo "kept: $W" >&2' EXIT; else trap 'rm -rf "$W"' EXIT; fi
"$TANDEM" gen-data --out "$W/data" --samples 96 --heldout 8 >/dev/null
mkdir -p "$W/model" && cp configs/tiny/config.json configs/tiny/preprocessor_config.json "$W/model/"
"$TANDEM" train-tokenizer --data "$W/data/train.json" --out "$W/tok.json" >/dev/null 2>&1
BASE=(--model "$W/model" --tokenizer "$W/tok.json" --data "$W/data/train.json" --freeze-vision --freeze-projector
      --use-distributed-optimizer --micro-batch-size 1)
FREEZE=(--freeze-vision --freeze-projector)
machine_line() {
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load:$(uptime | sed 's/.*load average://')"
}
