"""The planner's on-disk answers for the nearest HCAs of each GPU (`planner/nearest_cache.py`): the same answer as
the node type's host graph, read back without building it, computed again when the node type or the code changes,
and never trusted beyond that: a tampered or broken table, an unwritable folder or the opt-out only cost the
computation."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from slurmtools.cache_dir import user_cache_dir
from slurmtools.planner import nearest_cache
from slurmtools.planner.view import from_declared, nearest_of_type
from slurmtools.resources import example_site
from slurmtools.site import load_site
from slurmtools.topology.sitefile import load_fabric

from test_declared_view import CPU, DGX, PCIE


@pytest.fixture
def env(tmp_path):
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}


def _table(env) -> dict:
    return json.loads((user_cache_dir(env) / nearest_cache.FILE).read_text())


def _computed(monkeypatch) -> list:
    calls = []
    real = nearest_cache._compute
    monkeypatch.setattr(nearest_cache, "_compute", lambda nt: calls.append(nt.name) or real(nt))
    return calls


@pytest.mark.parametrize("nt", [DGX, PCIE, CPU], ids=lambda nt: nt.name)
def test_same_answer_as_the_graph_then_read_back_without_it(nt, env, monkeypatch):
    calls = _computed(monkeypatch)
    first = nearest_cache.nearest_of(nt, env)
    assert first == nearest_of_type(nt) and calls == [nt.name]
    assert nearest_cache.nearest_of(nt, env) == first and calls == [nt.name]      # the second time from the file
    assert repr(nt) in _table(env)["types"]


def test_another_node_type_or_other_code_is_computed_again(env, monkeypatch):
    calls = _computed(monkeypatch)
    nearest_cache.nearest_of(DGX, env)
    other = replace(DGX, pcie_switches=2)
    assert nearest_cache.nearest_of(other, env) == nearest_of_type(other) != nearest_of_type(DGX)
    assert calls == ["dgx", "dgx"] and len(_table(env)["types"]) == 2
    monkeypatch.setattr(nearest_cache, "code_key", lambda: "0badc0de")
    nearest_cache.nearest_of(DGX, env)
    assert calls == ["dgx", "dgx", "dgx"]
    assert _table(env) == {"code": "0badc0de", "types": {repr(DGX): _table(env)["types"][repr(DGX)]}}


def test_code_key_follows_the_sources(monkeypatch, tmp_path):
    key = nearest_cache.code_key()
    assert key and key == nearest_cache.code_key()
    pkg = tmp_path / "slurmtools"
    (pkg / "topology").mkdir(parents=True)
    (pkg / "planner").mkdir()
    for rel in ("topology/graph.py", "planner/view.py"):
        (pkg / rel).write_text("x = 1\n")
    monkeypatch.setattr(nearest_cache, "_PACKAGE", pkg)
    copy = nearest_cache.code_key()
    (pkg / "topology" / "graph.py").write_text("x = 2\n")
    assert copy != nearest_cache.code_key() and key != copy


@pytest.mark.parametrize("tamper", [
    lambda e: {**e, "0": ["mlx5_99"]},         # an HCA the node type does not have
    lambda e: {**e, "8": ["mlx5_0"]},          # a GPU it does not have
    lambda e: {k: v for k, v in e.items() if k != "3"},
    lambda e: "garbage",
])
def test_a_tampered_entry_is_not_trusted(tamper, env, monkeypatch):
    want = nearest_cache.nearest_of(DGX, env)
    path = user_cache_dir(env) / nearest_cache.FILE
    table = _table(env)
    table["types"][repr(DGX)] = tamper(table["types"][repr(DGX)])
    path.write_text(json.dumps(table))
    calls = _computed(monkeypatch)
    assert nearest_cache.nearest_of(DGX, env) == want and calls == ["dgx"]


def test_broken_table_unwritable_folder_and_opt_out_cost_only_the_computation(env, monkeypatch, tmp_path):
    calls = _computed(monkeypatch)
    folder = user_cache_dir(env)
    folder.mkdir(parents=True)
    (folder / nearest_cache.FILE).write_text("{not json")
    assert nearest_cache.nearest_of(DGX, env) == nearest_of_type(DGX) and len(calls) == 1
    assert repr(DGX) in _table(env)["types"]                     # rewritten whole
    blocked = {"XDG_CACHE_HOME": str(tmp_path / "file"), "HOME": str(tmp_path)}
    (tmp_path / "file").write_text("a file where the folder would be")
    assert nearest_cache.nearest_of(DGX, blocked) == nearest_of_type(DGX) and len(calls) == 2
    off = {**env, "SLURMTOOLS_NO_CACHE": "1"}
    os.remove(folder / nearest_cache.FILE)
    assert nearest_cache.nearest_of(DGX, off) == nearest_of_type(DGX) and len(calls) == 3
    assert not (folder / nearest_cache.FILE).exists()


def test_view_with_the_cache_equals_the_view_without(env):
    fabric = load_fabric(load_site(example_site()).fabric_path)
    cached = from_declared(fabric, nearest_of=lambda nt: nearest_cache.nearest_of(nt, env))
    again = from_declared(load_fabric(load_site(example_site()).fabric_path),
                          nearest_of=lambda nt: nearest_cache.nearest_of(nt, env))
    assert cached == from_declared(fabric) == again and cached.nearest["dgx-h100"][0]
