"""One rank of the launcher lab tests (real torch, CPU-only): joins the gloo group the launcher set up through the
environment (MASTER_ADDR/PORT, RANK, WORLD_SIZE), all-reduces rank + 1 across every rank, and records what it saw."""

import json
import os
import sys

import torch
import torch.distributed as dist

out, extra = sys.argv[1], sys.argv[2:]
dist.init_process_group("gloo")  # env:// rendezvous, as a training script under torchrun/accelerate/deepspeed does
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)  # sum over all ranks: world * (world + 1) / 2
rec = {"rank": rank, "world": world, "sum": t.item(), "extra": extra, "executable": sys.executable,
       **{k: os.environ.get(k) for k in ("LOCAL_RANK", "SLURMD_NODENAME", "SLURM_JOB_ID", "MASTER_ADDR")}}
dist.destroy_process_group()
with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
    json.dump(rec, f)
