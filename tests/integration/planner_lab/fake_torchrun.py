"""Stand-in for torchrun in the lab (no torch there): reads the options the torchrun template passes and starts
--nproc-per-node copies of the command with the variables torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT, GROUP_RANK). Static rendezvous (multi-node plans): the node rank is the --node-rank the
template computed from its rank order, as real torchrun takes it. c10d: real torchrun learns the group rank from
the rendezvous; here it is SLURM_NODEID, so that part is NOT exercised."""

import os
import subprocess
import sys

args = sys.argv[1:]
opts = {}
while args and args[0].startswith("--"):
    k, _, v = args.pop(0)[2:].partition("=")
    opts[k] = v
nnodes, nproc = int(opts["nnodes"]), int(opts["nproc-per-node"])
if "rdzv-backend" in opts:
    host, _, port = opts["rdzv-endpoint"].rpartition(":")
    assert opts["rdzv-backend"] == "c10d" and opts["rdzv-id"] == os.environ["SLURM_JOB_ID"], opts
    node = int(os.environ["SLURM_NODEID"])
else:  # static: torchrun's default rendezvous
    host, port, node = opts["master-addr"], opts["master-port"], int(opts["node-rank"])
    assert 0 <= node < nnodes, opts
procs = []
for local in range(nproc):
    env = dict(os.environ, RANK=str(node * nproc + local), LOCAL_RANK=str(local), WORLD_SIZE=str(nnodes * nproc),
               MASTER_ADDR=host, MASTER_PORT=port, GROUP_RANK=str(node))
    procs.append(subprocess.Popen(args, env=env))
sys.exit(max(p.wait() for p in procs))
