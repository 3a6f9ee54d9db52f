"""Talking to Slurm: the backend interface, its command-line implementation, and parsers of Slurm's output."""
