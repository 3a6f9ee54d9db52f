"""One task of the mpi template's lab test: records the rank srun gave it and what srun's PMI-2 plugin set up."""

import json
import os
import sys

keys = ("SLURM_PROCID", "SLURM_NTASKS", "SLURMD_NODENAME", "PMI_RANK", "PMI_SIZE", "PMI_FD")
rec = {k: os.environ.get(k) for k in keys}
rec["args"] = sys.argv[2:]
with open(os.path.join(sys.argv[1], f"task-{rec['SLURM_PROCID']}.json"), "w") as f:
    json.dump(rec, f)
