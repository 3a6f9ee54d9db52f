"""Prolog/epilog code that slurmd runs as root (via `scripts/prolog`, `scripts/epilog`).

Standard library only (pynvml when a job has GPUs and it is installed): these run before and after every job,
so start-up time counts, and a crash here drains nodes.
"""
