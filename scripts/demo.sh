#!/usr/bin/env bash
# The README's first command: set up, build, and run the built-in demo on 2 ranks:
# `tandem ab` with no arguments generates the built-in data and tokenizer (in
# ./tandem-demo), then runs the A/B protocol (baseline vs --overlap-grad-reduce) on the
# tiny Qwen3-VL configuration and prints the result table. A few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
make -j"$(nproc)" build/tandem
mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -np 2 build/tandem ab
echo
echo "Report: tandem-demo/ab/report.md (plots, per-step CSV, traces and summary.json beside it)"
