"""`scontrol show job -o` as `admin policy check-update` reads it: real lines from the 22.05 lab, where a job's
name, comment and output path hold blanks and words that look like the job's own fields."""

from __future__ import annotations

import pytest

from slurmtools.policy.request import RequestError
from slurmtools.policy.update import parse_show_job
from tests.unit.topology._data import TEST_DATA

#: tests/data/slurm/scontrol-show-job-o-22.05.8.txt: line 1 a job submitted with
#: `-J "a b QOS=production Partition=evil" --comment "c QOS=x" -o "/tmp/o p Account=zz"`, line 2 a plain one
#: (output path with a blank, two typed GPUs)
LINES = (TEST_DATA.parent / "slurm" / "scontrol-show-job-o-22.05.8.txt").read_text().splitlines()


def test_a_plain_record_is_read_whole():
    show = parse_show_job(LINES[1])
    assert (show["JobId"], show["JobName"], show["Account"], show["QOS"], show["Partition"]) == \
        ("2", "plain", "vision", "standard", "gpu")
    assert show["TresPerNode"] == "gres:gpu:h100:2" and show["StdOut"] == "/tmp/o"
    assert show["TRES"] == "cpu=1,mem=1G,node=1,billing=1,gres/gpu=2,gres/gpu:h100=2"


def test_a_name_that_holds_the_jobs_fields_is_refused_not_read():
    """The name's `QOS=production Partition=evil` came first and were read as the job's QoS and partition (the
    real ones are standard and gpu), so a check ran on a job that does not exist."""
    with pytest.raises(RequestError) as err:
        parse_show_job(LINES[0])
    msg = str(err.value)
    assert "QOS= is printed twice" in msg and "\n" not in msg


@pytest.mark.parametrize("field, value", [("Account", "zz"), ("TimeLimit", "UNLIMITED"), ("NumNodes", "64")])
def test_any_field_printed_for_every_job_is_caught_in_a_name(field, value):
    line = LINES[1].replace("JobName=plain", f"JobName=plain {field}={value}", 1)
    with pytest.raises(RequestError, match=f"{field}= is printed twice"):
        parse_show_job(line)
