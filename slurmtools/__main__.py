from slurmtools.cli.main import run

run()
