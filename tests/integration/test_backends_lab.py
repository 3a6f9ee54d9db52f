"""The two backends against the same real Slurm: what pyslurm reads and does must equal what Slurm's commands read
and do. On 22.05, for which PyPI has no pyslurm, the automatic choice must be the command backend and a forced
pyslurm must be refused in one line saying why."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from slurmtools.errors import SlurmUnavailable
from slurmtools.slurm.backends import get_backend, pyslurm_usable

pytestmark = pytest.mark.lab

SCRIPT = "#!/bin/bash\n#SBATCH --qos=production\n#SBATCH -A vision\n#SBATCH -t 10\n{body}\n"


def _both(lab):
    cmd = get_backend("commands", env=lab.env)
    pys = get_backend("pyslurm", env=lab.env)
    return cmd, pys


def test_backend_choice_on_this_release(lab):
    if lab.release.name != "25.11":
        assert type(get_backend(env=lab.env)).__name__ == "CommandBackend"
        with pytest.raises(SlurmUnavailable) as e:
            get_backend("pyslurm", env=lab.env)
        assert str(e.value).startswith("--backend pyslurm: ") and "\n" not in str(e.value)
        return
    ok, why = pyslurm_usable(lab.env, use_cache=False)
    assert ok, why
    assert type(get_backend(env=lab.env)).__name__ == "PyslurmBackend"  # auto picks it on a matching Slurm


def _wait(pred, what: str, timeout: float = 90):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slurm_release("25.11")
def test_same_scenario_through_both_backends(lab):
    cmd, pys = _both(lab)
    jobs = {}
    # submitted through each backend: a 2-node 16-GPU job, a 3-GPU job, a held job, a job that requeues
    jobs["two"] = cmd.submit(SCRIPT.format(body="srun true; sleep 5"), ["-N2", "--gpus-per-node=h100:8", "-J", "bk-two"],
                             cwd=str(lab.jobs_dir))
    jobs["three"] = pys.submit(SCRIPT.format(body="sleep 5"), ["--gres=gpu:h100:3", "-J", "bk-three"],
                               cwd=str(lab.jobs_dir))
    jobs["held"] = pys.submit(SCRIPT.format(body="sleep 1"), ["-H", "--gres=gpu:h100:1", "-J", "bk-held"],
                              cwd=str(lab.jobs_dir))
    jobs["long"] = pys.submit(SCRIPT.format(body="sleep 300"), ["--gres=gpu:h100:1", "-J", "bk-long", "--requeue"],
                              cwd=str(lab.jobs_dir))
    try:
        held = _wait(lambda: [j for j in cmd.jobs([jobs["held"]]) if j.state == "PENDING"], "held job")[0]
        assert held.reason in ("JobHeldUser", "JobHeldAdmin"), held
        assert held.name == "bk-held"
        _wait(lambda: [j for j in cmd.jobs([jobs["long"]]) if j.state == "RUNNING"], "long job to run")
        # acting through pyslurm, checked through the commands
        pys.release(jobs["held"])
        _wait(lambda: [j for j in cmd.jobs([jobs["held"]]) if j.reason not in ("JobHeldUser", "JobHeldAdmin")],
              "release")
        pys.requeue(jobs["long"])
        _wait(lambda: [j for j in cmd.jobs([jobs["long"]]) if j.restarts == 1], "requeue")
        pys.hold(jobs["long"])
        _wait(lambda: [j for j in cmd.jobs([jobs["long"]]) if j.state == "PENDING" and "Held" in j.reason], "hold")
        pys.cancel(jobs["long"])
        _wait(lambda: [j for j in cmd.jobs([jobs["long"]]) if j.state == "CANCELLED"], "cancel")
        for k in ("two", "three", "held"):
            lab.wait_state(jobs[k], "COMPLETED", 120)

        # reading: the same jobs, states, GPU counts and nodes
        ids = list(jobs.values())
        a = {j.job_id: j for j in cmd.jobs(ids)}
        b = {j.job_id: j for j in pys.jobs(ids)}
        assert set(a) == set(b) == set(ids)
        for jid in ids:
            x, y = a[jid], b[jid]
            assert (x.name, x.user, x.account, x.qos, x.partition, x.state, x.nodes, x.num_nodes, x.gpus,
                    x.gpus_by_type, x.time_limit_s, x.restarts, x.submit_time, x.start_time) == \
                   (y.name, y.user, y.account, y.qos, y.partition, y.state, y.nodes, y.num_nodes, y.gpus,
                    y.gpus_by_type, y.time_limit_s, y.restarts, y.submit_time, y.start_time), jid
        assert a[jobs["two"]].gpus == 16 and a[jobs["three"]].gpus == 3

        na = {n.name: n for n in cmd.nodes()}
        nb = {n.name: n for n in pys.nodes()}
        assert set(na) == set(nb) and len(na) == 16
        for name in na:
            x, y = na[name], nb[name]
            assert (x.state, x.cpus, x.memory_mb, x.gpus_by_type, x.gpus_used, x.features, x.partitions) == \
                   (y.state, y.cpus, y.memory_mb, y.gpus_by_type, y.gpus_used, y.features, y.partitions), name
        pa = {p.name: p for p in cmd.partitions()}
        pb = {p.name: p for p in pys.partitions()}
        assert {k: (v.nodes, v.default, v.max_time_s) for k, v in pa.items()} == \
               {k: (v.nodes, v.default, v.max_time_s) for k, v in pb.items()}

        # accounting: the same allocation rows once slurmdbd has them
        for jid in ids:
            lab.wait_accounting(jid)
        now = datetime.now(timezone.utc)
        ra = {r.job_id_raw: r for r in cmd.accounting(now - timedelta(hours=2), now + timedelta(minutes=5),
                                                          job_ids=ids, steps=False)}
        rb = {r.job_id_raw: r for r in pys.accounting(now - timedelta(hours=2), now + timedelta(minutes=5),
                                                          job_ids=ids, steps=False)}
        assert set(ra) == set(rb) == set(ids)
        for jid in ids:
            x, y = ra[jid], rb[jid]
            assert (x.name, x.user, x.account, x.qos, x.state, x.alloc_gpus, x.alloc_gpus_by_type, x.nodelist,
                    x.elapsed_s, x.start, x.end) == \
                   (y.name, y.user, y.account, y.qos, y.state, y.alloc_gpus, y.alloc_gpus_by_type, y.nodelist,
                    y.elapsed_s, y.start, y.end), jid
        # the long job was requeued, held and cancelled while pending: 25.11.7's accounting shows that as
        # CANCELLED, or keeps REQUEUED (its last run) when the cancel came before the pending job was stored again
        # (measured both ways); whichever it is, both backends read the same
        assert ra[jobs["two"]].alloc_gpus == 16 and ra[jobs["long"]].state in ("CANCELLED", "REQUEUED")
    finally:
        for jid in jobs.values():
            lab.sh(f"scancel {jid}", check=False)


@pytest.mark.slurm_release("25.11")
def test_pyslurm_submission_errors_carry_slurms_words(lab):
    _, pys = _both(lab)
    from slurmtools.errors import SlurmError

    with pytest.raises(SlurmError) as e:
        pys.submit(SCRIPT.format(body="true"), ["-p", "nosuchpart"], cwd=str(lab.jobs_dir))
    assert "partition" in str(e.value).lower() and "\n" not in str(e.value)


#: sbatch options the pyslurm backend carries itself (slurmtools/slurm/pyslurm_submit.py), in combinations
CARRIED_CASES = [
    ["-N2", "--gpus-per-node=h100:4", "--cpus-per-gpu=4", "-J", "c-one", "--signal=B:USR1@120", "--requeue",
     "--exclusive", "--mem=4G", "--comment=two#words"],
    ["-n", "3", "-N", "1", "--gres=gpu:h100:3", "--mem-per-cpu=1000", "-p", "gpu", "-w", "gpu03", "--no-requeue",
     "--gres-flags=enforce-binding"],
    ["--gpus=h100:2", "-x", "gpu01", "--open-mode=append", "-D", "/tmp", "-C", "leaf2", "-e", "/tmp/same-err.txt"],
    ["-N1-2", "--array=0-3%2", "-t", "1:00:00", "--dependency=singleton"],
    ["--segment=2", "-N4", "-p", "gpu", "-q", "production", "--signal=USR1@300"],
]
#: fields that differ by nature (ids, times, the submit line), and one pyslurm 25.11.2 difference: it leaves
#: job_desc.oom_kill_step at 0 where sbatch sends "not set" (docs/architecture.md, backends)
VOLATILE = {"JobId", "ArrayJobId", "SubmitTime", "EligibleTime", "AccrueTime", "LastSchedEval", "SubmitLine",
            "StartTime", "EndTime", "Priority", "Reason"}
KNOWN_PYSLURM_DIFFERENCES = {"OOMKillStep"}


def _job_fields(lab, job: int) -> dict[str, str]:
    """`scontrol show job` of a job, without the fields that differ by nature; output paths with the job's own id
    put back to `%j` (only there: a job id can also appear inside a folder name)."""
    out = lab.sh(f"scontrol show job -o {job}").stdout
    rec = dict(tok.split("=", 1) for tok in out.split() if "=" in tok and not tok.startswith("-"))
    for k in ("StdOut", "StdErr"):
        if k in rec and rec[k].endswith(f"-{job}.out"):
            rec[k] = rec[k][: -len(f"-{job}.out")] + "-%j.out"
    return {k: v for k, v in rec.items() if k not in VOLATILE}


@pytest.mark.slurm_release("25.11")
def test_pyslurm_submits_the_same_job_as_sbatch(lab):
    """Each option set through sbatch and through pyslurm, held: the controller must hold the same job."""
    cmd, pys = _both(lab)
    script = "#!/bin/bash\n#SBATCH -A vision\n#SBATCH --qos=production\n#SBATCH -t 10\nsleep 30\n"
    for opts in CARRIED_CASES:
        opts = ["-H", "-o", f"{lab.jobs_dir}/same-%j.out"] + opts
        a = cmd.submit(script, opts, cwd=str(lab.jobs_dir))
        b = pys.submit(script, opts, cwd=str(lab.jobs_dir))
        try:
            assert pys.last_submit == "pyslurm", (opts, pys.last_submit)
            x, y = _job_fields(lab, a), _job_fields(lab, b)
            diff = {k: (x.get(k), y.get(k)) for k in set(x) | set(y) if x.get(k) != y.get(k)}
            assert set(diff) <= KNOWN_PYSLURM_DIFFERENCES, (opts, diff)
        finally:
            lab.sh(f"scancel {a} {b}", check=False)


@pytest.mark.slurm_release("25.11")
def test_pyslurm_hands_what_it_cannot_carry_to_sbatch(lab):
    """--switches breaks pyslurm 25.11.2 (NameError) and --hint it drops: such a job goes to sbatch whole."""
    _, pys = _both(lab)
    script = "#!/bin/bash\n#SBATCH -A vision\n#SBATCH --qos=production\n#SBATCH --hint=nomultithread\nsleep 30\n"
    j = pys.submit(script, ["-H", "-N2", "--switches=1@1:00", "-t", "5"], cwd=str(lab.jobs_dir))
    try:
        assert pys.last_submit.startswith("sbatch (pyslurm does not carry --hint"), pys.last_submit
        rec = lab.sh(f"scontrol show job -o {j}").stdout
        assert "Switches=1@00:01:00" in rec and "NumNodes=2" in rec, rec
    finally:
        lab.sh(f"scancel {j}", check=False)


#: what a user's shell may export that changes what Slurm's commands print (each command's ENVIRONMENT VARIABLES)
USER_OUTPUT_ENV = {"SLURM_TIME_FORMAT": "relative", "SQUEUE_FORMAT": "%i", "SQUEUE_SORT": "-i",
                   "SQUEUE_PARTITION": "nonexistent", "SQUEUE_STATES": "PENDING", "SINFO_PARTITION": "nonexistent",
                   "SINFO_FORMAT": "%P", "SACCT_FEDERATION": "1", "SLURM_BITSTR_LEN": "3"}


def test_a_users_slurm_output_variables_do_not_change_what_is_read(lab):
    """`SLURM_TIME_FORMAT=relative` in a user's shell made sacct print `03:17:17` for today's times and every row of
    `slurmtools report` bad; SQUEUE_/SINFO_ variables filter and reformat what squeue and sinfo print. The command
    backend runs Slurm's commands with its own output settings: what it reads equals what a clean shell reads."""
    clean = get_backend("commands", env=lab.env)
    dirty = get_backend("commands", env={**lab.env, **USER_OUTPUT_ENV})
    held = clean.submit(SCRIPT.format(body="sleep 1"), ["-H", "--array=0-9", "--gres=gpu:h100:1", "-J", "env-held"],
                        cwd=str(lab.jobs_dir))
    done = clean.submit(SCRIPT.format(body="true"), ["--gres=gpu:h100:1", "-J", "env-done"], cwd=str(lab.jobs_dir))
    try:
        # the whole record: 22.05's slurmdbd was seen holding a completed job's row without its partition and QoS
        # (sacct: empty, "Unknown") for a moment after its end, so two reads then differed by Slurm's own write
        _wait(lambda: any(j.job_id_raw == done for j in clean.accounting(datetime.now() - timedelta(hours=1),
                                                                   datetime.now() + timedelta(hours=1), [done])
                          if j.state == "COMPLETED" and j.partition and j.qos not in ("", "Unknown")),
              f"job {done} to complete")
        since, until = datetime.now() - timedelta(hours=1), datetime.now() + timedelta(hours=1)
        assert dirty.accounting(since, until, [held, done]) == clean.accounting(since, until, [held, done])
        text = dirty.accounting_dump(since, until, job_ids=[done])
        assert text == clean.accounting_dump(since, until, job_ids=[done]) and "T" in text.splitlines()[1], text
        assert sorted(j.job_id for j in dirty.jobs()) == sorted(j.job_id for j in clean.jobs())
        assert [(n.name, n.state) for n in dirty.nodes()] == [(n.name, n.state) for n in clean.nodes()]
        assert dirty.partitions() == clean.partitions()
    finally:
        clean.cancel(held)
