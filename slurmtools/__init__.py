"""slurmtools: topology-aware placement, tiered policy and utilization reports for Slurm GPU clusters.

Kept import-free on purpose: the CLI and the slurmd hooks import this package, and start-up time matters.
"""

__version__ = "0.1.0"
