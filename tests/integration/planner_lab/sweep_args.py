"""One task of the array lab test: records the sweep arguments it was given."""

import json
import os
import sys

with open(os.path.join(sys.argv[1], f"task-{os.environ['SLURM_ARRAY_TASK_ID']}.json"), "w") as f:
    json.dump({"args": sys.argv[2:], "ntasks": os.environ.get("SLURM_NTASKS")}, f)
