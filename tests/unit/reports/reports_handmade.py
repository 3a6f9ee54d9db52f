"""A small hand-written sacct dump whose report numbers are worked out by hand below (window 2026-11-02, a day).

Example site: 16 nodes x 8 h100 = 128 GPUs at 2.40 USD per GPU-hour; gpu16 is down 00:00-12:00 (96 GPU-h).

| run | tier | account | GPUs | in window | GPU-h | wait (min) |
| --- | --- | --- | --- | --- | --- | --- |
| 101 | production | vision | 8 | 01:30-07:30 | 48 | 30 |
| 102 run 0 PREEMPTED | standard | nlp | 4 | 02:10-05:10 | 12 (lost) | 10 |
| 102 run 1 | standard | nlp | 4 | 05:20-07:20 | 8 | 8 (from Eligible 05:12) |
| 103 FAILED | standard | students | 1 | 03:00-03:30 | 0.5 | 0 |
| 104_1 (raw 104) | scavenger | vision | 2 | 00:00-02:00 | 4 | 0 |
| 104_2 (raw 105) | scavenger | vision | 2 | 10:00-11:00 | 2 | 600 |
| 106 (from 11-01 18:00) | standard | nlp | 16 | 00:00-06:00 | 96 | (started before) |
| 107 RUNNING | production | vision | 8 | 20:00-24:00 | 32 | 60 |
| 108 PENDING, 109 CPU-only | - | - | - | - | 0 | - |
| 110 hostile name with a pipe | standard | students | 1 | 12:00-13:00 | 1 | 0 |

Total 203.5 GPU-h; available 3072 - 96 = 2976; utilization 6.838%; cost 488.40.

Slurm's gres/gpuutil: 101.batch (one task, 8 GPUs) reports 720, its SM use summed over the 8 GPUs: 90 % each;
110.batch (one task, one GPU) 5 %.
"""

HEADER = ("State|JobName|JobIDRaw|JobID|User|Account|QOS|Partition|Submit|Eligible|Start|End|AllocTRES|NNodes|"
          "NodeList|ExitCode|TRESUsageInAve|Cluster")


def _tres(g: int, nodes: int = 1) -> str:
    return f"billing={g * 12},cpu={g * 12},gres/gpu:h100={g},gres/gpu={g},mem={g * 100}G,node={nodes}" if g else \
        "billing=4,cpu=4,mem=8G,node=1"


def _row(state, name, raw, jid, user, acct, qos, sub, elig, start, end, gpus, nodes, nodelist, exit_="0:0",
         usage="", part="gpu"):
    return "|".join([state, name, raw, jid, user, acct, qos, part, sub, elig, start, end,
                     _tres(gpus, nodes) if gpus is not None else "", str(nodes), nodelist, exit_, usage, "lab"])


D = "2026-11-02T"
ROWS = [
    _row("COMPLETED", "train", "101", "101", "alice", "vision", "production", D + "01:00:00", D + "01:00:00",
         D + "01:30:00", D + "07:30:00", 8, 1, "gpu01"),
    _row("COMPLETED", "batch", "101.batch", "101.batch", "", "vision", "", D + "01:30:00", D + "01:30:00",
         D + "01:30:00", D + "07:30:00", 8, 1, "gpu01", usage="cpu=00:10:00,gres/gpumem=70000M,gres/gpuutil=720"),
    _row("PREEMPTED", "ft", "102", "102", "bob", "nlp", "standard", D + "02:00:00", D + "02:00:00",
         D + "02:10:00", D + "05:10:00", 4, 1, "gpu02", exit_="0:15"),
    _row("COMPLETED", "ft", "102", "102", "bob", "nlp", "standard", D + "05:10:00", D + "05:12:00",
         D + "05:20:00", D + "07:20:00", 4, 1, "gpu03"),
    _row("FAILED", "hw", "103", "103", "carol", "students", "standard", D + "03:00:00", D + "03:00:00",
         D + "03:00:00", D + "03:30:00", 1, 1, "gpu04", exit_="1:0"),
    _row("COMPLETED", "sweep", "104", "104_1", "alice", "vision", "scavenger", D + "00:00:00", D + "00:00:00",
         D + "00:00:00", D + "02:00:00", 2, 1, "gpu05"),
    _row("COMPLETED", "sweep", "105", "104_2", "alice", "vision", "scavenger", D + "00:00:00", D + "00:00:00",
         D + "10:00:00", D + "11:00:00", 2, 1, "gpu05"),
    _row("COMPLETED", "big", "106", "106", "bob", "nlp", "standard", "2026-11-01T17:00:00", "2026-11-01T17:00:00",
         "2026-11-01T18:00:00", D + "06:00:00", 16, 2, "gpu[06-07]"),
    _row("RUNNING", "long", "107", "107", "alice", "vision", "production", D + "19:00:00", D + "19:00:00",
         D + "20:00:00", "Unknown", 8, 1, "gpu08"),
    _row("PENDING", "wait", "108", "108", "bob", "nlp", "standard", D + "22:00:00", D + "22:00:00",
         "Unknown", "Unknown", None, 0, "None assigned"),
    _row("COMPLETED", "cpu", "109", "109", "bob", "nlp", "standard", D + "04:00:00", D + "04:00:00",
         D + "04:00:00", D + "05:00:00", 0, 1, "gpu09"),
    _row("COMPLETED", "a|b <script>alert(1)</script>", "110", "110", "carol", "students", "standard",
         D + "12:00:00", D + "12:00:00", D + "12:00:00", D + "13:00:00", 1, 1, "gpu10"),
    _row("COMPLETED", "batch", "110.batch", "110.batch", "", "students", "", D + "12:00:00", D + "12:00:00",
         D + "12:00:00", D + "13:00:00", 1, 1, "gpu10", usage="cpu=00:01:00,gres/gpuutil=5"),
]
TEXT = "\n".join([HEADER] + ROWS) + "\n"
EVENTS = ("NodeName|TimeStart|TimeEnd|State|Reason\n"
          "|2026-10-01T00:00:00|Unknown|UP|cluster registered\n"
          "gpu16|2026-11-02T00:00:00|2026-11-02T12:00:00|DOWN|bad gpu\n"
          "gpu16|2026-11-02T06:00:00|2026-11-02T09:00:00|DRAIN|overlaps the down time\n")
SINCE = "2026-11-02T00:00:00"
UNTIL = "2026-11-03T00:00:00"
