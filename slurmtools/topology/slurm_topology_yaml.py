"""Provider: import Slurm's topology.yaml (25.05 and later): a list of named topologies, each a tree, a block
topology or flat, one of them the cluster default; partitions choose theirs in slurm.conf.

Each topology becomes the `TopologyConf` that the topology.conf reader makes, through the same
`checked_conf`, so both files are judged by one set of rules and become a graph by one `to_topology`. What only
this format can get wrong is refused here, naming the line and the field: keys Slurm does not know (it warns
and skips them, so a typo such as `node:` silently empties a switch), a list where Slurm wants a hostlist
string, none or several of tree/block/flat, several cluster defaults (Slurm's pick among them is not defined).

Scalars are read as text, as Slurm's YAML reader does: `nodes: 001` is the host 001, not the number 1, and
`cluster_default` takes Slurm's words (true/yes/on/t/y and their opposites). Aliases are refused, as Slurm
refuses them, and so are the type tags Slurm converts a scalar by (`!!int`, `!!null`...). Hostlists split where
Slurm's do (blanks, tabs, newlines, commas). Pure: takes text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

# PyYAML is imported here only: this module is loaded by `topo import --from topology.yaml` and `load_topology`,
# never by the CLI's start-up.
import yaml

from slurmtools.errors import ConfigError, ParseError, unknown_key, whole_number
from slurmtools.topology.slurm_topology_conf import (ConfBlock, ConfSwitch, Spelling, TopologyConf, checked_conf,
                                                      foreign_blank, slurm_hostlist)

KINDS = ("tree", "block", "flat")
#: kinds of topology newer Slurm releases read that slurmtools does not import (a file may hold them beside a tree
#: or block one: only choosing one of them is refused)
NOT_IMPORTED = {"ring": "a ring topology (Slurm 26.05's topology/ring)",
                "torus3d": "a 3-D torus topology (Slurm 26.05's topology/torus3d)"}
#: keys of `flat:` as a mapping (Slurm 26.05: `flat: {alpha_step_rank: true}` orders a step's nodes by name)
_FLAT_KEYS = ("alpha_step_rank",)
YAML_WORDS = Spelling(switch="switch", nodes="nodes", children="children", block_sizes="block_sizes",
                      entry="entry")

_TOPOLOGY_KEYS = ("topology", "cluster_default", "tree", "block", "flat", *NOT_IMPORTED)
_SWITCH_KEYS = ("switch", "children", "nodes")
_BLOCK_KEYS = ("block", "nodes")
# Slurm's text-to-boolean words (src/common/data.c), compared without case
_TRUE = {"y", "yes", "t", "true", "on"}
_FALSE = {"n", "no", "f", "false", "off"}


@dataclass(frozen=True)
class NamedTopology:
    """One entry of topology.yaml: its name, kind, whether it is the cluster default, and what it declares."""

    name: str
    kind: str  # tree | block | flat, or one of NOT_IMPORTED
    cluster_default: bool
    conf: TopologyConf  # empty for flat (a flat topology names no switches, blocks or hosts) and NOT_IMPORTED
    line: int


@dataclass(frozen=True)
class TopologyYaml:
    """Every topology of one topology.yaml, in file order."""

    source: str
    topologies: tuple[NamedTopology, ...]

    def select(self, name: str | None = None) -> NamedTopology:
        """The topology called `name`, else the cluster default, else the only one. Several topologies and none
        marked cluster_default is refused: Slurm would use whichever sorts first, which the file does not say."""
        names = ", ".join(t.name for t in self.topologies)
        if name is not None:
            for t in self.topologies:
                if t.name == name:
                    return t
            raise ConfigError(self.source, "topology", f"no topology named {name!r} (the file has: {names})")
        default = [t for t in self.topologies if t.cluster_default]
        if default:
            return default[0]
        if len(self.topologies) == 1:
            return self.topologies[0]
        raise ConfigError(self.source, "cluster_default", f"none of the topologies ({names}) is marked "
                                                          "cluster_default: true; name one with --topology")


#: the tags Slurm's YAML serializer converts a scalar by (serializer_yaml.c `tags[]`, less !!str: text either way)
_CONVERTING_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("null", "seq", "map", "int", "float", "bool")}


class _Loader(yaml.BaseLoader):
    """PyYAML's loader that resolves no types (every scalar is text, as in Slurm) and refuses aliases and the
    yaml.org type tags Slurm converts a scalar by."""

    source = "topology.yaml"

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise ParseError(self.source, mark.line + 1, "a YAML alias (*name): Slurm does not read aliases",
                             mark.column + 1)
        event = self.peek_event()
        if isinstance(event, yaml.ScalarEvent) and event.tag in _CONVERTING_TAGS:
            # Slurm's serializer converts a scalar to these tags' types (`!!null x` is no value, `!!int x` fails)
            # and reads one under any other tag as text; BaseLoader would drop the tag without a word
            mark = event.start_mark
            raise ParseError(self.source, mark.line + 1, f"a YAML tag (!!{event.tag.rsplit(':', 1)[1]}): Slurm "
                                                         "converts the value to the tag's type; write it untagged",
                             mark.column + 1)
        return super().compose_node(parent, index)


def _compose(text: str, source: str) -> yaml.Node | None:
    """The document as PyYAML's nodes (which keep their line and column); nothing is constructed from them."""
    try:
        loader = _Loader(text)
        loader.source = source
        try:
            return loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ParseError(source, line, f"not YAML: character U+{exc.character:04X} is not allowed in YAML") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = ", ".join(w for w in (exc.context, exc.problem) if w)
        raise ParseError(source, mark.line + 1 if mark else None, f"not YAML: {what}",
                         mark.column + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise ParseError(source, None, f"not YAML: {exc}") from None
    except RecursionError:
        raise ParseError(source, None, "not read: nested too deeply") from None


_SHAPES = {yaml.ScalarNode: "a single value", yaml.SequenceNode: "a list", yaml.MappingNode: "a mapping"}


class _Reader:
    """Walks the composed YAML nodes into checked topologies; every refusal names the line, column and field."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, node: yaml.Node, where: str, message: str) -> NoReturn:
        mark = node.start_mark
        raise ParseError(self.source, mark.line + 1, f"{where}: {message}", mark.column + 1)

    def mapping(self, node: yaml.Node, where: str, keys: tuple[str, ...]) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """key -> (key node, value node), refusing other shapes, unknown keys and keys given twice."""
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, where, f"expected a mapping with keys {', '.join(keys)}, found {_SHAPES[type(node)]}")
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for k, v in node.value:
            name = k.value if isinstance(k, yaml.ScalarNode) else None
            if name is None:
                self.fail(k, where, f"a key that is {_SHAPES[type(k)]} (keys here: {', '.join(keys)})")
            if name not in keys:
                self.fail(k, f"{where}.{name}", unknown_key(name, list(keys)))
            if name in out:
                self.fail(k, where, f"{name} given twice (first at line {out[name][0].start_mark.line + 1})")
            out[name] = (k, v)
        return out

    def text(self, node: yaml.Node, where: str, wanted: str) -> str:
        if not isinstance(node, yaml.ScalarNode):
            self.fail(node, where, f"expected {wanted}, found {_SHAPES[type(node)]}")
        if not node.value.strip():
            self.fail(node, where, f"has no value (expected {wanted})")
        why = foreign_blank(node.value)
        if why:   # `nodes: n1<U+00A0>n2` is one host to Slurm's hostlist, and was two here
            self.fail(node, where, why)
        return node.value

    def flag(self, node: yaml.Node, where: str) -> bool:
        word = self.text(node, where, "true or false").lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        self.fail(node, where, f"expected true or false, found {node.value!r}")

    def flat(self, node: yaml.Node, where: str) -> bool:
        """`flat: true`, or Slurm 26.05's `flat:` mapping of options (`alpha_step_rank: true`), which is flat too:
        the options order a step's nodes and name no switch or host."""
        if not isinstance(node, yaml.MappingNode):
            return self.flag(node, f"{where}.flat")
        for key, (_k, value) in self.mapping(node, f"{where}.flat", _FLAT_KEYS).items():
            self.flag(value, f"{where}.flat.{key}")
        return True

    def hostlist(self, node: yaml.Node, where: str) -> tuple[str, ...]:
        value = self.text(node, where, "a hostlist string like gpu[01-04]")
        try:   # Slurm's hostlist splits at blanks as at commas (hostlist.c `hostlist_create`: "\t, \n")
            return tuple(slurm_hostlist(value))
        except ValueError as exc:
            self.fail(node, where, str(exc))

    def items(self, node: yaml.Node, where: str, what: str) -> list[yaml.Node]:
        """A list of entries; one mapping alone is one entry, as Slurm reads it."""
        if isinstance(node, yaml.MappingNode):
            return [node]
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, where, f"expected a list of {what}, found {_SHAPES[type(node)]}")
        if not node.value:
            self.fail(node, where, f"an empty list: Slurm refuses a topology without {what}")
        return node.value

    def topologies(self, root: yaml.Node | None) -> TopologyYaml:
        if root is None:
            raise ParseError(self.source, None, "no topology: the file holds no YAML document")
        if isinstance(root, yaml.ScalarNode):
            self.fail(root, "top level", "expected a list of topologies (- topology: NAME ...), found a single value")
        entries = [root] if isinstance(root, yaml.MappingNode) else root.value
        if not entries:
            self.fail(root, "top level", "an empty list: no topology")
        out: list[NamedTopology] = []
        seen: dict[str, NamedTopology] = {}
        default_at: NamedTopology | None = None
        for i, node in enumerate(entries):
            t = self.topology(node, f"[{i}]")
            if t.name in seen:
                self.fail(node, t.name, f"topology {t.name} is already defined at line {seen[t.name].line}")
            if t.cluster_default and default_at is not None:
                key = next(k for k, _ in node.value if k.value == "cluster_default")
                self.fail(key, f"{t.name}.cluster_default", f"topology {default_at.name} (line {default_at.line}) "
                                                            "is the cluster default already; mark only one")
            seen[t.name] = t
            default_at = default_at or (t if t.cluster_default else None)
            out.append(t)
        return TopologyYaml(self.source, tuple(out))

    def topology(self, node: yaml.Node, where: str) -> NamedTopology:
        m = self.mapping(node, where, _TOPOLOGY_KEYS)
        if "topology" not in m:
            self.fail(node, where, "no topology: NAME (every topology needs its name)")
        name = self.text(m["topology"][1], f"{where}.topology", "the topology's name")
        where = name
        default = self.flag(m["cluster_default"][1], f"{where}.cluster_default") if "cluster_default" in m else False
        kinds = sorted((k for k in (*KINDS, *NOT_IMPORTED) if k in m and (k != "flat" or self.flat(m[k][1], where))),
                       key=lambda k: m[k][0].start_mark.index)
        if not kinds:
            self.fail(node, where, "none of tree, block or flat: true (a topology is exactly one of them)")
        if len(kinds) > 1:
            self.fail(m[kinds[1]][0], where, f"both {kinds[0]} and {kinds[1]} (a topology is exactly one of tree, "
                                             "block or flat)")
        kind = kinds[0]
        line = node.start_mark.line + 1
        if kind == "tree":
            conf = self.tree(m["tree"][1], f"{where}.tree")
        elif kind == "block":
            conf = self.block(m["block"][1], f"{where}.block")
        else:   # flat, or a kind of NOT_IMPORTED: refused only where it is the topology chosen (`select`)
            conf = TopologyConf(self.source, words=YAML_WORDS)
        return NamedTopology(name, kind, default, conf, line)

    def tree(self, node: yaml.Node, where: str) -> TopologyConf:
        m = self.mapping(node, where, ("switches",))
        if "switches" not in m:
            self.fail(node, where, "no switches (a tree lists its switches)")
        switches = [ConfSwitch(name, self.hosts(f, "nodes", at), self.hosts(f, "children", at), None, line, column)
                    for at, f, name, line, column in self.named(m["switches"][1], f"{where}.switches", "switch",
                                                                "switches", _SWITCH_KEYS)]
        return checked_conf(self.source, switches, words=YAML_WORDS)

    def block(self, node: yaml.Node, where: str) -> TopologyConf:
        m = self.mapping(node, where, ("block_sizes", "blocks"))
        if "blocks" not in m:
            self.fail(node, where, "no blocks (a block topology lists its blocks)")
        sizes: tuple[int, ...] = ()
        sizes_line = None
        if "block_sizes" in m:
            key, value = m["block_sizes"]
            sizes_line = key.start_mark.line + 1
            sizes = self.sizes(value, f"{where}.block_sizes")
        blocks = [ConfBlock(name, self.hosts(f, "nodes", at), line, column)
                  for at, f, name, line, column in self.named(m["blocks"][1], f"{where}.blocks", "block", "blocks",
                                                              _BLOCK_KEYS)]
        return checked_conf(self.source, (), blocks, sizes, sizes_line, YAML_WORDS)

    def named(self, node: yaml.Node, where: str, what: str, plural: str, keys: tuple[str, ...]):
        """(field path, fields, name, line, column) of each entry of a list of switches or blocks: a mapping whose
        key `what` names it; line and column are where that key is written."""
        for i, entry in enumerate(self.items(node, where, plural)):
            at = f"{where}[{i}]"
            fields = self.mapping(entry, at, keys)
            if what not in fields:
                self.fail(entry, at, f"no {what}: NAME (every {what} needs its name)")
            key, value = fields[what]
            name = self.text(value, f"{at}.{what}", f"the {what}'s name")
            yield at, fields, name, key.start_mark.line + 1, key.start_mark.column + 1

    def hosts(self, fields: dict[str, tuple[yaml.Node, yaml.Node]], key: str, at: str) -> tuple[str, ...]:
        """The hostlist under `key` of an entry, expanded; none when the entry has no such key."""
        return self.hostlist(fields[key][1], f"{at}.{key}") if key in fields else ()

    def sizes(self, node: yaml.Node, where: str) -> tuple[int, ...]:
        """block_sizes: a list of node counts; one number alone is a list of one, as Slurm reads it."""
        values = [node] if isinstance(node, yaml.ScalarNode) else None
        if values is None:
            if not isinstance(node, yaml.SequenceNode):
                self.fail(node, where, f"expected a list of node counts like [4, 16], found {_SHAPES[type(node)]}")
            values = node.value
        if not values:
            self.fail(node, where, "an empty list (leave block_sizes out, or give the base block size first)")
        out = []
        for i, v in enumerate(values):
            text = self.text(v, f"{where}[{i}]", "a node count")
            try:
                out.append(whole_number(text))
            except ValueError:
                self.fail(v, f"{where}[{i}]", f"expected a whole number of nodes, found {text!r}")
        return tuple(out)


def parse_topology_yaml(text: str, source: str = "topology.yaml") -> TopologyYaml:
    """Read topology.yaml. Raises ParseError naming the line and field on anything Slurm would read otherwise
    than the file seems to say, and on what `checked_conf` refuses."""
    return _Reader(source).topologies(_compose(text, source))
