"""Right-sizing: what jobs asked for against what they used, and the smaller request that would have done
(`slurmtools advise`, `plan --right-size`, `advise --notify`; docs/advise.md).

`usage` reads (sacct, the epilog's records: I/O); `model` holds the typed runs and advice; `rules` decides (pure);
`rightsize` applies advice to a plan request (pure); `notify` writes the notices' text (pure) and `deliver` sends
them (I/O); `section` is the report's table.
"""
