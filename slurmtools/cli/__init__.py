"""The `slurmtools` command. Each command group lives in its own module and imports heavy libraries lazily."""
