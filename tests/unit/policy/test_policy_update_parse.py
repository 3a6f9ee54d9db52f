"""`scontrol show job -o` as `admin policy check-update` reads it: real lines from the 22.05 lab, where a job's
name, comment and output path hold blanks and words that look like the job's own fields."""

from __future__ import annotations

import pytest

from slurmtools.policy.request import RequestError
from slurmtools.policy.update import parse_show_job
from slurmtools.slurm.show_job import AmbiguousRecord, SeveralRecords, parse_show_job as fields, request_tres
from tests.unit.topology._data import TEST_DATA

#: tests/data/slurm/scontrol-show-job-o-22.05.8.txt: line 1 a job submitted with
#: `-J "a b QOS=production Partition=evil" --comment "c QOS=x" -o "/tmp/o p Account=zz"`, line 2 a plain one
#: (output path with a blank, two typed GPUs)
LINES = (TEST_DATA.parent / "slurm" / "scontrol-show-job-o-22.05.8.txt").read_text().splitlines()


def test_a_plain_record_is_read_whole():
    show = parse_show_job(LINES[1])
    assert (show["JobId"], show["JobName"], show["Account"], show["QOS"], show["Partition"]) == \
        ("2", "plain", "vision", "standard", "gpu")
    assert show["TresPerNode"] == "gres:gpu:h100:2" and show["StdOut"] == "/tmp/o p"   # the path holds a blank
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


# -- the reader itself (`slurm.show_job`), on lines as scontrol 25.11 prints them ------------------------------------
#: a running 25.11 job, hand-written from `_sprint_job_info` (src/scontrol/info_job.c) with `-o`
JOB_25 = ("JobId=101 ArrayJobId=100 ArrayTaskId=1 JobName=my run UserId=alice(1000) GroupId=alice(1000) "
          "MCS_label=N/A Priority=1 Nice=0 Account=vision QOS=standard JobState=RUNNING Reason=None "
          "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:01:00 "
          "TimeLimit=01:00:00 TimeMin=N/A Partition=gpu NodeList=gpu[01-02] NumNodes=2 NumCPUs=2 NumTasks=2 "
          "ReqTRES=cpu=2,mem=2G,node=2,billing=2,gres/gpu=16 AllocTRES=cpu=2,mem=2G,node=2,billing=2,gres/gpu=16,"
          "gres/gpu:h100=16 Command=/data/my proj/train.sh --lr 0.1 SubmitLine=sbatch -J my run train.sh "
          "WorkDir=/data/my proj Comment=lr=0.1 bs=32 StdErr=/data/my proj/o 1.log StdIn=/dev/null "
          "StdOut=/data/my proj/o 1.log TresPerNode=gres/gpu:h100:8\n")


def test_values_with_blanks_are_read_whole():
    """A value ran to its first blank: the job's name `my run` read as `my`, its working folder `/data/my proj` as
    `/data/my`, and a comment's `bs=32` became a field of its own."""
    f = fields(JOB_25)
    assert (f["JobName"], f["WorkDir"], f["StdOut"], f["Comment"]) == \
        ("my run", "/data/my proj", "/data/my proj/o 1.log", "lr=0.1 bs=32")
    assert f["Command"] == "/data/my proj/train.sh --lr 0.1" and f["SubmitLine"] == "sbatch -J my run train.sh"
    assert (f["JobState"], f["TimeLimit"], f["NodeList"], f["TresPerNode"]) == \
        ("RUNNING", "01:00:00", "gpu[01-02]", "gres/gpu:h100:8")
    assert "bs" not in f


def test_an_array_or_heterogeneous_job_prints_several_records():
    """`scontrol show job -o 100` of an array job with pending tasks (or a heterogeneous job's leader) prints one
    line per record; they were read as one record holding `JobId=` twice, blamed on the job's name."""
    meta = JOB_25.replace("JobId=101 ", "JobId=100 ").replace("ArrayTaskId=1 ", "ArrayTaskId=2-9 ")
    text = JOB_25 + meta
    with pytest.raises(SeveralRecords, match=r"printed 2 records \(JobId=101, 100: the tasks of an array"):
        fields(text)
    assert isinstance(SeveralRecords(["1"], None), AmbiguousRecord)   # what the callers catch today
    assert fields(text, job_id=100)["ArrayTaskId"] == "2-9"
    assert fields(text, job_id="100_1")["JobId"] == "101"
    het = "JobId=7 HetJobId=7 HetJobOffset=0 JobName=a\nJobId=8 HetJobId=7 HetJobOffset=1 JobName=b\n"
    assert fields(het, job_id="7+1")["JobName"] == "b"
    with pytest.raises(SeveralRecords, match="none of them or more than one is job 9"):
        fields(het, job_id=9)


def test_the_request_tres_of_each_release():
    """25.11 prints ReqTRES= and AllocTRES=; 22.05 one TRES= (the request while pending)."""
    assert request_tres(fields(JOB_25)) == "cpu=2,mem=2G,node=2,billing=2,gres/gpu=16"
    assert request_tres(fields(LINES[1])) == "cpu=1,mem=1G,node=1,billing=1,gres/gpu=2,gres/gpu:h100=2"


#: tests/data/slurm/scontrol-show-job-o-25.11.7.txt: a held job with a blank in its name, `bs=32` in its comment,
#: and 25.11's SubmitLine= repeating both
LINE_25 = (TEST_DATA.parent / "slurm" / "scontrol-show-job-o-25.11.7.txt").read_text()


def test_the_update_check_reads_25_11s_request_tres():
    """25.11 prints no TRES= (ReqTRES= and AllocTRES= instead): the check read an empty request there, so the
    update's GPU and CPU counts had nothing of slurmctld's to start from. Its SubmitLine repeats `bs=32`, which
    the reader took for a second field and refused the record."""
    from slurmtools.policy.update import record_request

    show = parse_show_job(LINE_25, "13")
    assert (show["JobName"], show["Comment"], show["QOS"]) == ("my run", "lr=0.1 bs=32", "production")
    req, tres = record_request(show)
    assert tres == "cpu=1,mem=1G,node=1,billing=1,gres/gpu=2,gres/gpu:h100=2"
    assert req.qos == "production" and req.tres_per_node == "gres/gpu:h100:2"


def test_a_job_without_a_limit_of_its_own_is_checked_not_refused():
    """scontrol prints TimeLimit=Partition_Limit for a job whose limit is unset (NO_VAL): it was refused as a
    malformed time; job_rec holds no limit of the job's own, and neither does the check."""
    from slurmtools.policy.update import record_request

    import re

    req, _ = record_request(parse_show_job(re.sub(r"TimeLimit=\S+", "TimeLimit=Partition_Limit", LINES[1])))
    assert req.time_limit is None
