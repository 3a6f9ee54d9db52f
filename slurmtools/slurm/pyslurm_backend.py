"""Optional backend over pyslurm, used only when pyslurm imports AND was built for the running Slurm.

PyPI's pyslurm 25.11 builds only against Slurm 25.11, so on Debian 12 (Slurm 22.05) this is never chosen; its
absence never breaks anything. Everything not offered natively here falls back to the command backend.
"""

from __future__ import annotations

from slurmtools.slurm.commands import CommandBackend


def pyslurm_usable() -> tuple[bool, str]:
    try:
        import pyslurm  # noqa: F401
    except Exception as exc:  # ImportError, or a broken build (undefined symbols)
        return False, f"pyslurm is not importable ({exc.__class__.__name__}: {exc})"
    want = getattr(pyslurm, "__version__", "")
    try:
        have = ".".join(str(x) for x in CommandBackend().version()[:2])
    except Exception as exc:
        return False, f"cannot read the running Slurm's version ({exc})"
    if not str(want).startswith(have):
        return False, f"pyslurm {want} does not match the running Slurm {have}"
    return True, ""


class PyslurmBackend(CommandBackend):
    """Reads jobs and nodes through pyslurm's API; every other operation is the command backend's."""

    name = "pyslurm"

    def jobs(self, job_ids=None, user=None, states=None):  # pragma: no cover - needs a matching pyslurm build
        import pyslurm

        from slurmtools.slurm.commands import job_from_json

        out = []
        for jid, job in pyslurm.Jobs.load().items():
            d = job.to_dict()
            info = job_from_json({"job_id": jid, "name": d.get("name", ""), "user_name": d.get("user_name", ""),
                                  "account": d.get("account", ""), "partition": d.get("partition", ""),
                                  "qos": d.get("qos", ""), "job_state": d.get("state", ""),
                                  "state_reason": d.get("state_reason", ""), "nodes": d.get("allocated_nodes", ""),
                                  "tres_alloc_str": d.get("tres_alloc_str", "")})
            if job_ids and info.job_id not in job_ids:
                continue
            if states and info.state not in states:
                continue
            out.append(info)
        return out
