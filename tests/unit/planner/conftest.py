from __future__ import annotations

import pytest

from slurmtools.resources import example_site
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric


@pytest.fixture(scope="session")
def site():
    return load_site(example_site())


@pytest.fixture(scope="session")
def fabric(site):
    return load_fabric(site.fabric_path)
