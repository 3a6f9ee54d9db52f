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
