"""A job step that waits for the checkpoint signal and writes a marker file when it arrives."""

import os
import signal
import sys
import time

marker, signame = sys.argv[1], sys.argv[2]
got = []
signal.signal(getattr(signal, "SIG" + signame), lambda s, f: got.append(s))
with open(marker + ".started", "w") as f:
    f.write(str(os.getpid()))
end = time.time() + 300
while not got and time.time() < end:
    time.sleep(0.2)
if got:
    with open(marker, "w") as f:
        f.write(f"{signal.Signals(got[0]).name} pid={os.getpid()} node={os.environ.get('SLURMD_NODENAME')}\n")
sys.exit(0 if got else 3)
