"""Seeded mutations of every real input of every `topo import` provider (cut short, lines lost, doubled or
swapped, a token replaced by garbage such as an empty value, 99999999999999999999, NaN, `٣`, a NUL or a tab,
invalid UTF-8, CRLF ends, a BOM, doubled blanks, very long lines, a capture's JSON values of another type):
`build(kind, path)` reads the mutated file into a Topology or refuses it with slurmtools' own ParseError or
ConfigError in one line that starts with the file's path; never another exception, a message over several lines,
or a hang. A few of the same mutations go through the real CLI in a subprocess: exit 0, or exit 2 with one line
on stderr, and never a traceback.

Each case is (sample, mutation number); the mutation is drawn from a generator seeded with both, so a failure
reproduces from its id alone, and the assertion message names the edits."""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from slurmtools.cli.topo_providers import _summary, build, detect_kind
from slurmtools.errors import ConfigError, ParseError
from slurmtools.topology.describe import describe_host
from slurmtools.topology.graph import Topology
from tests.hostile.mutations import BAD_UTF8, GARBAGE, bounded, line_edit
from tests.unit.topology._data import TEST_DATA, shared_files

REPO = Path(__file__).resolve().parents[2]
MUTATIONS = 250         # per sample; about 50 samples
SECONDS_PER_READ = 10   # a read that takes longer is a hang
MEMORY_PER_READ = 2 << 30   # bytes of address space a read may add (more is a runaway, as `0-99999999999` was)
#: the `topo -m` capture read beside every mutated `nvlink -s` file (a clean one, eight GPUs)
NVLINK_PARTNER = TEST_DATA / "stas00-mlengineering_h100x8-NV18-HT.txt"


@dataclass(frozen=True)
class Sample:
    kind: str          # a provider of `topo import --from`
    name: str          # the file's name, the case's id
    text: bytes        # its bytes, decompressed
    role: str = "main"  # "nvlink": the file given with --nvlink, beside NVLINK_PARTNER


def _kind(path: Path, text: str) -> tuple[str, str] | None:
    """(provider, role) of a real file, or None for files no provider reads (gres.conf, slurm.conf)."""
    kind = detect_kind(text)
    if kind:
        return kind, "main"
    if re.search(r"^\s*GPU \d+: .*\(UUID", text, re.M):
        return "nvidia-smi", "nvlink"
    if path.suffix == ".xml":
        return "nccl-xml", "main"   # an NCCL graph file: refused, and so are its mutations
    return None


def _topology_yaml_samples() -> list[Sample]:
    """No third-party topology.yaml is in the test data: Slurm's documented form, and what slurmtools renders
    for the bundled example fabric (the file Slurm 25.11 reads in the lab)."""
    from slurmtools.render.topology import render_topology_yaml
    from slurmtools.resources import bundled
    from slurmtools.slurm.releases import release_for
    from slurmtools.topology.build_site import build_site
    from slurmtools.topology.sitefile import load_fabric
    from tests.unit.topology.test_parse_topology_yaml import DOCUMENTED

    fabric = build_site(load_fabric(bundled("topology") / "example" / "fabric.toml"))
    rendered = render_topology_yaml(fabric, release_for("25.11"), {"p": "tree"}, "tree")
    return [Sample("topology.yaml", "documented.yaml", DOCUMENTED.encode()),
            Sample("topology.yaml", "example-rendered.yaml", rendered.encode())]


def samples() -> list[Sample]:
    """Every provider input in tests/data/topology, the shared captures that have no copy there (when the shared
    data is beside the checkout), and the topology.yaml samples."""
    here = sorted(p for p in TEST_DATA.iterdir() if p.is_file())
    have = {p.name.removesuffix(".gz") for p in here}
    extra = [p for sub in ("topo_matrix", "ibnet", "nccl_xml", "slurm_conf") for p in shared_files(sub)
             if p.name.removesuffix(".gz") not in have]
    out = []
    for p in here + extra:
        data = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        found = _kind(p, data.decode())
        if found:
            out.append(Sample(found[0], p.name.removesuffix(".gz"), data, found[1]))
    return out + _topology_yaml_samples()


SAMPLES = samples()

# ------------------------------------------------------------------------------------------------- mutations

TOKEN = (rb"\S+", rb"[0-9]+", rb"[A-Za-z0-9_]+")
JSON_VALUES = (None, "", -1, 0, 99999999999999999999, 1e308, float("nan"), True, [], {}, "٣", "x" * 300, [1, "a"],
               {"a": 1}, "NV18", "PIX", "0000:00:00.0")


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _mutate_json(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A value of the capture replaced by one of another type or range, a key dropped, or a list item doubled."""
    try:
        doc = json.loads(data)
    except ValueError:
        return data, "json: not JSON any more, unchanged"
    spots = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                spots.append((node, k, path + [k]))
                walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                spots.append((node, i, path + [i]))
                walk(v, path + [i])

    walk(doc, [])
    if not spots:
        return data, "json: no values, unchanged"
    parent, key, path = rng.choice(spots)
    how = rng.choice(("value", "value", "value", "drop", "double"))
    if how == "value":
        parent[key] = rng.choice(JSON_VALUES)
        what = f"{path} = {parent[key]!r:.40}"
    elif how == "drop":
        del parent[key]
        what = f"{path} dropped"
    elif isinstance(parent, list):
        parent.insert(key, parent[key])
        what = f"{path} doubled"
    else:
        parent[key] = [parent[key], parent[key]]
        what = f"{path} as a list of two"
    return json.dumps(doc, indent=1).encode(), f"json {what}"


def _mutate(data: bytes, rng: random.Random, kind: str) -> tuple[bytes, str]:
    """One edit of `data` and its description."""
    lines = _lines(data)
    ops = ["cut-bytes", "cut-lines", "drop-line", "double-line", "swap-lines", "token", "token", "token", "token",
           "insert", "crlf", "bom", "blanks", "long-line", "blank-line", "indent"]
    if kind == "capture":
        ops += ["json"] * 6
    op = rng.choice(ops)
    if op == "json":
        return _mutate_json(data, rng)
    edited = line_edit(op, data, lines, rng)
    if edited is not None:
        return edited
    if op == "token":
        pattern = rng.choice(TOKEN)
        spans = [m.span() for m in re.finditer(pattern, data)]
        if spans:
            s, e = rng.choice(spans)
            new = rng.choice(GARBAGE).encode()
            return data[:s] + new + data[e:], f"token {data[s:e][:40]!r} at byte {s} -> {new[:40]!r}"
    if op == "insert":
        at = rng.randrange(len(data) + 1)
        new = rng.choice(BAD_UTF8 + (b"\x00", b"\t", b"\r", b"\xef\xbb\xbf"))
        return data[:at] + new + data[at:], f"insert {new!r} at byte {at}"
    if op == "crlf":
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"), "CRLF line ends"
    if op == "bom":
        return b"\xef\xbb\xbf" + data, "UTF-8 BOM"
    if op == "blanks":
        return re.sub(rb"[ \t]+", lambda m: m.group() * 2, data), "every run of blanks doubled"
    if op == "long-line" and lines:
        k = rng.randrange(len(lines))
        filler = rng.choice((b" ", b"0", b"x", b"NV1 ", b"NV1", b"PIX", b"\t"))
        body = lines[k].rstrip(b"\r\n")
        return (b"".join(lines[:k]) + body + filler * (200_000 // len(filler)) + lines[k][len(body):]
                + b"".join(lines[k + 1:])), f"line {k + 1} lengthened with {filler!r} x 200000"
    if op == "blank-line" and lines:
        k = rng.randrange(len(lines) + 1)
        return b"".join(lines[:k] + [b"\n"] + lines[k:]), f"blank line before line {k + 1}"
    return data, f"{op}: nothing to do"


def mutation(sample: Sample, number: int) -> tuple[bytes, list[str]]:
    """The `number`th mutation of `sample`: one to three edits from a generator seeded with both."""
    rng = random.Random(f"{sample.name}/{number}")
    data, edits = sample.text, []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        data, what = _mutate(data, rng, sample.kind)
        edits.append(what)
    return data, edits


def write(tmp_path: Path, sample: Sample, data: bytes) -> tuple[str, str | None]:
    """The (input, --nvlink) paths of a mutated sample, written as bytes."""
    p = tmp_path / sample.name
    p.write_bytes(data)
    return (str(NVLINK_PARTNER), str(p)) if sample.role == "nvlink" else (str(p), None)


# ------------------------------------------------------------------------------------------------- checks



#: the longest refusal, past the file's name, that a reader may print
MESSAGE_CHARS = 600


def read_or_refuse(sample: Sample, path: str, nvlink: str | None, why: str) -> Topology | None:
    """The Topology `build` makes of the file, or None when it refuses it as the rule says; any other outcome
    fails with `why` (the sample, mutation number and edits)."""
    blamed = nvlink or path
    warnings: list[str] = []
    try:
        with bounded(SECONDS_PER_READ, MEMORY_PER_READ):
            t = build(sample.kind, path, nvlink=nvlink, warn=warnings.append)
            # what `topo import` does next with it
            _summary(t)
            for h in t.of_kind("host"):
                if h.unknown or any(n.startswith("gpu:") for n in t.g.adj[h.vid]):
                    describe_host(t, h.name)
            t.to_json()
    except (ParseError, ConfigError) as exc:
        msg = str(exc)
        assert len(msg.splitlines()) == 1, f"{why}: a message over several lines: {msg!r}"
        assert msg.startswith(f"{blamed}:"), f"{why}: the message does not start with the file's path: {msg!r}"
        # what it quotes of the input is cut short: a 200,000-character cell made a 200,000-character line
        assert len(msg) <= len(blamed) + MESSAGE_CHARS, f"{why}: a message of {len(msg)} characters: {msg[:300]!r}"
        return None
    except Exception as exc:  # noqa: BLE001 - the defect this test looks for
        raise AssertionError(f"{why}: {type(exc).__name__}: {exc}") from exc
    assert isinstance(t, Topology), why
    for w in warnings:
        assert len(w.splitlines()) == 1, f"{why}: a warning over several lines: {w!r}"
    return t


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: f"{s.kind}:{s.name}")
def test_mutated_inputs_are_read_or_refused_in_one_line(tmp_path, sample):
    outcomes = {"read": 0, "refused": 0}
    for number in range(MUTATIONS):
        data, edits = mutation(sample, number)
        path, nvlink = write(tmp_path, sample, data)
        why = f"{sample.kind} {sample.name} mutation {number} ({'; '.join(edits)})"
        outcomes["read" if read_or_refuse(sample, path, nvlink, why) is not None else "refused"] += 1
    assert outcomes["refused"], outcomes   # the mutations reach the parser's refusals


#: runs of one character class a long line may be made of: letters (a file name's, `[a-z_]+\.c`, searched from
#: each letter of a 200,000-letter line took the ibnetdiscover reader 45 s, found by mutation 928 beyond the range
#: above), digits, blanks, and the words of each format
LONG_FILLS = (b"x", b"0", b" ", b"PIX", b"NV1", b"NV1 ", b"mlx5_", b'"', b"0x", b"ab.c:1; ", b"<gpu ",
              b"NV1" + b"0" * 99_999)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: f"{s.kind}:{s.name}")
def test_a_long_line_of_one_kind_is_read_or_refused_without_a_hang(tmp_path, sample):
    lines = sample.text.split(b"\n")
    for fill in LONG_FILLS:
        run = fill * (200_000 // len(fill))
        for at in {0, len(lines) // 2}:
            line = lines[at]
            # after the line's third word: a cell of the matrix (`NV18` and 200,000 digits hung the fused-cell reader)
            ends = [m.end() for m in re.finditer(rb"\S+", line)]
            cut = ends[min(2, len(ends) - 1)] if ends else 0
            # a line of the run alone, a line lengthened by it, and a word inside the line lengthened by it
            for how, edited_line in (("=", run), ("+", line + run), ("inside", line[:cut] + run + line[cut:])):
                edited = list(lines)
                edited[at] = edited_line
                path, nvlink = write(tmp_path, sample, b"\n".join(edited))
                read_or_refuse(sample, path, nvlink, f"{sample.kind} {sample.name}: line {at + 1} "
                                                     f"{how} {fill[:20]!r} x {200_000 // len(fill)}")


def test_the_samples_cover_every_provider(tmp_path):
    """Every provider and the --nvlink input have real samples to mutate, and the samples as they are read, or are
    refused by the same rule (the captures that are cut short, p2p matrices, an NCCL graph file)."""
    from slurmtools.cli.topo_providers import KINDS

    assert {s.kind for s in SAMPLES} == set(KINDS) and any(s.role == "nvlink" for s in SAMPLES)
    assert len(SAMPLES) >= 45
    refused = []
    for sample in SAMPLES:
        path, nvlink = write(tmp_path, sample, sample.text)
        if read_or_refuse(sample, path, nvlink, f"{sample.kind} {sample.name} as it is") is None:
            refused.append(sample.name)
    assert all(re.search(r"TRUNCATED|p2p|graph|abbrev", name) for name in refused), refused


@pytest.mark.parametrize("number", range(20))
def test_damaged_gzip_is_read_or_refused_in_one_line(tmp_path, number):
    """The compressed dumps: bytes of the gzip stream flipped, cut or added (zlib's own errors included)."""
    rng = random.Random(f"gzip/{number}")
    packed = next(TEST_DATA.glob("*.gz")).read_bytes()
    at = rng.randrange(len(packed))
    how = rng.choice(("flip", "cut", "junk"))
    if how == "flip":
        damaged = packed[:at] + bytes(b ^ rng.randrange(1, 256) for b in packed[at:at + 8]) + packed[at + 8:]
    elif how == "cut":
        damaged = packed[:at]
    else:
        damaged = packed + bytes(rng.randrange(256) for _ in range(16))
    sample = next(s for s in SAMPLES if s.kind == "ibnetdiscover")
    p = tmp_path / f"{sample.name}.gz"
    p.write_bytes(damaged)
    read_or_refuse(sample, str(p), None, f"gzip {number}: {how} at byte {at}")


def test_a_gzip_that_unpacks_past_the_cap_is_refused_in_one_line(tmp_path):
    """A gzip bomb: 1 MiB of comment lines, packed once and repeated as members until it unpacks to one byte past
    the cap (about a megabyte on disk). Refused by name before the text is decoded; a small one is read whole."""
    from slurmtools.cli.topo_providers import GZ_LIMIT, _read

    chunk = (b"#" * 63 + b"\n") * (1 << 14)
    member = gzip.compress(chunk, compresslevel=9)
    bomb = tmp_path / "fabric.ibnet.gz"
    with bomb.open("wb") as fh:
        for _ in range(GZ_LIMIT // len(chunk)):
            fh.write(member)
        fh.write(gzip.compress(b"\n"))
    assert bomb.stat().st_size < 8 << 20
    with pytest.raises(ConfigError) as got:
        _read(str(bomb))
    msg = str(got.value)
    assert msg.startswith(f"{bomb}: unpacks to more than 1 GiB") and "\n" not in msg

    fits = tmp_path / "small.ibnet.gz"
    fits.write_bytes(member * 3)
    assert _read(str(fits)) == (chunk * 3).decode()


#: (provider, mutation number of its first sample) run through the real CLI, picked to be refused and read;
#: "nvlink" is the `nvidia-smi nvlink -s` file given with --nvlink
CLI_CASES = [("nvidia-smi", 0), ("nvidia-smi", 1), ("ibnetdiscover", 0), ("ibnetdiscover", 2), ("topology.conf", 0),
             ("topology.yaml", 6), ("nccl-xml", 2), ("capture", 0), ("capture", 2), ("nvlink", 1)]


def first_sample(kind: str) -> Sample:
    if kind == "nvlink":
        return next(s for s in SAMPLES if s.role == "nvlink")
    return next(s for s in SAMPLES if (s.kind, s.role) == (kind, "main"))


def test_the_cli_exits_0_or_2_with_one_line(tmp_path):
    codes = set()
    for kind, number in CLI_CASES:
        sample = first_sample(kind)
        data, edits = mutation(sample, number)
        path, nvlink = write(tmp_path, sample, data)
        args = ["topo", "import", "--from", sample.kind, path] + (["--nvlink", nvlink] if nvlink else [])
        r = subprocess.run([sys.executable, "-m", "slurmtools", *args], capture_output=True, text=True, cwd=REPO,
                           timeout=120)
        why = f"{kind} {sample.name} mutation {number} ({'; '.join(edits)}): exit {r.returncode}, stderr {r.stderr!r}"
        assert "Traceback" not in r.stderr, why
        assert r.returncode in (0, 2), why
        if r.returncode == 2:
            lines = r.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"slurmtools: error: {nvlink or path}:"), why
        codes.add(r.returncode)
    assert codes == {0, 2}   # the cases reach both outcomes
