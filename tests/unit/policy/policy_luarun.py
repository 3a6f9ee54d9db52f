"""Run the generated job_submit.lua under a real Lua 5.1 interpreter with a tiny fake `slurm` table.

This tests OUR Lua (syntax, NO_VAL handling, that it mirrors the Python evaluator), not Slurm: the lab's
differential test does that against slurmctld.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from slurmtools.policy.request import JobRequest
from slurmtools.render.job_submit import lua_literal

LUA = shutil.which("lua5.1")
#: every Lua job_submit/lua may link against: 5.1 (Debian's 22.05), 5.3 (25.11 built from source here) and 5.4
#: (Slurm's configure takes the newest it finds: a site's own build on a current distribution)
LUAS = [x for x in (shutil.which("lua5.1"), shutil.which("lua5.3"), shutil.which("lua5.4")) if x]

# job_desc fields as 22.05 exposes them: unset numbers are NO_VAL sentinels
_SENTINEL = {"min_nodes": 4294967294, "max_nodes": 4294967294, "num_tasks": 4294967294,
             "time_limit": 4294967294,
             "ntasks_per_node": 65534, "cpus_per_task": 65534, "sockets_per_node": 65534, "shared": 65534,
             "min_mem_per_node": 18446744073709551614, "min_mem_per_cpu": 18446744073709551614}

DRIVER = r"""
local calls = {}
slurm = { SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294, NO_VAL16 = 65534,
  log_user = function(f, ...) calls.user = string.format(f, ...) end,
  log_info = function(f, ...) end,
  log_error = function(f, ...) calls.error = string.format(f, ...) end }
local script_path, cases_path = arg[1], arg[2]
assert(loadfile(script_path))()
local cases = assert(loadfile(cases_path))()
local function esc(s) return (string.gsub(s or "", '[%c"\\]', function(c) return string.format("\\u%04x", string.byte(c)) end)) end
for i = 1, #cases do
  calls = {}
  local jd = cases[i]
  local rc
  if jd.explode then
    rc = slurm_job_submit(setmetatable({}, { __index = function() error("boom") end }), {}, 1000)
  elseif jd.modify then
    rc = slurm_job_modify(jd.desc, jd.rec, {}, 1000)
    jd = jd.desc
  else
    rc = slurm_job_submit(jd, {}, 1000)
  end
  io.write('{"rc": ', tostring(rc), ', "user": "', esc(calls.user), '", "error": "', esc(calls.error),
           '", "partition": "', esc(jd.partition), '", "qos": "', esc(jd.qos), '"}\n')
end
"""


def job_desc(req: JobRequest, raw: dict | None = None) -> dict:
    """What job_submit.lua would see for `req`: sentinels for unset numbers, nil for unset strings."""
    d = {}
    for k in ("user_name", "account", "default_account", "qos", "partition", "tres_per_job", "tres_per_node",
              "tres_per_task", "tres_per_socket", "cpus_per_tres", "mem_per_tres", "script", "comment", "name"):
        v = getattr(req, k)
        if v is not None:
            d[k] = v
    for k, sentinel in _SENTINEL.items():
        v = getattr(req, k)
        d[k] = sentinel if v is None else v
    d.update(raw or {})
    return d


def run_lua(script_text: str, descs: list[dict], tmp: Path, lua: str | None = None) -> list[dict]:
    (tmp / "job_submit.lua").write_text(script_text)
    (tmp / "driver.lua").write_text(DRIVER)
    (tmp / "cases.lua").write_text("return " + lua_literal(descs) + "\n")
    p = subprocess.run([lua or LUA, str(tmp / "driver.lua"), str(tmp / "job_submit.lua"), str(tmp / "cases.lua")],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError(f"lua failed: {p.stderr}")
    return [json.loads(line) for line in p.stdout.split("\n") if line]  # not splitlines: U+2028 is data here
