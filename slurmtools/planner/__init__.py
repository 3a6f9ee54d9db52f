"""Placement planner: a job request -> a topology-aware plan -> an sbatch script (issue 4).

Layers: `request` (what is asked), `view` (the cluster as the optimiser sees it), `packing` (fewest leaf
switches, best fit), `quality` (estimated allreduce bandwidth), `plan` (every directive and why),
`templates` (Jinja2 rendering with shell quoting), `explain` (text for people), `live` (the only module that
reads Slurm).
"""
