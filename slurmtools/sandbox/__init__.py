"""The capacity sandbox: a site's recorded history replayed through a real slurmctld shaped like a candidate site.

Data flows one way, as everywhere in slurmtools: `trace` (the recorded jobs, pure) and the clock (`clocks`:
`timescale`'s scaled clock or `faketime`'s fast one; what a speed-up does to every time, and which hold, pure)
-> `submission` (each job's sbatch arguments, pure) -> `lab` (I/O: the sandbox's daemons, users, the feed, sacct)
-> `outcome` (pure: waits, utilisation, GPU-hours lost, refusals per tier and account, candidate against
baseline). The scheduler decides everything; slurmtools only feeds and observes (docs/sandbox.md).
"""
