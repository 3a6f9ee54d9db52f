"""The Slurm side rendered from the site: slurm.conf fragments, sacctmgr commands, gres.conf, topology.conf."""
