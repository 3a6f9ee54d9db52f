"""`slurmtools topo show | export | diff | lint | path`: the topology graph, its Slurm configs and its checks.

A topology SOURCE is a topology JSON (`export --format json`), a fabric file (`topology/*.toml`), or anything the
providers module (`slurmtools.cli.topo_providers`, which also adds `capture` and `import`) knows how to read.
Without one, the site's declared fabric is used.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from slurmtools.cli.common import JsonOpt, SiteOpt, fail, print_json

topo_app = typer.Typer(help="Topology: show, export to Slurm configs and pictures, diff and lint.",
                       no_args_is_help=True)

FORMATS = ("topology.conf", "block", "gres.conf", "features", "json", "graphml", "svg", "png")
SourceArg = typer.Argument(None, help="Topology JSON, fabric TOML, or a provider's input (default: the site's "
                                      "fabric)", show_default=False)


def register(app: typer.Typer) -> None:
    import importlib

    try:
        providers = importlib.import_module("slurmtools.cli.topo_providers")
    except ModuleNotFoundError as exc:
        if exc.name != "slurmtools.cli.topo_providers":
            raise
    else:
        providers.register_providers(topo_app)
    app.add_typer(topo_app, name="topo")


def load_topology(source: Optional[str], site: Optional[str] = None):
    """The Topology a command works on (see the module docstring for what SOURCE may be)."""
    from slurmtools.errors import ConfigError

    if source is None:
        from slurmtools.cli.common import load_site

        s = load_site(site)
        if not s.fabric_path:
            raise ConfigError(str(s.source), "fabric", "the site declares no fabric file; give a topology SOURCE")
        source = str(s.fabric_path)
    p = Path(source)
    if not os.path.lexists(p):   # not exists(): that is False for a symlink loop too, which the read names
        raise ConfigError(source, "", "file not found")
    if p.suffix == ".json":
        from slurmtools.site.tomlread import read_text
        from slurmtools.topology.graph import Topology

        return Topology.from_json(read_text(p, limit=None), source)
    if p.suffix == ".toml":
        from slurmtools.topology.build_site import build_site
        from slurmtools.topology.sitefile import load_fabric

        return build_site(load_fabric(p))
    try:
        from slurmtools.cli import topo_providers
    except ModuleNotFoundError:
        topo_providers = None
    loader = getattr(topo_providers, "load_topology", None)
    t = loader(p) if loader else None
    if t is None:
        raise ConfigError(source, "", "unknown topology input: expected a topology .json, a fabric .toml"
                                      + (" or a provider's input" if loader else ""))
    return t


def _block_sizes(text: Optional[str]) -> Optional[list[int]]:
    """--block-sizes: whole numbers of at least 1 (Slurm's BlockSizes); "" is refused, not read as "not given"."""
    from slurmtools.errors import whole_number

    if text is None:
        return None
    try:
        sizes = [whole_number(x.strip()) for x in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        fail(f"--block-sizes: expected whole numbers of at least 1, comma-separated (e.g. 18,36), got {text!r}")
    return sizes


def _host(t, host: str) -> None:
    if f"host:{host}" not in t:
        fail(f"--host: no host {host!r} in topology {t.name!r}")


@topo_app.command("show")
def show(source: Optional[str] = SourceArg, site: Optional[str] = SiteOpt,
         host: Optional[str] = typer.Option(None, "--host", help="Show the inside of one host"),
         json_out: bool = JsonOpt) -> None:
    """Summarise the fabric (levels, oversubscription, NVLink domains) or one host's inside."""
    from dataclasses import asdict

    from slurmtools.hostlist import compress
    from slurmtools.topology import queries as q
    from slurmtools.topology.graph import FABRIC_UNKNOWN_FACTS

    t = load_topology(source, site)
    if host is not None:   # --host "" is a host not found, not the whole fabric
        from slurmtools.topology.describe import describe_host, host_lines

        _host(t, host)
        info = describe_host(t, host)
        # GPUs under a PCIe switch by switch; one attached straight to a bridge or CPU shares no switch with another
        by_switch = q.pcie_groups(t, host)
        groups = [v for k, v in by_switch.items() if k is not None] + [[i] for i in by_switch.get(None, [])]
        info.update({"pcie_groups": sorted(groups),
                     "nvlink_matrix": None if "nvlink" in t.unknown(host) else q.nvlink_matrix(t, host),
                     "uplinks": q.uplinks(t, host), "nvlink_domains": q.domain_of(t, host)})
        if json_out:
            print_json(info)
            return
        for line in host_lines(info):
            typer.echo(line)
        typer.echo(f"  PCIe switch groups: {info['pcie_groups']}")
        typer.echo(f"  switch path: {' -> '.join('/'.join(lv) for lv in info['uplinks']) or '-'}")
        return
    levels = q.oversubscription(t)
    domains = q.nvlink_domains(t)
    hosts = t.host_names()
    # Slurm's topology files state neither the cables' rates nor how many join two switches: the graph's one
    # stand-in cable per link says nothing of the bandwidth, so neither GB/s nor oversubscription is shown
    rated = "link_rates" not in t.fabric_unknown
    info = {
        "name": t.name, "hosts": len(hosts), "hostlist": compress(hosts) if hosts else "",
        "gpus": t.count("gpu"), "switches": len(t.switches()),
        "levels": [asdict(lv) if rated else {**asdict(lv), "down_gbytes": None, "up_gbytes": None, "ratio": None,
                                             "worst": None} for lv in levels],
        "unknown": list(t.fabric_unknown),
        "nvlink_domains": {"count": len(domains), "multi_node": [asdict(d) for d in domains if d.multi_node]},
        "blocks": [{"name": n, "hosts": compress(h) if h else ""} for n, h in t.declared_blocks()],
        "block_sizes": list(t.block_sizes),
    }
    if json_out:
        print_json(info)
        return
    typer.echo(f"topology {t.name}: {info['hosts']} hosts ({info['hostlist']}), {info['gpus']} GPUs, "
               f"{info['switches']} switches")
    for lv in levels:
        if not rated:
            typer.echo(f"  level {lv.level}: {lv.switches} switches")
            continue
        ratio = f"{lv.ratio:.3g}:1 oversubscribed (worst switch {lv.worst:.3g}:1)" if lv.ratio else "top level"
        typer.echo(f"  level {lv.level}: {lv.switches} switches, {lv.down_gbytes:g} GB/s down, "
                   f"{lv.up_gbytes:g} GB/s up, {ratio}")
    for f in t.fabric_unknown:
        typer.echo(f"  unknown: {f}: {FABRIC_UNKNOWN_FACTS[f]}")
    multi = [d for d in domains if d.multi_node]
    if info["blocks"]:   # declared by a topology file: groups of hosts, whatever joins them
        sizes = ",".join(map(str, t.block_sizes)) or "not given"
        typer.echo(f"  blocks: {len(info['blocks'])} declared (BlockSizes {sizes}): "
                   + ", ".join(f"{b['name']} {b['hosts'] or '(empty)'}" for b in info["blocks"][:4])
                   + (f" and {len(info['blocks']) - 4} more" if len(info["blocks"]) > 4 else ""))
    typer.echo(f"  NVLink domains: {len(domains)} ({len(multi)} spanning hosts)")
    for d in multi:
        typer.echo(f"    {d.name}: {compress(d.hosts)}, {d.gpus} GPUs")


@topo_app.command("path")
def path(a: str = typer.Argument(..., help="First host"), b: str = typer.Argument(..., help="Second host"),
         source: Optional[str] = SourceArg, site: Optional[str] = SiteOpt, json_out: bool = JsonOpt) -> None:
    """Hops and bottleneck bandwidth between two hosts."""
    from slurmtools.topology import queries as q

    t = load_topology(source, site)
    try:
        p = q.path_between(t, a, b)
    except ValueError as exc:
        fail(str(exc))
    if p is not None and "link_rates" in t.fabric_unknown:   # the hops are known, the stand-in rate is not a fact
        from dataclasses import replace

        p = replace(p, gbytes=None)
    if json_out:
        print_json(None if p is None else {"hops": p.hops, "gbytes": p.gbytes, "via": list(p.via)})
        return
    if p is None:
        fail(f"no cable path between {a} and {b}", code=1)
    neck = ("unknown (the link rates are not known)" if "link_rates" in t.fabric_unknown
            else "-" if p.gbytes is None else f"{p.gbytes:g} GB/s")
    typer.echo(f"{a} -> {b}: {p.hops} hops via {' -> '.join(p.via) or '-'}, bottleneck {neck}")


@topo_app.command("export")
def export(source: Optional[str] = SourceArg, site: Optional[str] = SiteOpt,
           fmt: str = typer.Option(..., "--format", "-f", help=" | ".join(FORMATS)),
           output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write here instead of stdout"),
           host: Optional[str] = typer.Option(None, "--host", help="svg/png: draw this host's inside instead of "
                                                                   "the fabric"),
           gres_files: str = typer.Option("/dev/nvidia{minor}", "--gres-files",
                                          help="gres.conf: device file pattern: {minor} is the GPU's device minor "
                                               "(an NVML capture states it), {index} states that the files follow "
                                               "the GPU index"),
           block_sizes: Optional[str] = typer.Option(None, "--block-sizes", help="block: BlockSizes, e.g. 18,36"),
           assume_no_nvlink: bool = typer.Option(False, "--assume-no-nvlink",
                                                 help="gres.conf: write Links= with no NVLink for hosts whose "
                                                      "NVLinks the source does not state"),
           ) -> None:
    """Write the topology as a Slurm config, a graph file or a picture."""
    if fmt not in FORMATS:
        fail(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    t = load_topology(source, site)
    data: str | bytes
    if fmt == "topology.conf":
        from slurmtools.topology.render_slurm import render_topology_conf

        data = render_topology_conf(t)
    elif fmt == "block":
        from slurmtools.topology.render_slurm import render_block

        data = render_block(t, _block_sizes(block_sizes))
    elif fmt == "gres.conf":
        from slurmtools.topology.render_slurm import gres_gaps, render_gres_conf

        data = render_gres_conf(t, gres_files, assume_no_nvlink=assume_no_nvlink)
        for gap in gres_gaps(t):
            typer.echo(f"slurmtools: warning: {gap}", err=True)
    elif fmt == "features":
        from slurmtools.topology.render_slurm import render_features

        data = render_features(t)
    elif fmt == "json":
        from slurmtools.topology.render_graph import render_json

        data = render_json(t)
    elif fmt == "graphml":
        from slurmtools.topology.render_graph import render_graphml

        data = render_graphml(t)
    else:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            fail("--format svg/png needs matplotlib (pip install matplotlib)")
        from slurmtools.topology.render_picture import render_fabric_picture, render_node_picture

        hosts = t.host_names()
        if host is None and not t.switches() and len(hosts) == 1:
            host = hosts[0]  # a single-host capture: its inside is the only picture there is
        try:
            if host is not None:
                _host(t, host)
                data = render_node_picture(t, host, fmt)
            else:
                data = render_fabric_picture(t, fmt)
        except ValueError as exc:
            fail(str(exc))
    if output is not None:
        try:
            if isinstance(data, bytes):
                output.write_bytes(data)
            else:
                output.write_text(data)
        except OSError as exc:
            fail(f"--output: cannot write {output}: {exc.strerror or exc}")
        return
    if isinstance(data, bytes):
        if sys.stdout.isatty():
            fail(f"--format {fmt} is binary; give --output FILE or redirect stdout")
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        sys.stdout.write(data)


def _report(findings, json_out: bool, ok: str, compared: dict | None = None) -> None:
    """One line per finding (or `ok`), exit 1 if any. `compared` (lint --gres): what the gres.conf check compared,
    printed first, and with --json the output is {"gres": compared, "findings": [...]}."""
    rows = [{"code": f.code, "subject": f.subject, "message": f.message} for f in findings]
    if json_out:
        print_json(rows if compared is None else {"gres": compared, "findings": rows})
    else:
        if compared is not None:
            typer.echo(compared["summary"])
        for f in findings:
            typer.echo(f.line())
        if not findings:
            typer.echo(ok)
    if findings:
        raise typer.Exit(1)


@topo_app.command("diff")
def diff(discovered: str = typer.Argument(..., help="The discovered topology (JSON, or a provider's input)"),
         declared: Optional[str] = typer.Option(None, "--declared", help="Declared topology (default: the "
                                                                          "site's fabric)"),
         site: Optional[str] = SiteOpt, json_out: bool = JsonOpt) -> None:
    """Compare a discovered topology with the declared one; one line per difference, exit 1 if any."""
    from slurmtools.topology.checks import diff as run_diff

    want = load_topology(declared, site)
    have = load_topology(discovered, site)
    _report(run_diff(want, have), json_out, f"{discovered}: agrees with {want.name}")


def gres_text(path: Path) -> str:
    """A gres.conf's text as slurmd reads its bytes: UTF-8 whatever the locale, no newline translation (a lone CR
    ends no line for slurmd, so line numbers stay slurmd's), a byte-order mark kept (slurmd stops at it, so the
    reader says so). What cannot be read is refused in one line that starts with the path."""
    from slurmtools.errors import ConfigError

    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "", f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None


@topo_app.command("lint")
def lint(source: Optional[str] = SourceArg, site: Optional[str] = SiteOpt,
         gres: Optional[Path] = typer.Option(None, "--gres", help="Check this gres.conf's GPUs, Cores= and Links= "
                                                                  "against the topology (says what it compared; "
                                                                  "fails when nothing matched)"),
         json_out: bool = JsonOpt) -> None:
    """Check one topology (and optionally a gres.conf against it); one line per problem, exit 1 if any."""
    from slurmtools.topology.checks import compare_gres, lint as run_lint

    t = load_topology(source, site)
    findings = run_lint(t)
    compared = None
    if gres is not None:
        c = compare_gres(t, gres_text(gres), str(gres))
        summary = f"{gres}: {c.summary(t.name)}"
        if c.gpus == 0 and not c.nothing_to_compare:
            fail(f"--gres: nothing matched: {summary}")
        findings += c.findings
        compared = {"summary": summary, "hosts": c.hosts, "gpus": c.gpus, "cores": c.cores, "links": c.links,
                    "absent_nodes": c.absent, "absent_lines": c.absent_lines, "no_gpu_hosts": c.no_gpus,
                    "left_to_autodetect": c.left_to_driver, "matched_by_index": c.by_index,
                    "skipped_lines": [{"line": n, "why": w} for n, w in c.conf.skipped]}
    _report(findings, json_out, f"topology {t.name}: no problems found", compared)
