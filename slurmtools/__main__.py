from slurmtools.cli.launch import run

run()
