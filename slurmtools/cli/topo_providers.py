"""`slurmtools topo capture` and `slurmtools topo import --from KIND FILE`: where topology comes from.

`capture` records what NVML reports on this node into a JSON capture; `import` reads one provider's input
(nvidia-smi text, an ibnetdiscover dump, a Slurm topology.conf or topology.yaml, an NCCL topology XML, a capture)
into the topology graph. `load_topology(path)` lets the other `topo` commands take such a file directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from slurmtools.cli.common import JsonOpt, fail, print_json

KINDS = ("nvidia-smi", "ibnetdiscover", "topology.conf", "topology.yaml", "nccl-xml", "capture")


def register_providers(topo_app: typer.Typer) -> None:
    topo_app.command("capture")(capture_cmd)
    topo_app.command("import")(import_cmd)


#: the most a `.gz` input may unpack to. The largest real input, an ibnetdiscover dump of 16,384 hosts x 8 HCAs,
#: is about a tenth of it; a few kilobytes of gzip can unpack to gigabytes, so the reader stops here and asks for
#: the plain file instead (plain files are read as they are: their size is on the disk for all to see).
GZ_LIMIT = 1 << 30


def _read(path: str) -> str:
    """The file's text, as UTF-8 whatever the locale, or as its byte-order mark says: Windows PowerShell's `>`
    writes UTF-16 LE with a BOM, its `Out-File -Encoding utf8` UTF-8 with one. Left in, a UTF-8 BOM hid the first
    line from every provider (`\\ufeffSwitchName=` is no key) and from `detect_kind`. A plain file gets universal
    newlines (as `read_text` gave it), a `.gz` its bytes' own line ends, as before."""
    from slurmtools.errors import ConfigError

    import zlib

    p = Path(path)
    try:
        if p.suffix == ".gz":
            import gzip

            with gzip.open(p, "rb") as fh:
                data = fh.read(GZ_LIMIT + 1)
            if len(data) > GZ_LIMIT:
                raise ConfigError(path, "", f"unpacks to more than {GZ_LIMIT >> 30} GiB, more than any topology "
                                            f"input needs: unpack it and pass the plain file if it is real")
            return _decode(data, path)
        return _decode(p.read_bytes(), path).replace("\r\n", "\n").replace("\r", "\n")
    except FileNotFoundError:
        raise ConfigError(path, "", "file not found") from None
    except (OSError, EOFError, zlib.error) as exc:   # zlib.error: damaged compressed data
        raise ConfigError(path, "", f"cannot read: {exc}") from None


_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32 LE"), (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32 BE"),
         (b"\xef\xbb\xbf", "utf-8", "UTF-8"), (b"\xff\xfe", "utf-16-le", "UTF-16 LE"),
         (b"\xfe\xff", "utf-16-be", "UTF-16 BE"))


def _decode(data: bytes, path: str) -> str:
    """Bytes to text by the byte-order mark (UTF-32 before UTF-16: its LE mark starts with UTF-16 LE's), else as
    UTF-8. Without a mark nothing is guessed: bytes that are no UTF-8, or UTF-16 text (valid UTF-8 when it is ASCII
    with a NUL after each letter), are refused, saying what the file seems to be."""
    from slurmtools.errors import ConfigError

    for bom, codec, name in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom):].decode(codec)
            except UnicodeDecodeError as exc:
                raise ConfigError(path, "", f"cannot read: it starts with the {name} byte-order mark but is no "
                                            f"{name} text: {exc}") from None
    seems = _seems(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(path, "", f"cannot read: {exc}" + (f" (it seems to be {seems})" if seems else "")) from None
    if seems and seems.startswith("UTF-16"):
        raise ConfigError(path, "", f"cannot read: it seems to be {seems}")
    return text


def _seems(data: bytes) -> str:
    """What bytes that are not plain UTF-8 text look like, or ''."""
    head = data[:4096]
    if head.startswith(b"\x1f\x8b"):
        return "gzip-compressed data: name it .gz, or unpack it"
    pairs = len(head) // 2
    if pairs >= 4:
        for name, at in (("LE", 1), ("BE", 0)):
            nul = head[at:2 * pairs:2].count(0)
            other = head[1 - at:2 * pairs:2].count(0)
            if nul >= 0.9 * pairs and other <= 0.1 * pairs:
                return (f"UTF-16 {name} without a byte-order mark (every other byte is NUL): save it as UTF-8, or "
                        "as UTF-16 with its mark")
    if head.count(0) > len(head) // 100:
        return "a binary file (it holds NUL bytes)"
    return "text in a legacy 8-bit encoding such as Windows-1252 or Latin-1: save it as UTF-8"


def detect_kind(text: str) -> str | None:
    """Which provider reads this text, judged from its first meaningful lines."""
    import re

    head = text[:20000]
    if head.lstrip().startswith("{") and "slurmtools.nvml-capture/" in head:
        return "capture"
    if re.search(r"^\s*<system\b", head, re.M):
        return "nccl-xml"
    if re.search(r"^(?:Switch|Ca)\s+\d+\s+\"[SH]-", head, re.M):
        return "ibnetdiscover"
    if re.search(r"^(?:CA|SW)\s+\d+\s+\d+\s+0x[0-9a-fA-F]+\s", head, re.M):
        return "ibnetdiscover"   # its `-p` ports report: the reader refuses it, saying what to dump instead
    if re.search(r"^[ \t]*(?:SwitchName|BlockName)[ \t]*=", head, re.M | re.I):
        return "topology.conf"
    if re.search(r"^\s*(?:-\s+)?topology\s*:", head, re.M) and re.search(r"^\s*(?:tree|block|flat)\s*:", head, re.M):
        return "topology.yaml"
    if re.search(r"^[#>\s]*GPU0\b", head, re.M):
        return "nvidia-smi"
    if "GPU0" in head:
        from slurmtools.topology.nvsmi import prefixed_header

        if prefixed_header(head):   # gathered by srun -l, pdsh, clush, docker compose logs, a CI log
            return "nvidia-smi"
    return None


def build(kind: str, path: str, host: Optional[str] = None, hostname_pattern: Optional[str] = None,
          exclude_hca: tuple[str, ...] = (), exclude_switch: tuple[str, ...] = (), nvlink: Optional[str] = None,
          warn=None, gpu_type: Optional[str] = None, threads_per_core: Optional[int] = None,
          topology_name: Optional[str] = None, pair_nvlink: bool = False):
    """Read `path` with the provider `kind` into a Topology. `gpu_type` and `threads_per_core` are the admin's
    statements for one-node inputs that do not carry them; `topology_name` picks one topology of a
    topology.yaml (default: its cluster default); `pair_nvlink` refuses an `nvlink` file that cannot be of the
    topo -m file's node (`topo import` asks for it; the fuzz suite reads every status file beside one 8-GPU node)."""
    from slurmtools.errors import OptionError
    from slurmtools.topology.sitefile import SLURM_WORD, SLURM_WORD_RULE

    # the admin's statements become a NodeName and a gres Type: one word each, as Slurm's config takes them
    for opt, value in (("--host", host), ("--gpu-type", gpu_type)):
        if value is not None and not SLURM_WORD.fullmatch(value):
            raise OptionError(f"{opt}: {SLURM_WORD_RULE}; got {value!r}")
    t = _build(kind, path, host, hostname_pattern, exclude_hca, exclude_switch, nvlink, warn, gpu_type,
               threads_per_core, topology_name, pair_nvlink)
    if host is None and kind in ("nvidia-smi", "nccl-xml"):
        # these inputs do not name their node: its name is the file's, which is a guess, not a fact
        for h in t.of_kind("host"):
            t.mark_unknown(h.name, "host_name")
    return t


def _build(kind, path, host, hostname_pattern, exclude_hca, exclude_switch, nvlink, warn, gpu_type,
           threads_per_core, topology_name, pair_nvlink):
    from slurmtools.errors import ParseError

    text = _read(path)
    if kind == "nvidia-smi":
        from slurmtools.topology import nvsmi

        status = nvsmi.parse_nvlink_status(_read(nvlink), nvlink) if nvlink else ()
        matrix = nvsmi.parse_topo_matrix(text, path)
        if nvlink and pair_nvlink:
            nvsmi.check_nvlink_pairing(matrix, status, nvlink)
        return nvsmi.to_topology(matrix, host or Path(path).stem.split(".")[0], status, gpu_type, threads_per_core)
    if kind == "ibnetdiscover":
        from slurmtools.topology import ibnet

        cf = ibnet.compute_fabric(ibnet.parse_ibnetdiscover(text, path),
                                  hostname_pattern or ibnet.DEFAULT_HOST_PATTERN, exclude_hca, exclude_switch)
        pattern = hostname_pattern or ibnet.DEFAULT_HOST_PATTERN
        unmapped = [n for n in cf.unmapped if ibnet.AGGREGATION_NODE not in n.description]
        if not cf.hcas:
            raise ParseError(path, None, _no_host_why(cf, unmapped, pattern))
        if warn:
            _ibnet_warnings(cf, path, pattern, warn)
        t = ibnet.to_topology(cf, Path(path).stem)
        if unmapped:    # their hosts are not in the graph: a fact the dump holds that the import could not read
            t.mark_fabric_unknown("adapter_hosts")
        return t
    if kind in ("topology.conf", "topology.yaml"):
        return _slurm_topology(kind, text, path, topology_name, warn or (lambda _w: None))
    if kind == "capture":
        from slurmtools.topology.nvml_capture import parse_capture, to_topology

        return to_topology(parse_capture(text, path), host, gpu_type, threads_per_core)
    if kind == "nccl-xml":
        try:
            from slurmtools.topology import nccl_xml
        except ModuleNotFoundError:
            raise ParseError(path, None, "reading NCCL topology XML is not available in this version") from None
        return nccl_xml.to_topology(nccl_xml.parse_nccl_xml(text, path), host or Path(path).stem, gpu_type,
                                    threads_per_core)
    raise ParseError("--from", None, f"unknown input kind {kind!r}; expected one of {', '.join(KINDS)}")


def _no_host_why(cf, unmapped: list, pattern: str) -> str:
    """Why an ibnetdiscover dump gave no host adapter under a switch, in one line."""
    if unmapped:
        eg = ", ".join(list(dict.fromkeys(f'"{n.description}"' if n.description.strip() else n.guid
                                          for n in unmapped))[:_FIRST])
        return (f"no host to import: the node descriptions of its {len(unmapped)} adapter(s) name no host by the "
                f"pattern {pattern!r} (e.g. {eg}); --hostname-pattern reads them")
    if cf.excluded:
        return f"no host to import: --exclude-hca left out all {len(cf.excluded)} adapter(s)"
    if cf.cut_off and all(why == "excluded switch" for _n, _h, why in cf.cut_off):
        return (f"no host to import: --exclude-switch left out the switches all its {len(cf.cut_off)} adapter(s) "
                "are cabled to")
    if cf.cut_off:
        return f"no host to import: none of its {len(cf.cut_off)} adapter(s) is cabled to a switch"
    return "no host to import: the dump lists no host adapter cabled to a switch"


#: how many examples a warning line about many like things names
_FIRST = 3


def _first(items: list[str]) -> str:
    """The first few of `items`, comma-separated, with how many more there are."""
    more = len(items) - _FIRST
    return ", ".join(items[:_FIRST]) + (f" and {more} more" if more > 0 else "")


def _ibnet_warnings(cf, path: str, pattern: str, warn) -> None:
    """One line for each kind of thing the compute fabric leaves out of the graph, or cannot show in it (see
    `ComputeFabric`): the import must not lose what the dump says without saying so."""
    from slurmtools.topology.ibnet import AGGREGATION_NODE

    def node(n) -> str:           # a node the graph does not hold: its description, else its GUID
        return f'"{n.description}"' if n.description.strip() else n.guid

    named = sum(1 for n in cf.unmapped if AGGREGATION_NODE not in n.description)
    if named:
        warn(f"{path}: {named} adapter(s) whose description names no host (pattern {pattern!r}) were left out")
    if cf.mixed_bundles:
        names = cf.switch_names()
        for b in cf.mixed_bundles[:_FIRST]:
            rates = " and ".join(f"{r} ({n})" for r, n in b.rates)
            warn(f"{path}: cables between {names[b.lo]} and {names[b.hi]} run at {rates}: a degraded cable? the "
                 f"link is taken as {'+'.join(str(n) for _, n in b.rates)} cables at {b.taken}")
        if len(cf.mixed_bundles) > _FIRST:
            warn(f"{path}: and {len(cf.mixed_bundles) - _FIRST} more switch-to-switch bundle(s) whose cables run "
                 "at mixed rates, each cable taken at its own rate")
    if cf.slow_ports:
        warn(f"{path}: {len(cf.slow_ports)} adapter port(s) run slower than the fastest port of their host: "
             + _first([f"{h.host} {h.name} at {h.link} (fastest {best})" for h, best in cf.slow_ports])
             + ": a degraded cable, or a slower card to leave out with --exclude-hca?")
    if cf.back_to_back:
        warn(f"{path}: {len(cf.back_to_back)} cable(s) join two adapters straight (back to back, no switch between) "
             "and are not in the graph: "
             + _first([f"{node(a)} - {node(b)}" for a, b, _ in cf.back_to_back])
             + "; an adapter with no cable to a switch was left out")
    for why, how in (("excluded switch", "are cabled only to switches left out by --exclude-switch"),
                     ("no switch", "have no cable to a switch (a router only, or nothing)")):
        cut = [(n, host) for n, host, w in cf.cut_off if w == why]
        if cut:
            lost = {host for _, host in cut} - set(cf.hosts)
            warn(f"{path}: {len(cut)} host adapter(s) {how} and were left out"
                 + (f", and with them {len(lost)} host(s) entirely" if lost else "") + ": "
                 + _first([n.description for n, _ in cut]))
    if cf.routers:
        warn(f"{path}: {len(cf.routers)} router(s) left out with their cables (the graph holds one subnet's "
             f"switches and hosts): {_first([node(n) for n in cf.routers])}")
    if cf.unreachable:
        warn(f"{path}: {len(cf.unreachable)} switch(es) that no path from a host's leaf switch reaches were left "
             f"out: {_first([node(n) for n in cf.unreachable])}")
    if cf.with_excluded:
        warn(f"{path}: {len(cf.with_excluded)} switch(es) cabled only to adapters left out by --exclude-hca were "
             f"left out with them: {_first([node(n) for n in cf.with_excluded])}")
    if cf.loops:
        warn(f"{path}: {len(cf.loops)} cable(s) from a node back to itself (a loopback plug?) were left out: "
             + _first([f"{node(n)} port {c.a_port} - port {c.b_port}" for n, c in cf.loops]))


def _slurm_topology(kind: str, text: str, path: str, topology_name: Optional[str], warn):
    """Slurm's own topology files: both readers make one `TopologyConf`, checked and turned into the graph by
    the same code; the notes say what the graph cannot show (which topology of several, the blocks)."""
    from slurmtools.topology import slurm_topology_conf as stc

    if kind == "topology.conf":
        conf, name = stc.parse_topology_conf(text, path), Path(path).stem
    else:
        from slurmtools.errors import ConfigError
        from slurmtools.topology.slurm_topology_yaml import NOT_IMPORTED, parse_topology_yaml

        doc = parse_topology_yaml(text, path)
        chosen = doc.select(topology_name)
        conf, name = chosen.conf, chosen.name
        others = ", ".join(f"{t.name} ({t.kind})" for t in doc.topologies if t.kind in ("tree", "block"))
        if chosen.kind in NOT_IMPORTED:
            raise ConfigError(path, chosen.name, f"{NOT_IMPORTED[chosen.kind]}, which slurmtools does not import "
                                                 "(it imports tree and block ones"
                                                 + (f"; --topology names one: {others})" if others else ")"))
        if chosen.kind == "flat":
            raise ConfigError(path, chosen.name, "flat: it names no switches, blocks or hosts, so there is nothing "
                                                 "to import" + (f" (--topology names another: {others})"
                                                                if others else ""))
        if len(doc.topologies) > 1:
            why = "named by --topology" if topology_name is not None else "the cluster default"
            warn(f"{path}: {len(doc.topologies)} topologies ({', '.join(t.name for t in doc.topologies)}); "
                 f"imported {chosen.name} ({chosen.kind}, {why})")
    for w in conf.warnings():
        warn(w)
    return stc.to_topology(conf, name)


def load_topology(path: Path):
    """A Topology from any provider's input, or None when no provider recognises the file."""
    kind = detect_kind(_read(str(path)))
    return build(kind, str(path)) if kind else None


def _summary(t) -> dict:
    from collections import Counter

    from slurmtools.topology import queries as q

    levels = q.switch_levels(t)
    return {"name": t.name, "hosts": t.count("host"),
            "switches_by_level": {str(k): v for k, v in sorted(Counter(levels.values()).items())},
            "gpus": t.count("gpu"), "nics": t.count("nic"), "nvswitches": t.count("nvswitch"),
            "nvlink_domains": t.count("nvlink_domain"), "blocks": t.count("block"),
            "block_sizes": list(t.block_sizes)}


def import_cmd(file: str = typer.Argument(..., help="The provider's input file (.gz is read too)"),
               kind: str = typer.Option(..., "--from", help="nvidia-smi | ibnetdiscover | topology.conf | "
                                                            "topology.yaml | nccl-xml | capture"),
               topology: Optional[str] = typer.Option(None, "--topology", help="topology.yaml: the topology to "
                                                                              "import (default: the one marked "
                                                                              "cluster_default)"),
               host: Optional[str] = typer.Option(None, "--host", help="Host name for one-node inputs "
                                                                       "(default: from the file)"),
               hostname_pattern: Optional[str] = typer.Option(
                   None, "--hostname-pattern", help="ibnetdiscover: regex over node descriptions with groups "
                                                    "(?P<host>...) and optionally (?P<hca>...)"),
               exclude_hca: List[str] = typer.Option([], "--exclude-hca", help="ibnetdiscover: glob of adapter "
                                                                              "names to leave out (storage), or of "
                                                                              "the descriptions or GUIDs of adapters "
                                                                              "that name no host"),
               exclude_switch: List[str] = typer.Option([], "--exclude-switch", help="ibnetdiscover: glob of switch "
                                                                                    "GUIDs or descriptions"),
               nvlink: Optional[str] = typer.Option(None, "--nvlink", help="nvidia-smi: `nvidia-smi nvlink -s` "
                                                                          "output for link speeds"),
               gpu_type: Optional[str] = typer.Option(None, "--gpu-type", help="One-node inputs: the GPUs' gres "
                                                                              "Type (also tells the NVLink "
                                                                              "generation, e.g. h100)"),
               threads_per_core: Optional[int] = typer.Option(None, "--threads-per-core", min=1,
                                                              help="One-node inputs: hardware threads per core, "
                                                                   "to turn local CPU ids into gres Cores="),
               strict: bool = typer.Option(False, "--strict", help="Fail (exit 3) when the input leaves any fact "
                                                                   "unknown, naming them"),
               out: Optional[str] = typer.Option(None, "--out", help="Write the topology graph as JSON here"),
               json_out: bool = JsonOpt) -> None:
    """Read one provider's input into the topology graph; print a summary, write the graph with --out."""
    if kind not in KINDS:
        fail(f"--from: expected one of {', '.join(KINDS)}, got {kind!r}")
    if topology is not None and kind != "topology.yaml":
        fail(f"--topology: only with --from topology.yaml (a {kind} input holds one topology)")
    from slurmtools.gc_pause import gc_paused

    # One pause of the cyclic collector for the whole command, not one per step: between steps it would walk the
    # fabric's million objects again (3 collections, about 0.35 s of a 16k-host import; they hold no cycles).
    with gc_paused():
        _import(kind, file, host, hostname_pattern, exclude_hca, exclude_switch, nvlink, gpu_type, threads_per_core,
                strict, out, json_out, topology)


def _import(kind, file, host, hostname_pattern, exclude_hca, exclude_switch, nvlink, gpu_type, threads_per_core,
            strict, out, json_out, topology) -> None:
    from slurmtools.topology.describe import describe_host, host_lines
    from slurmtools.topology.graph import FABRIC_UNKNOWN_FACTS, _natural

    warnings: list[str] = []
    t = build(kind, file, host, hostname_pattern, tuple(exclude_hca), tuple(exclude_switch), nvlink,
              warn=warnings.append, gpu_type=gpu_type, threads_per_core=threads_per_core, topology_name=topology,
              pair_nvlink=True)
    for w in warnings:
        typer.echo(f"slurmtools: warning: {w}", err=True)
    # The hosts with an inside to describe (GPUs, or facts the source left unknown), in name order: picked in
    # one pass over the hosts and only those sorted (a 16k-host fabric has none).
    with_gpus = {n for g in t.of_kind("gpu") for n in t.g.adj[g.vid] if n.startswith("host:")}
    picked = sorted((h for h in t.of_kind("host") if h.vid in with_gpus or h.unknown), key=lambda h: _natural(h.name))
    inside = [describe_host(t, h.name) for h in picked]
    on_hosts = sorted({f for d in inside for f in d["unknown"]})
    unknown = on_hosts + list(t.fabric_unknown)
    if strict and unknown:
        fail(f"{file}: --strict: the input leaves unknown: {', '.join(unknown)} (see `topo import` without "
             "--strict for what each means)", 3)
    if out:
        try:
            Path(out).write_text(t.to_json(indent=1) + "\n")
        except OSError as exc:
            fail(f"--out {out}: cannot write: {exc}")
    info = _summary(t)
    if json_out:
        print_json({**info, "inside": inside if len(inside) <= 16 else [], "unknown": unknown})
        return
    by_level = ", ".join(f"{n} at level {k}" for k, n in info["switches_by_level"].items()) or "none"
    typer.echo(f"{file} ({kind}): {info['hosts']} hosts, switches {by_level}, {info['gpus']} GPUs, "
               f"{info['nics']} NICs, {info['nvswitches']} NVSwitch vertices, {info['nvlink_domains']} NVLink "
               f"domains" + (f", {info['blocks']} blocks (BlockSizes "
                             f"{','.join(map(str, t.block_sizes)) or 'not given'})" if info["blocks"] else "")
               + (f"; graph written to {out}" if out else ""))
    if len(inside) <= 4:   # one-node captures: the screen to check against the capture
        for d in inside:
            for line in host_lines(d):
                typer.echo(line)
    elif on_hosts:
        typer.echo(f"unknown on some hosts: {', '.join(on_hosts)}")
    for f in t.fabric_unknown:
        typer.echo(f"unknown: {f}: {FABRIC_UNKNOWN_FACTS[f]}")


def capture_cmd(out: Optional[str] = typer.Option(None, "--out", help="Write the capture here (default: stdout)"),
                hostname: Optional[str] = typer.Option(None, "--hostname", help="Host name to record "
                                                                               "(default: this host's short name)"),
                ) -> None:
    """Record what NVML reports about this node's GPUs into a JSON capture."""
    import json

    from slurmtools.topology.nvml_capture import is_host_name

    if hostname is not None and not is_host_name(hostname):
        fail(f"--hostname: expected a host name (one printable word), got {hostname[:40]!r}")
    try:
        import pynvml
    except ImportError:
        fail("topo capture: nvidia-ml-py (pynvml) is not installed", 4)
    from slurmtools.topology.nvml_capture import capture

    try:
        cap = capture(hostname)
    except pynvml.NVMLError as exc:
        fail(f"topo capture: NVML: {exc} (is the NVIDIA driver loaded on this node?)", 4)
    text = json.dumps(cap.to_dict(), indent=1) + "\n"
    if out:
        try:
            Path(out).write_text(text)
        except OSError as exc:
            fail(f"--out {out}: cannot write: {exc}")
        typer.echo(f"captured {len(cap.gpus)} GPUs of {cap.hostname} to {out}", err=True)
    else:
        typer.echo(text, nl=False)
