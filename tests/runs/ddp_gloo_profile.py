#!/usr/bin/env python3
"""Writes real PyTorch profiler traces of a 2-process DDP run on gloo (CPU), one file per rank,
for tests/runs/cli_analyze.sh. Debian's PyTorch 1.13 has no Kineto: its profiler writes the
legacy format (a top-level array, no "cat", integer µs, ProfilerStep#N one lower than the loop
index). Also writes <out>/expected.json: what the trace must contain, counted from the loop.

    ddp_gloo_profile.py OUT [--mode overlap|after-backward] [--late-rank R --late-ms MS]
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

WAIT, WARMUP, ACTIVE = 1, 1, 3


def worker(rank, world, args, init_file):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(6)])
    ddp = DDP(model, bucket_cap_mb=0.3)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(32, 256)

    def ready(prof):
        prof.export_chrome_trace(os.path.join(args.out, "rank%d.json" % rank))

    sched = torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                on_trace_ready=ready) as prof:
        for i in range(WAIT + WARMUP + ACTIVE):
            with torch.profiler.record_function("loop_index_%d" % i):
                pass
            if rank == args.late_rank:
                time.sleep(args.late_ms / 1e3)
            opt.zero_grad()
            if args.mode == "after-backward":
                with ddp.no_sync():
                    ddp(x).sum().backward()
                for p in ddp.parameters():  # one collective per parameter, all after the backward
                    dist.all_reduce(p.grad)
            else:
                ddp(x).sum().backward()
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--mode", choices=["overlap", "after-backward"], default="overlap")
    ap.add_argument("--late-rank", type=int, default=-1)
    ap.add_argument("--late-ms", type=float, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    fd, init_file = tempfile.mkstemp(prefix="tdm_gloo_init_")
    os.close(fd)
    os.unlink(init_file)  # the file store creates it
    try:
        mp.spawn(worker, args=(2, args, init_file), nprocs=2)
    finally:
        if os.path.exists(init_file):
            os.unlink(init_file)
    steps = list(range(WAIT + WARMUP, WAIT + WARMUP + ACTIVE))
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump({"steps": steps, "world_size": 2, "mode": args.mode, "late_rank": args.late_rank}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
