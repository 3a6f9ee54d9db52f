"""Requests at and around every limit of the example site, shared by the Lua mirror test and the lab's
differential test. Each case is (sbatch args, script text)."""

from __future__ import annotations

import random

SIG = "#!/bin/bash\n#SBATCH --signal=B:USR1@300\nsleep 1\n"
SIG_SCAV = "#!/bin/bash\n#SBATCH --signal=B:USR1@120\nsleep 1\n"
NOSIG = "#!/bin/bash\nsleep 1\n"
SCRIPTS = [SIG, SIG_SCAV, NOSIG, "#!/bin/bash\n#SBATCH --signal=USR2@60\nsleep 1\n",
           "#!/bin/bash\n#SBATCH --signal=SIGUSR1\n#SBATCH --time=30\nsleep 1\n",
           "#!/bin/bash\necho first\n#SBATCH --signal=B:USR1@300\n"]


def edge_cases() -> list[tuple[list[str], str]]:
    out: list[tuple[list[str], str]] = []
    for qos, gpus, minutes, nodes in (("production", 64, 2880, 8), ("standard", 32, 1440, 4),
                                      ("scavenger", 128, 720, None)):
        script = SIG_SCAV if qos == "scavenger" else SIG
        for g in (gpus - 1, gpus, gpus + 1):
            out.append((["-A", "vision", "-q", qos, f"--gpus=h100:{g}", "-N", str(max(1, -(-g // 8)))], script))
        for m in (minutes - 1, minutes, minutes + 1):
            out.append((["-A", "nlp", "-q", qos, "--gres=gpu:h100:1", "-t", str(m)], script))
        if nodes:
            for n in (nodes - 1, nodes, nodes + 1):
                out.append((["-A", "nlp", "-q", qos, "--gres=gpu:h100:1", "-N", str(n)], script))
    for c in (13, 14, 15):
        out.append((["-A", "vision", "--gres=gpu:h100:2", "-n", "2", "-c", str(c)], SIG))
    for mem in ("499999", "500000", "500001", "488G", "489G"):
        out.append((["-A", "vision", "--gres=gpu:h100:2", f"--mem={mem}"], SIG))
    for mpc in ("249999", "250000", "250001"):
        out.append((["-A", "vision", "--gpus-per-node=h100:1", f"--mem-per-cpu={mpc}"], SIG))
    for a in (["--gres=gpu:4"], ["--gpus=8"], ["--gpus-per-node=2"], ["--gpus=h100:4", "--gpus-per-task=1", "-n", "6"],
              ["--gpus-per-task=h100:1", "-n", "40"], ["--gpus-per-task=h100:2", "-n", "16"]):
        out.append((["-A", "vision"] + a, SIG))
    for acct, qos in (("students", "production"), ("students", "standard"), ("students", "scavenger"),
                      ("nlp", "normal"), ("vision", None)):
        args = ["-A", acct, "--gres=gpu:h100:1"] + (["-q", qos] if qos else [])
        out.append((args, SIG))
    out.append((["-A", "vision", "-p", "gpu", "-q", "standard", "--gres=gpu:h100:1"], SIG))
    out.append((["-A", "vision", "-p", "nosuch", "--gres=gpu:h100:1"], SIG))
    for s in SCRIPTS:
        out.append((["-A", "nlp", "-q", "standard", "--gres=gpu:h100:1"], s))
        out.append((["-A", "nlp", "-q", "scavenger", "--gres=gpu:h100:1"], s))
    out.append((["-A", "vision", "--gres=gpu:h100:1", "--cpus-per-gpu=14"], SIG))
    out.append((["-A", "vision", "--gres=gpu:h100:1", "--cpus-per-gpu=15"], SIG))
    out.append((["-A", "vision", "-N", "2", "--ntasks-per-node=8", "--gres=gpu:h100:1", "-c", "2"], SIG))
    for per_socket, sockets, nodes in ((4, 2, 4), (4, 2, 5), (2, 2, 8), (3, 1, 1), (1, 2, 1)):
        out.append((["-A", "vision", "-q", "standard", f"--gpus-per-socket=h100:{per_socket}",
                      f"--sockets-per-node={sockets}", "-N", str(nodes)], SIG))
    out.append((["-A", "vision", "--gpus-per-socket=4", "--sockets-per-node=2"], SIG))  # untyped
    out.append((["-A", "vision", "--gpus-per-socket=h100:4"], SIG))  # sbatch refuses: no --sockets-per-node
    for tpg, gpu_opt in ((20, "--gpus=h100:2"), (14, "--gpus=h100:2"), (7, "--gpus-per-node=h100:2"),
                         (8, "--gpus-per-node=h100:4")):
        out.append((["-A", "vision", "-q", "production", gpu_opt, f"--ntasks-per-gpu={tpg}", "-c", "2"], SIG))
    for mpg in ("250000", "250001", "244G", "245G"):
        out.append((["-A", "vision", "--gres=gpu:h100:2", f"--mem-per-gpu={mpg}"], SIG))
    out.append((["-A", "vision", "-c", "4"], SIG))  # no GPUs
    # CPU jobs as the planner shapes them (the example site has no CPU partition: sent by hand to its GPU one)
    out.append((["-A", "vision", "-p", "gpu", "-q", "standard", "-N", "1", "--ntasks-per-node=1", "-c", "8",
                 "--mem=32000M", "--requeue"], SIG))
    out.append((["-A", "nlp", "-p", "gpu", "-q", "production", "-N", "2", "--ntasks-per-node=8", "-c", "16",
                 "--mem=512000M"], SIG))
    # sbatch's other forms (test_policy_sbatch_forms.py): a zero limit is UNLIMITED, memory with a B, two GPU
    # options joined in tres_per_node, a partition list with a partition the site lacks
    out.append((["-A", "nlp", "-q", "standard", "--gres=gpu:h100:1", "-t", "0"], SIG))
    for mem in ("100GB", "489gb", "490GB"):
        out.append((["-A", "vision", "--gres=gpu:h100:2", f"--mem={mem}"], SIG))
    out.append((["-A", "vision", "-q", "standard", "--gpus-per-node=h100:8", "--gres=gpu:h100:2", "-N", "8"], SIG))
    out.append((["-A", "vision", "-q", "standard", "--gpus-per-node=h100:2", "--gres=gpu:h100:8", "-N", "4"], SIG))
    out.append((["-A", "vision", "-q", "standard", "--gpus=h100:2,h100:33"], SIG))
    out.append((["-A", "vision", "-p", "gpu,nosuch", "--gres=gpu:h100:1"], SIG))
    # nodes a job may get without -N: each task may get its own node (at most the partition's 16); sbatch cuts a
    # range to the tasks; --exclusive gets every GPU of its nodes, =user/=mcs only what they ask for
    std = ["-A", "vision", "-q", "standard"]
    for a in (["-n", "8", "--gres=gpu:h100:8"], ["-n", "8", "--gres=gpu:h100:8", "-N", "1"],
              ["-n", "4", "--gpus-per-node=h100:8"], ["-n", "5", "--gpus-per-node=h100:8"],
              ["-n", "16", "--ntasks-per-node=8", "--gres=gpu:h100:8"], ["-n", "8", "--gpus-per-task=h100:1"],
              ["-n", "64", "--gres=gpu:h100:1"], ["-n", "4", "--gpus=h100:4", "--mem=600G"],
              ["-N", "1-4", "-n", "4", "--gres=gpu:h100:4", "-c", "15"], ["-N", "2-8", "-n", "4", "--gres=gpu:h100:8"],
              ["-N", "4", "-n", "2", "--gres=gpu:h100:8"], ["--exclusive", "-N", "4"], ["--exclusive", "-N", "5"],
              ["--exclusive", "-N", "5", "--gres=gpu:h100:1"], ["--exclusive=user", "-N", "4", "--gres=gpu:h100:1"],
              ["--exclusive=mcs", "-N", "4", "--gres=gpu:h100:1"], ["--exclusive", "--gpus=h100:33"],
              ["--exclusive", "-n", "8"], ["--exclusive", "--gres=gpu:4"], ["--exclusive", "-c", "120"]):
        out.append((std + a, SIG))
    out.append((["-A", "vision", "-q", "scavenger", "-n", "40", "--gpus-per-node=h100:8"], SIG_SCAV))
    out.append((["-A", "vision", "-q", "scavenger", "--exclusive", "-n", "17"], SIG_SCAV))
    # without -N at most the tier's node limit (its QoS's MaxTRESPerJob node=): standard 4, production 8; scavenger
    # has none (the partition's 16); never fewer than the fewest nodes; with -N the range's top counts. vision over
    # its budget is re-routed to scavenger, where the 40-task job counts 16 nodes (budget lab test)
    for a in (["-n", "40", "--ntasks-per-node=8", "--gres=gpu:h100:1"], ["-N", "2-8", "-n", "8", "--gres=gpu:h100:1"],
              ["-n", "40", "--gpus=h100:16", "--mem=300000"], ["-n", "5", "--gres=gpu:h100:8"]):
        out.append((std + a, SIG))
    for a in (["-n", "16", "--gres=gpu:h100:8"], ["-n", "17", "--gres=gpu:h100:8"],
              ["-n", "16", "--gpus-per-task=h100:1"], ["-n", "9", "--ntasks-per-node=1", "--gres=gpu:h100:1"],
              ["-n", "40", "--gpus=h100:16", "--mem=300000"]):
        out.append((["-A", "vision", "-q", "production"] + a, SIG))
    for a in (["-n", "8", "--gres=gpu:h100:8"], ["-n", "17", "--gres=gpu:h100:8"],
              ["-n", "40", "--gpus=h100:16", "--mem=300000"]):
        out.append((["-A", "vision", "-q", "scavenger"] + a, SIG_SCAV))
    out.append((["-A", "vision", "-n", "8", "--gres=gpu:h100:8"], SIG))  # no QoS: the default tier's 4 nodes
    # without -N and -n, each GPU of --gpus may come from its own node (at least the nodes its GPUs need: 12 of 8 a
    # node, 2); with -n the tasks bound the nodes
    for a in (["--gpus=h100:4", "--mem=600G"], ["--gpus=h100:4", "-c", "16"], ["--gpus=h100:12", "--mem=800G"],
              ["--gpus=h100:4", "-n", "1", "--mem=600G"], ["--gpus=h100:12", "--mem=300G"],
              ["--gpus=h100:33", "--mem=1000"], ["--gpus=16", "--mem=300G"]):
        out.append((std + a, SIG))
    out.append((["-A", "vision", "-q", "scavenger", "--gpus=h100:20", "--mem=300G"], SIG_SCAV))
    return out


def random_cases(n: int, seed: int = 5) -> list[tuple[list[str], str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        args = ["-A", rng.choice(["vision", "nlp", "students"])]
        if rng.random() < 0.8:
            args += ["-q", rng.choice(["production", "standard", "scavenger", "standard", "bogus"])]
        if rng.random() < 0.1:
            args += ["-p", rng.choice(["gpu", "cpu"])]
        kind = rng.choice(["gres", "gpus", "pernode", "pertask", "none"])
        typ = rng.choice(["h100:", "h100:", "h100:", "", "a100:"])
        nodes = rng.choice([1, 1, 1, 2, 3, 4, 5, 8, 9])
        if kind == "gres":
            args += [f"--gres=gpu:{typ}{rng.choice([1, 2, 4, 8])}", "-N", str(nodes)]
        elif kind == "gpus":
            g = rng.choice([1, 8, 16, 31, 32, 33, 63, 64, 65, 127, 128, 129])
            args += [f"--gpus={typ}{g}", "-N", str(max(nodes, -(-g // 8)))]
        elif kind == "pernode":
            args += [f"--gpus-per-node={typ}{rng.choice([1, 4, 8])}", "-N", str(nodes)]
        elif kind == "pertask":
            t = rng.choice([1, 2, 8, 16])
            args += [f"--gpus-per-task={typ}1", "-n", str(t), "-N", str(max(1, -(-t // 8)))]
        if rng.random() < 0.5:
            args += ["-t", rng.choice(["60", "719", "720", "721", "1440", "1441", "2880", "2881", "1-00:00:00"])]
        if rng.random() < 0.3:
            args += ["-c", str(rng.choice([1, 8, 14, 15, 28, 29]))]
        if rng.random() < 0.3:
            args += [f"--mem={rng.choice(['100G', '244G', '245G', '250000', '250001', '1000000'])}"]
        out.append((args, rng.choice(SCRIPTS)))
    return out
