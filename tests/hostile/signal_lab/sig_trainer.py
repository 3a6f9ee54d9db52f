"""One rank of the checkpoint-signal lab tests: a stand-in trainer using slurmtools.checkpoint as a real one would.

It installs the library's handlers (the warning signal comes from SLURMTOOLS_CHECKPOINT_SIGNAL, which the plan
exports), says it is ready, and "trains" until should_stop(); then it records which signal reached it and which
launcher processes were still alive, and exits 0 without a requeue. Run by python, torchrun, accelerate or srun.
"""

import json
import os
import sys
import time

from slurmtools.checkpoint import Checkpointer

out = sys.argv[1]
rank = int(os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or 0)
task = os.environ.get("SLURM_ARRAY_TASK_ID", "")
name = f"rank-{rank}" + (f"-task-{task}" if task else "")
ckpt = Checkpointer(os.path.join(out, "ckpt-" + name), requeue=False)
with open(os.path.join(out, name + ".ready"), "w") as f:
    f.write(str(os.getpid()))
end = time.time() + 240
while not ckpt.should_stop() and time.time() < end:
    time.sleep(0.1)
got = ckpt.cause.signal if ckpt.should_stop() else None
rec = {"rank": rank, "task": task, "signal": got, "warning_signal": ckpt.warning_signal,
       "parent_alive": os.getppid() != 1, "node": os.environ.get("SLURMD_NODENAME")}
with open(os.path.join(out, name + ".json"), "w") as f:
    json.dump(rec, f)
sys.exit(0 if got else 3)
