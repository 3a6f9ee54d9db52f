"""Seeded mutations of real gres.conf files (the site files in tests/data/topology and tests/data/slurm, what
slurmtools renders for the bundled example fabric, and one file of every syntax slurmd reads): cut short, lines
lost, doubled or swapped, a token or a Key='s value replaced by garbage (an empty value, 99999999999999999999, NaN,
`٣`, `²`, `1_0`, `+7`, -1, a NUL or a tab, a very long word, ranges such as `/dev/nvidia[0-99999999999]`,
`node[1-99999999999]`, `[7-0]` or `[1-[2]]`, a long list of large ranges), invalid UTF-8, CRLF ends, a BOM, a
backslash or `#` in odd places.

The rule: `topo lint --gres` reads the mutated file (`gres_text`, then `compare_gres` against a topology holding the
original file's nodes and GPUs) and the result is sane (every GPU index, core id and Links= value a whole number in
range, line numbers within the file, the summary and each finding one line), or refuses it with slurmtools' own
ParseError or ConfigError in one line that starts with the file's path; never another exception, a message over
several lines, a hang or a runaway allocation. A few of the same mutations go through the real CLI in a subprocess:
exit 0, 1 (findings) or 2 with one line on stderr, and never a traceback.

Each case is (sample, mutation number); the mutation is drawn from a generator seeded with both, so a failure
reproduces from its id alone, and the assertion message names the edits."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from slurmtools.cli.topo import gres_text
from slurmtools.errors import ConfigError, ParseError
from slurmtools.topology.checks import GRES_GPU_LIMIT, GresCheck, check_gres, compare_gres, read_gres_conf
from slurmtools.topology.cpu_layout import CPU_ID_LIMIT
from slurmtools.topology.graph import Topology
from tests.hostile.mutations import BAD_UTF8, GARBAGE, Hang, bounded, line_edit
from tests.unit.topology._data import TEST_DATA
from tests.unit.topology.test_gres_lint import BCM, LAMBDA, NVL72

REPO = Path(__file__).resolve().parents[2]
MUTATIONS = 300          # per sample; 8 samples
SECONDS_PER_READ = 10    # a read that takes longer is a hang
MEMORY_PER_READ = 2 << 30   # bytes of address space a read may add

#: every syntax slurmd reads in a gres.conf: comments, a backslash continuation, quoted values, keys in any case,
#: AutoDetect= alone and on a NodeName= line, Count= with a suffix, Flags=, Links=, MultipleFiles=, CPUs=
SYNTAX = """# site gres.conf
AutoDetect=off
NodeName="gpu[01-02]" name=GPU Type=a100 \\
    File=/dev/nvidia[0-1],/dev/nvidia3 Cores=0-7 Links=-1,12,0 # NVLink row
NodeName=gpu03 AutoDetect=nvml
NodeName=gpu03 Name=gpu Type=h100 File=/dev/nvidia[0-3] CPUs=0-15,32-47 Flags=nvidia_gpu_env
Name=mps Count=100K File=/dev/nvidia0
Name=shard Count=8
Name=gpu Count=2
Name=gpu Type=orin File=/dev/dri/renderD128
Name=gpu Type=1g.10gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21
"""


@dataclass(frozen=True)
class Sample:
    name: str
    text: bytes


def _rendered() -> str:
    from slurmtools.resources import bundled
    from slurmtools.topology.build_site import build_site
    from slurmtools.topology.render_slurm import render_gres_conf
    from slurmtools.topology.sitefile import load_fabric

    # the site declares GPUs, not their device minors: File= by index, as `admin render gres-conf` writes it
    return render_gres_conf(build_site(load_fabric(bundled("topology") / "example" / "fabric.toml")),
                            "/dev/nvidia{index}")


def samples() -> list[Sample]:
    files = sorted(TEST_DATA.glob("*gres.conf")) + [BCM, NVL72, LAMBDA]
    return ([Sample(p.name, p.read_bytes()) for p in files] + [Sample("example-rendered.conf", _rendered().encode()),
                                                               Sample("syntax.conf", SYNTAX.encode())])


SAMPLES = samples()


def topology_for(sample: Sample) -> Topology:
    """A topology with the sample's nodes and GPUs (a line without NodeName= gives host `node0` its GPUs), cores
    0-127 local to every GPU, so the mutated file is compared, not only read."""
    conf = read_gres_conf(sample.text.decode(), sample.name)
    t = Topology("fuzz")
    by_host: dict[str, set[int]] = {}
    for g in conf.gpus:
        by_host.setdefault(g.node or "node0", set()).add(g.index)
    for h, idx in sorted(by_host.items()):
        cpu = t.add_cpu(h, 0, 0, cpus=range(128), cores=range(128))
        for i in sorted(idx):
            t.add_gpu(h, i, parent=cpu)
    return t


# ------------------------------------------------------------------------------------------------- mutations

#: what a Key='s value may become besides GARBAGE: ranges too large, reversed, nested, cut, of other digits, lists
RANGES = ("[0-99999999999]", "[1-99999999999]", "[0-99999]", "[7-0]", "[1-[2]]", "[0-3", "0-3]", "[0-3][0-3]",
          "[٣]", "[1_0]", "[+7]", "[-1]", "[]", "[,]", "0-99999999999", "99999999999-0", "7-0", "0--1", "--1",
          "1,,2", ",", "-", "0-", "-7", "1e3", "0x10", "٣", "²", "1_0", "+7", "-1", "99999999999999999999",
          "9" * 5000, "[" * 3000, "[1]" * 3000)
KEYS = re.compile(rb"([A-Za-z]+)=(\"[^\"\n]*\"|[^\s\"]+)")


def _value(old: bytes, rng: random.Random) -> tuple[bytes, str]:
    how = rng.choice(("garbage", "range", "range", "tail", "tail", "list", "many"))
    if how == "garbage":
        new = rng.choice(GARBAGE).encode()
    elif how == "range":
        new = rng.choice(RANGES).encode()
    elif how == "tail":   # /dev/nvidia0 -> /dev/nvidia[0-99999999999], node[1-2] -> node[7-0]
        stem = re.sub(rb"(\[[^\]]*\]|[0-9]+)$", b"", old.strip(b'"'))
        new = stem + rng.choice(RANGES).encode()
    elif how == "list":   # the value twice, or a hundred times
        new = b",".join([old.strip(b'"')] * rng.choice((2, 100)))
    else:                 # many large ranges in one list: each under the hostlist library's own cap
        new = b",".join(b"n%d[0-99999]" % i for i in range(rng.choice((2, 50))))
    return new, how


def _mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One edit of `data` and its description."""
    lines = data.splitlines(keepends=True)
    op = rng.choice(("cut-bytes", "cut-lines", "drop-line", "double-line", "swap-lines", "token", "token", "value",
                     "value", "value", "value", "key", "insert", "crlf", "bom", "blanks", "long-line", "blank-line",
                     "indent", "backslash", "hash", "quote"))
    edited = line_edit(op, data, lines, rng)
    if edited is not None:
        return edited
    if op == "token":
        spans = [m.span() for m in re.finditer(rng.choice((rb"\S+", rb"[0-9]+", rb"[A-Za-z0-9_]+")), data)]
        if spans:
            s, e = rng.choice(spans)
            new = rng.choice(GARBAGE).encode()
            return data[:s] + new + data[e:], f"token {data[s:e][:40]!r} at byte {s} -> {new[:40]!r}"
    if op in ("value", "key"):
        found = list(KEYS.finditer(data))
        if found:
            m = rng.choice(found)
            if op == "value":
                new, how = _value(m.group(2), rng)
                s, e = m.span(2)
            else:
                new = rng.choice((m.group(1).upper(), m.group(1).lower(), b"", b"Foo", b"Name", b"NodeName",
                                  m.group(1) + b" ", b"x" * 5000, b"\xc3"))
                how, (s, e) = "key", m.span(1)
            return data[:s] + new + data[e:], f"{m.group(1).decode()}= {how} {data[s:e][:40]!r} -> {new[:60]!r}"
    if op == "insert":
        at = rng.randrange(len(data) + 1)
        new = rng.choice(BAD_UTF8 + (b"\x00", b"\t", b"\r", b"\x0b", b"\x0c", b"\xc2\x85", b"\xe2\x80\xa8",
                                     b"\xef\xbb\xbf", b"\\", b"#", b'"', b"="))
        return data[:at] + new + data[at:], f"insert {new!r} at byte {at}"
    if op == "crlf":
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"), "CRLF line ends"
    if op == "bom":
        return b"\xef\xbb\xbf" + data, "UTF-8 BOM"
    if op == "blanks":
        return re.sub(rb"[ \t]+", lambda m: m.group() * 2, data), "every run of blanks doubled"
    if op == "long-line" and lines:
        k = rng.randrange(len(lines))
        filler = rng.choice((b" ", b"0", b"x", b",0", b",/dev/nvidia0", b" Type=a", b"\\\n", b"\t"))
        body = lines[k].rstrip(b"\r\n")
        return (b"".join(lines[:k]) + body + filler * (200_000 // len(filler)) + lines[k][len(body):]
                + b"".join(lines[k + 1:])), f"line {k + 1} lengthened with {filler!r} x {200_000 // len(filler)}"
    if op == "blank-line" and lines:
        k = rng.randrange(len(lines) + 1)
        return b"".join(lines[:k] + [b"\n"] + lines[k:]), f"blank line before line {k + 1}"
    if op == "backslash" and lines:   # a continuation added or taken away
        k = rng.randrange(len(lines))
        body = lines[k].rstrip(b"\r\n")
        ends = lines[k][len(body):]
        body = body[:-1] if body.endswith(b"\\") else body + b"\\"
        return b"".join(lines[:k] + [body + ends] + lines[k + 1:]), f"backslash at the end of line {k + 1} toggled"
    if op in ("hash", "quote") and data:
        at = rng.randrange(len(data) + 1)
        new = b"#" if op == "hash" else rng.choice((b'"', b'""'))
        return data[:at] + new + data[at:], f"{new!r} at byte {at}"
    return data, f"{op}: nothing to do"


def mutation(sample: Sample, number: int) -> tuple[bytes, list[str]]:
    """The `number`th mutation of `sample`: one to three edits from a generator seeded with both."""
    rng = random.Random(f"gres/{sample.name}/{number}")
    data, edits = sample.text, []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        data, what = _mutate(data, rng)
        edits.append(what)
    return data, edits


# ------------------------------------------------------------------------------------------------- checks

def _line_count(text: str) -> int:
    """Lines as slurmd and an editor count them: ended by \\n, the last one perhaps without it."""
    return text.count("\n") + (not text.endswith("\n"))


def _sane(c: GresCheck, t: Topology, text: str, why: str) -> None:
    """What a read file must hold: whole numbers in range, line numbers inside the file, one-line output."""
    lines = _line_count(text)
    conf = c.conf
    assert len(conf.gpus) <= GRES_GPU_LIMIT, why
    for g in conf.gpus:
        assert type(g.index) is int and 0 <= g.index, f"{why}: GPU index {g.index!r}"
        assert 1 <= g.line <= lines, f"{why}: line {g.line} of a {lines}-line file"
        assert g.node is None or (isinstance(g.node, str) and g.node), f"{why}: node {g.node!r}"
        assert g.cores is None or g.cores and all(type(i) is int and 0 <= i < CPU_ID_LIMIT for i in g.cores), \
            f"{why}: Cores {g.cores!r:.80}"
        assert g.links is None or all(type(i) is int and i >= -2 for i in g.links), f"{why}: Links {g.links!r:.80}"
    for n, reason in conf.skipped:
        assert 1 <= n <= lines, f"{why}: skipped line {n} of a {lines}-line file"
    assert c.gpus <= sum(len(t.gpus(h)) for h in t.host_names()), why
    summary = c.summary(t.name)
    assert len(summary.splitlines()) == 1, f"{why}: a summary over several lines: {summary[:300]!r}"
    for f in c.findings + check_gres(t, text, "gres.conf"):
        assert len(f.line().splitlines()) == 1, f"{why}: a finding over several lines: {f.line()[:300]!r}"


def read_or_refuse(t: Topology, path: str, why: str) -> GresCheck | None:
    """What `topo lint --gres` makes of the file, or None when it is refused as the rule says; any other outcome
    fails with `why` (the sample, mutation number and edits)."""
    try:
        with bounded(SECONDS_PER_READ, MEMORY_PER_READ):
            text = gres_text(Path(path))
            c = compare_gres(t, text, path)
            _sane(c, t, text, why)
    except (ParseError, ConfigError) as exc:
        msg = str(exc)
        assert len(msg.splitlines()) == 1, f"{why}: a message over several lines: {msg[:300]!r}"
        assert msg.startswith(f"{path}:"), f"{why}: the message does not start with the file's path: {msg[:300]!r}"
        assert len(msg) <= len(path) + 400, f"{why}: a message of {len(msg)} characters: {msg[:300]!r}"
        if isinstance(exc, ParseError) and exc.line is not None:
            lines = _line_count(Path(path).read_bytes().decode("utf-8", "replace"))
            assert 1 <= exc.line <= lines, f"{why}: line {exc.line} of a {lines}-line file: {msg[:300]!r}"
        return None
    except AssertionError:
        raise
    except (Exception, Hang) as exc:  # noqa: BLE001 - the defect this test looks for
        raise AssertionError(f"{why}: {type(exc).__name__}: {str(exc)[:300]}") from exc
    return c


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.name)
def test_mutated_gres_conf_is_read_or_refused_in_one_line(tmp_path, sample):
    t = topology_for(sample)
    outcomes = {"read": 0, "refused": 0}
    p = tmp_path / "gres.conf"
    for number in range(MUTATIONS):
        data, edits = mutation(sample, number)
        p.write_bytes(data)
        why = f"{sample.name} mutation {number} ({'; '.join(edits)})"
        outcomes["read" if read_or_refuse(t, str(p), why) is not None else "refused"] += 1
    assert outcomes["read"] and outcomes["refused"], outcomes   # the mutations reach both outcomes


def test_the_samples_are_read_whole(tmp_path):
    """Every sample as it is: read, and every GPU of its topology compared."""
    assert len(SAMPLES) >= 8
    for sample in SAMPLES:
        p = tmp_path / sample.name
        p.write_bytes(sample.text)
        t = topology_for(sample)
        c = read_or_refuse(t, str(p), f"{sample.name} as it is")
        assert c is not None and c.gpus == sum(len(t.gpus(h)) for h in t.host_names()) > 0, sample.name


#: (sample, mutation number) run through the real CLI, picked to be read and refused
CLI_CASES = [("danielmc81_multi-node-site_gres.conf", 0), ("danielmc81_multi-node-site_gres.conf", 3),
             ("example-rendered.conf", 1), ("example-rendered.conf", 4), ("syntax.conf", 2), ("syntax.conf", 5),
             ("gres-hyxcl-bcm-node12-dgxa100.conf", 0), ("gres-arlk-lambda-8gpu-cpus.conf", 1)]


def test_the_cli_exits_0_1_or_2_with_one_line(tmp_path):
    codes = set()
    for name, number in CLI_CASES:
        sample = next(s for s in SAMPLES if s.name == name)
        topo = tmp_path / f"{name}.json"
        topo.write_text(topology_for(sample).to_json())
        data, edits = mutation(sample, number)
        path = tmp_path / f"{name}.{number}"
        path.write_bytes(data)
        r = subprocess.run([sys.executable, "-m", "slurmtools", "topo", "lint", str(topo), "--gres", str(path)],
                           capture_output=True, text=True, cwd=REPO, timeout=120)
        why = f"{name} mutation {number} ({'; '.join(edits)}): exit {r.returncode}, stderr {r.stderr[:300]!r}"
        assert "Traceback" not in r.stderr, why
        assert r.returncode in (0, 1, 2), why
        if r.returncode == 2:
            lines = r.stderr.splitlines()
            assert len(lines) == 1, why
            assert re.match(rf"slurmtools: error: (--gres: nothing matched: )?{re.escape(str(path))}:", lines[0]), why
        else:
            assert r.stderr == "" and r.stdout.splitlines()[0].startswith(f"{path}: compared "), why
        codes.add(r.returncode)
    assert codes >= {0, 2}, codes   # the cases reach both outcomes
