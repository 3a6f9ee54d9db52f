"""A window given as datetimes that carry their zone reaches the real sacct as the local time it reads -S/-E in:
under a zone far from UTC, the last minutes asked in UTC find the job that just ran (the unit test
`test_sacct_window_zone.py` checks the command line; this one checks what Slurm answers to it)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

pytestmark = pytest.mark.lab


def test_a_utc_window_finds_the_job_under_another_zone(lab, monkeypatch):
    out = lab.sh("sbatch --parsable --qos=production --gres=gpu:h100:1 --output=/dev/null --wrap true",
                 user="labuser").stdout.strip()
    job = int(out.split(";")[0])
    lab.wait_state(job, "COMPLETED")
    lab.wait_accounting(job)
    monkeypatch.setenv("TZ", "Asia/Kolkata")     # 5.5 h east of UTC: a window read in UTC would miss the job
    time.tzset()
    try:
        from slurmtools.slurm.commands import CommandBackend

        b = CommandBackend(env=dict(lab.env, TZ="Asia/Kolkata"))
        now = datetime.now(timezone.utc)
        recs = b.accounting(now - timedelta(minutes=10), now + timedelta(minutes=5), job_ids=[job])
    finally:
        monkeypatch.undo()
        time.tzset()
    assert [r.job_id_raw for r in recs if r.step is None] == [job], recs
