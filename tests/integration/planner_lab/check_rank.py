"""One rank of the lab's torchrun test: records what it sees so the test can check agreement across hosts."""

import json
import os
import sys

out = sys.argv[1]
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURMD_NODENAME", "SLURM_JOB_ID",
        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_NUM_NODES", "NCCL_IB_HCA", "CUDA_VISIBLE_DEVICES")
rec = {k: os.environ.get(k) for k in keys}
with open(os.path.join(out, f"rank-{rec['RANK']}.json"), "w") as f:
    json.dump(rec, f)
