import pytest

from slurmtools.policy.base import PolicyContext, load_policies
from slurmtools.policy.engine import load_fabric_for
from slurmtools.site import load_site


@pytest.fixture(scope="session")
def site():
    return load_site(None)  # the bundled example site (the lab is built from it)


@pytest.fixture(scope="session")
def fabric(site):
    return load_fabric_for(site)


@pytest.fixture(scope="session")
def policies(site, fabric):
    return load_policies(site, fabric)


@pytest.fixture
def ctx(site, fabric):
    return PolicyContext(site=site, fabric=fabric, usage={"vision": 100.0, "nlp": 100.0}, month="2026-11")


@pytest.fixture(scope="session")
def cpu_site():
    """(site, fabric, policies) of tests/data/sites/cpu: a GPU partition, a CPU partition and a CPU overlay of the
    GPU hosts, with GPUs required on the GPU partition."""
    from pathlib import Path

    s = load_site(Path(__file__).resolve().parents[2] / "data" / "sites" / "cpu" / "site.toml")
    f = load_fabric_for(s)
    return s, f, load_policies(s, f)
