#!/usr/bin/python3
"""torch_op_profile.py - where the PyTorch peer's forward+backward time goes, by operator.

    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/peer_torch/torch_op_profile.py CONFIG.json \
        WEIGHTS.safetensors BATCH_DIR [--steps 3] [--freeze-vision --freeze-projector]

One process, one thread, rank 0's micro-batches of the first --steps steps of an export
(after one untimed warm-up step): torch.autograd.profiler's self CPU time per operator, and
the share of the matrix products (mm, addmm, bmm, matmul's pieces), which run in the same
OpenBLAS sgemm as tandem's linear layers.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3vl_torch as Q  # noqa: E402


def main():
    cfg, weights, bdir = sys.argv[1:4]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 3
    torch.set_num_threads(1)
    freeze = {"vision": "--freeze-vision" in sys.argv, "projector": "--freeze-projector" in sys.argv,
              "llm": False, "lm_head": False}
    m = Q.build(cfg, weights, freeze)
    idx = json.load(open(os.path.join(bdir, "index.json")))
    bs = [Q.load_batch(os.path.join(bdir, e["file"]), e) for e in idx["batches"]
          if e["rank"] == 0 and e["step"] <= steps]
    for b in bs[:2]:  # warm-up
        m(b)[0].backward()
    with torch.autograd.profiler.profile() as prof:
        for b in bs[2:]:
            m(b)[0].backward()
    rows = prof.key_averages()
    total = sum(r.self_cpu_time_total for r in rows)
    gemm = sum(r.self_cpu_time_total for r in rows if r.key in ("aten::mm", "aten::addmm", "aten::bmm"))
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    print("matrix products (aten::mm/addmm/bmm): %.1f%% of %.1f ms self CPU time over %d micro-batches" %
          (100.0 * gemm / total, total / 1e3, len(bs) - 2))


if __name__ == "__main__":
    main()
