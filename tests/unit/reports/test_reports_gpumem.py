"""Slurm's gres/gpumem from the steps' TRESUsageInAve, shown per job in the waste table (hand-computed)."""

from __future__ import annotations

from datetime import date, datetime

import numpy as np
import pytest

import reports_handmade as hm
from slurmtools.reports import metrics, outputs
from slurmtools.reports.cache import DayCache
from slurmtools.reports.sacct import read_sacct
from slurmtools.site import load_site

SINCE, UNTIL = datetime.fromisoformat(hm.SINCE), datetime.fromisoformat(hm.UNTIL)


def _step(raw, usage, start="14:00:00", end="16:00:00"):
    return hm._row("COMPLETED", "step", raw, raw, "", "vision", "", hm.D + start, hm.D + start, hm.D + start,
                   hm.D + end, 2, 1, "gpu11", usage=usage)


def _with_ntasks(text: str, tasks: dict[str, str]) -> str:
    """The dump with an NTasks field, filled for the steps named in `tasks` (step id -> count)."""
    lines = text.rstrip("\n").split("\n")
    out = [lines[0] + "|NTasks"] + [ln + "|" + tasks.get(ln.split("|")[2], "") for ln in lines[1:]]
    return "\n".join(out) + "\n"


# job 121: 2 GPUs 14:00-16:00 on gpu11 = 4 GPU-h; two steps of one task, gpuutil 40 and 20 (SM use summed over the
# task's 2 GPUs: 20 % and 10 % each; the larger counts), gpumem 2.5 GiB and 1024 MiB: peak 2560 MB; idle
# 4 x (1 - 0.20) = 3.2 GPU-h, the biggest waster ahead of 110 (1 x 0.95)
JOB121 = [hm._row("COMPLETED", "lowmem", "121", "121", "dave", "vision", "standard", hm.D + "14:00:00",
                  hm.D + "14:00:00", hm.D + "14:00:00", hm.D + "16:00:00", 2, 1, "gpu11"),
          _step("121.0", "cpu=00:10:00,gres/gpumem=2.5G,gres/gpuutil=40"),
          _step("121.1", "cpu=00:10:00,gres/gpumem=1024M,gres/gpuutil=20")]
TEXT = _with_ntasks(hm.TEXT + "\n".join(JOB121) + "\n", {"121.0": "1", "121.1": "1"})


def _jobs(text):
    return read_sacct(text, text=True).jobs.set_index("job_id")


def test_gpumem_parsed_with_its_unit_and_peak_over_steps():
    j = _jobs(TEXT)
    assert j.loc["121", "gpu_mem_slurm_mb"] == pytest.approx(2560)
    assert j.loc["121", "gpu_util_slurm"] == pytest.approx(20)
    assert j.loc["101", "gpu_mem_slurm_mb"] == pytest.approx(70000)  # 101.batch: gres/gpumem=70000M
    assert j["gpu_mem_slurm_mb"].isna()["110"]  # 110's step has gpuutil only


@pytest.mark.parametrize("value, mb", [("1073741824", 1024), ("2097152K", 2048), ("1.5T", 1.5 * 1024 * 1024),
                                       ("0", 0)])
def test_gpumem_units(value, mb):
    text = _with_ntasks(hm.TEXT + "\n".join([JOB121[0], _step("121.0", f"gres/gpumem={value}")]) + "\n",
                        {"121.0": "1"})
    j = _jobs(text)
    assert j.loc["121", "gpu_mem_slurm_mb"] == pytest.approx(mb)
    assert j["gpu_util_slurm"].isna()["121"]  # a step with gpumem but no gpuutil: utilisation stays unknown


def test_waste_table_shows_gpu_memory_per_job():
    r = metrics.compute(_jobs(TEXT).reset_index(), load_site(None), SINCE, UNTIL)
    w = r.tables["top_waste_jobs"].set_index("job_id")
    assert list(w.index) == ["121", "110"]
    assert w.loc["121", "idle_gpu_hours"] == pytest.approx(3.2)
    assert w.loc["121", "gpu_mem_used_mb"] == pytest.approx(2560)
    assert w["gpu_mem_used_mb"].isna()["110"]
    html = outputs.render_html(r)
    assert "<th>GPU memory used (MB)</th>" in html and "<td>2,560.0</td>" in html


def test_no_gpumem_in_the_window_no_column():
    text = "\n".join(line for line in hm.TEXT.splitlines() if "gpumem" not in line) + "\n"
    r = metrics.compute(_jobs(text).reset_index(), load_site(None), SINCE, UNTIL)
    assert "gpu_mem_used_mb" not in r.tables["top_waste_jobs"].columns


def test_day_cache_keeps_gpumem(tmp_path):
    c = DayCache(tmp_path)
    c.store(read_sacct(TEXT, text=True).jobs, date(2026, 11, 2), date(2026, 11, 2))
    back = c.load(date(2026, 11, 2), date(2026, 11, 2)).set_index("job_id")
    assert back.loc["121", "gpu_mem_slurm_mb"] == pytest.approx(2560)


@pytest.mark.parametrize("step, tasks, gpus, util, mean", [
    ("121.batch", "", 8, "400", 50.0),   # the batch step is one task: its 8 GPUs' summed use / 8
    ("121.0", "8", 8, "50", 50.0),       # 8 tasks of a GPU each at 50 %: the average over tasks is 50
    ("121.0", "2", 8, "200", 50.0),      # 2 tasks of 4 GPUs each, 200 per task
    ("121.0", "4", 1, "25", 100.0),      # 4 tasks on one GPU, 25 % each: the GPU is fully busy
    ("121.0", "1", 2, "0", 0.0),
])
def test_gpuutil_is_read_as_the_mean_of_the_steps_gpus(step, tasks, gpus, util, mean):
    """Slurm's gres/gpuutil is each task's SM use summed over the GPUs it sees, averaged over the step's tasks
    (gpu_nvml.c, _average_tres_usage): the step's GPUs' mean is the figure x NTasks / its GPUs."""
    row = hm._row("COMPLETED", "step", step, step, "", "vision", "", hm.D + "14:00:00", hm.D + "14:00:00",
                  hm.D + "14:00:00", hm.D + "16:00:00", gpus, 1, "gpu11", usage=f"gres/gpuutil={util}")
    acc = read_sacct(_with_ntasks(hm.TEXT + JOB121[0] + "\n" + row + "\n", {step: tasks}), text=True)
    assert acc.jobs.set_index("job_id").loc["121", "gpu_util_slurm"] == pytest.approx(mean)
    assert not any("gres/gpuutil of" in n for n in acc.notes)


def test_gpuutil_of_a_step_whose_tasks_are_not_known_is_not_read():
    """A dump without NTasks: a batch step is one task, any other step's figure cannot be divided among its GPUs
    (8 tasks at 50 % and one task at 6.25 % on each of 8 GPUs both print 50): not read, and the notes say so."""
    text = hm.TEXT + "\n".join([JOB121[0], _step("121.0", "gres/gpuutil=50")]) + "\n"
    for acc in (read_sacct(text, text=True), read_sacct(_with_ntasks(text, {}), text=True)):
        assert np.isnan(acc.jobs.set_index("job_id").loc["121", "gpu_util_slurm"])
        assert acc.jobs.set_index("job_id").loc["101", "gpu_util_slurm"] == pytest.approx(90)  # 101.batch: 720 / 8
        line = next(n for n in acc.notes if "gres/gpuutil of" in n)
        assert line.startswith("Slurm's gres/gpuutil of 1 step(s) not read")
