#!/usr/bin/python3
"""torch_ddp_train.py - the PyTorch peer: train Qwen3-VL with DistributedDataParallel over
gloo on exactly the micro-batches `tandem export-batches` wrote, from tandem's weights, with
tandem's optimizer settings, and log per-step loss and time.

    /usr/bin/python3 bench/peer_torch/torch_ddp_train.py --config CONFIG.json \
        --weights model.safetensors --batches DIR --steps K --out metrics.jsonl \
        [--nproc 2] [--threads 1] [--freeze-vision --freeze-projector] [--lr 1e-3 ...]

What is matched with `tandem train` (so the two sides do the same work and their losses
agree to fp32 rounding):
  - batches: DIR/index.json lists each rank's micro-batches per step (same global batch);
  - loss: the global token-weighted mean, sum over every rank's micro-batches / global
    counted tokens. DDP averages gradients over ranks, so each rank backpropagates
    loss_sum * world / global_tokens; micro-batches before the last run under no_sync();
  - optimizer: torch.optim.AdamW (tandem's kernel follows its single-tensor path), weight
    decay 0 for 1-D tensors and biases (tandem's no_decay rule), clip_grad_norm_ (same
    formula), and Megatron's learning-rate schedule counted in samples, where step k runs
    at lr(samples consumed before it) (src/train/scheduler.c);
  - DDP buckets: --bucket-elems elements (tandem's --ddp-bucket-size), overlap as DDP
    always does it (all-reduce per bucket from autograd hooks);
  - --bf16 (tandem's --bf16, Megatron's storage): the model's weights are rounded to bfloat16
    (torch's .to(torch.bfloat16), round to nearest even) and computed with in fp32; AdamW steps
    an fp32 main copy of the trained ones, taken from the rounded weights, with the model's fp32
    gradients; after each step the weights are the main copy rounded again.

Each line of --out (rank 0): {"iteration", "loss", "tokens", "grad_norm", "lr", "step_ms",
"cpu_ms", "compute_cpu_ms"}; step_ms is the wall time of the whole step on rank 0 (forward,
backward, all-reduce, clipping, optimizer), like tandem's step_ms; cpu_ms is the CPU time of
the whole process (every thread, gloo's included) and compute_cpu_ms that of the main
(compute) thread in the same step, which other jobs on a shared machine disturb far less.
"""
import argparse
import json
import math
import os
import sys
import time


def lr_at(a, n):
    """Megatron's schedule (src/train/scheduler.c), n = samples consumed so far."""
    gb = a.global_batch_size
    decay = (a.lr_decay_iters or a.steps) * gb
    warm = a.lr_warmup_iters * gb
    if warm > 0 and n <= warm:
        return a.lr_warmup_init + (a.lr - a.lr_warmup_init) * n / warm
    if a.lr_decay_style == "constant":
        return a.lr
    if n > decay:
        return a.min_lr
    span = decay - warm
    if span <= 0:
        return a.min_lr
    r = (n - warm) / span
    if a.lr_decay_style == "linear":
        c = 1.0 - r
    elif a.lr_decay_style == "cosine":
        c = 0.5 * (math.cos(math.pi * r) + 1.0)
    else:
        raise ValueError("--lr-decay-style %s is not supported by the peer" % a.lr_decay_style)
    return a.min_lr + c * (a.lr - a.min_lr)


def worker(rank, a):
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import qwen3vl_torch as Q

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port, rank=rank, world_size=a.nproc)
    idx = json.load(open(os.path.join(a.batches, "index.json")))
    if idx["dp"] != a.nproc:
        raise SystemExit("%s: exported for dp %d, asked to run %d processes" % (a.batches, idx["dp"], a.nproc))
    if idx["steps"] < a.steps:
        raise SystemExit("%s: holds %d steps, asked for %d" % (a.batches, idx["steps"], a.steps))
    a.global_batch_size = idx["global_batch_size"]
    # every rank's micro-batches of every step, loaded before training (tandem's loader prefetches too)
    mine = [[] for _ in range(a.steps)]
    global_tokens = [0] * a.steps
    for e in idx["batches"]:
        if e["step"] >= a.steps:
            continue
        global_tokens[e["step"]] += e["n_target_tokens"]
        if e["rank"] == rank:
            mine[e["step"]].append((e["micro"], Q.load_batch(os.path.join(a.batches, e["file"]), e)))
    for s in mine:
        s.sort(key=lambda p: p[0])

    freeze = {"vision": a.freeze_vision, "projector": a.freeze_projector, "llm": a.freeze_llm,
              "lm_head": a.freeze_lm_head}
    model = Q.build(a.config, a.weights, freeze)
    if a.bf16:
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).float())
    bucket_mb = a.bucket_elems * 4 / (1024.0 * 1024.0)
    ddp = DDP(model, bucket_cap_mb=bucket_mb, broadcast_buffers=False)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in named if not (p.dim() == 1 or n.endswith(".bias"))]
    no_decay = [p for n, p in named if p.dim() == 1 or n.endswith(".bias")]
    # --bf16: the optimizer owns fp32 main parameters; the model's are their bfloat16 values
    main = {id(p): p.detach().clone() for _, p in named} if a.bf16 else {id(p): p for _, p in named}
    opt = torch.optim.AdamW([{"params": [main[id(p)] for p in decay], "weight_decay": a.weight_decay},
                             {"params": [main[id(p)] for p in no_decay], "weight_decay": 0.0}],
                            lr=0.0, betas=(a.adam_beta1, a.adam_beta2), eps=a.adam_eps)
    params = [p for _, p in named]
    out = open(a.out, "w") if rank == 0 else None
    dist.barrier()
    for k in range(a.steps):
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        lr = lr_at(a, k * a.global_batch_size)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)  # --bf16: the optimizer holds the main copies, not these
        scale = a.nproc / float(global_tokens[k])
        loss_sum, toks = 0.0, 0
        for j, (_, b) in enumerate(mine[k]):
            last = j == len(mine[k]) - 1
            if last:
                ls, n = ddp(b)
                (ls * scale).backward()
            else:
                with ddp.no_sync():
                    ls, n = ddp(b)
                    (ls * scale).backward()
            loss_sum += ls.item()
            toks += n
        norm = torch.nn.utils.clip_grad_norm_(params, a.clip_grad) if a.clip_grad > 0 else torch.zeros(())
        if a.bf16:
            for p in params:
                main[id(p)].grad = p.grad
        opt.step()
        if a.bf16:
            with torch.no_grad():
                for p in params:
                    p.copy_(main[id(p)].to(torch.bfloat16).float())
        # the logged loss over all ranks (tandem sums loss and tokens across ranks every step too)
        s = torch.tensor([loss_sum, float(toks)], dtype=torch.float64)
        dist.all_reduce(s)
        ms = (time.perf_counter() - t0) * 1e3
        cpu_ms, compute_cpu_ms = (time.process_time() - c0) * 1e3, (time.thread_time() - m0) * 1e3
        if out:
            out.write(json.dumps({"iteration": k + 1, "loss": s[0].item() / s[1].item(), "tokens": int(s[1].item()),
                                  "grad_norm": float(norm), "lr": lr, "step_ms": round(ms, 3),
                                  "cpu_ms": round(cpu_ms, 3), "compute_cpu_ms": round(compute_cpu_ms, 3)}) + "\n")
            out.flush()
    if out:
        out.close()
    dist.barrier()
    # Not dist.destroy_process_group(): in torch 1.13 it can deadlock (the main thread joins gloo's worker
    # while holding the GIL, and the worker needs the GIL to free a tensor), seen once in a bench run. Every
    # result is written and flushed, and both ranks are past the barrier: leave without the teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="model config.json (Hugging Face layout)")
    p.add_argument("--weights", required=True, help="model.safetensors of a tandem checkpoint")
    p.add_argument("--batches", required=True, help="directory written by tandem export-batches")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--out", required=True, help="metrics JSON Lines (rank 0)")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per process")
    p.add_argument("--port", type=int, default=29533)
    for f in ("freeze-vision", "freeze-projector", "freeze-llm", "freeze-lm-head"):
        p.add_argument("--" + f, action="store_true")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--min-lr", type=float, default=0.0)
    p.add_argument("--lr-warmup-init", type=float, default=0.0)
    p.add_argument("--lr-warmup-iters", type=int, default=0)
    p.add_argument("--lr-decay-iters", type=int, default=0)
    p.add_argument("--lr-decay-style", default="linear")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--adam-beta1", type=float, default=0.9)
    p.add_argument("--adam-beta2", type=float, default=0.999)
    p.add_argument("--adam-eps", type=float, default=1e-8)
    p.add_argument("--clip-grad", type=float, default=1.0)
    p.add_argument("--bf16", action="store_true", help="bfloat16 weights with fp32 main parameters (tandem's --bf16)")
    p.add_argument("--bucket-elems", type=int, default=500000, help="DDP bucket size in fp32 elements")
    a = p.parse_args()
    if a.nproc == 1:
        worker(0, a)
    else:
        import torch.multiprocessing as mp
        mp.spawn(worker, args=(a,), nprocs=a.nproc, join=True)


if __name__ == "__main__":
    main()
