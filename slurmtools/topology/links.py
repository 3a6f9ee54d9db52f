"""InfiniBand link rates and the edge that carries them: what the fabric file, the ibnetdiscover reader and the
planner's view need to know about a cable, without the graph (and so without importing networkx).
Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Iterable

# IB lane rate in GB/s of data per direction after encoding (4xNDR = 4 * 12.5 = 50 GB/s = 400 Gb/s).
IB_LANE_GBYTES = {"SDR": 0.25, "DDR": 0.5, "QDR": 1.0, "FDR10": 1.25, "FDR": 1.7, "EDR": 3.125,
                  "HDR": 6.25, "NDR": 12.5, "XDR": 25.0}
#: lanes an IB port can run (the spec's 1x, 2x, 4x, 8x and 12x); 0x or 3x is a damaged dump or a typo, not a link
IB_WIDTHS = (1, 2, 4, 8, 12)
IB_WIDTH_TEXTS = tuple(map(str, IB_WIDTHS))  # as dumps and files write them: "4" of 4xNDR


@dataclass(frozen=True)
class IbLink:
    """`count` parallel InfiniBand cables of `width` lanes at `speed` (4xNDR).

    A bundle whose cables do not all run at one rate (one trained down to 4xHDR, or to 1x width) lists every
    cable's rate in `cables` (`ib_bundle` makes one): `width` and `speed` are then the rate most of its cables run
    at (the slower on a tie), `count` all its cables, and `gbytes` the sum of each cable's own rate. `cables` is
    None for a bundle at one rate."""
    kind: ClassVar[str] = "ib"
    width: int = 4
    speed: str = "NDR"
    count: int = 1
    cables: tuple[str, ...] | None = None     # each cable's rate ("4xNDR"), fastest first; None: all at one rate

    def __post_init__(self) -> None:
        if self.cables is not None:
            _check_cables(self)

    @property
    def gbytes(self) -> float:
        cables = self.cables
        if cables is None:
            return self.count * self.width * IB_LANE_GBYTES[self.speed]
        total = 0.0
        for width, speed, n in _tally(cables):
            total += n * width * IB_LANE_GBYTES[speed]
        return total

    def rates(self) -> tuple[tuple[int, str, int], ...]:
        """(width, speed, cables) for each rate the bundle's cables run at, fastest first."""
        return ((self.width, self.speed, self.count),) if self.cables is None else _tally(self.cables)


def _rate_key(width: int, speed: str) -> tuple[float, int]:
    """Fastest first; among rates of one speed in GB/s (4xHDR, 2xNDR), the wider first."""
    return -width * IB_LANE_GBYTES[speed], -width


def _tally(cables: tuple[str, ...]) -> tuple[tuple[int, str, int], ...]:
    """Rates and their cable counts, in the order of `cables` (fastest first)."""
    out: list[list] = []
    for spec in cables:
        if out and out[-1][3] == spec:
            out[-1][2] += 1
        else:
            width, _, speed = spec.partition("x")
            out.append([int(width), speed, 1, spec])
    return tuple((w, sp, n) for w, sp, n, _ in out)


def _check_cables(link: IbLink) -> None:
    """Put `cables` in its one order (fastest first) and refuse a bundle whose width, speed and count are not
    what its cables say; a bundle at one rate keeps `cables` None, so that equal bundles compare equal."""
    if isinstance(link.cables, str) or not all(isinstance(spec, str) for spec in link.cables):
        raise ValueError(f'an IB bundle\'s cables are rates like "4xNDR", one per cable, got {link.cables!r}')
    rates = [ib_link(spec) for spec in link.cables]
    tally: dict[tuple[int, str], int] = {}
    for r in rates:
        tally[r.width, r.speed] = tally.get((r.width, r.speed), 0) + 1
    if not tally:
        raise ValueError("an IB bundle with an empty cable list")
    main = main_rate(tally)
    if (link.width, link.speed, link.count) != (main[0], main[1], len(rates)):
        raise ValueError(f"IB bundle of {len(rates)} cable(s) at {', '.join(sorted(set(link.cables)))}: expected "
                         f"width {main[0]}, speed {main[1]} and count {len(rates)} (the rate most of its cables "
                         f"run at, the slower on a tie, and all its cables), got {link.width}, {link.speed} and "
                         f"{link.count}")
    order = sorted(tally, key=lambda r: _rate_key(*r))
    object.__setattr__(link, "cables", None if len(order) == 1 else
                       tuple(f"{w}x{sp}" for w, sp in order for _ in range(tally[w, sp])))


def main_rate(tally: dict[tuple[int, str], int]) -> tuple[int, str]:
    """(width, speed) that names a bundle, given its cables per rate: the rate most of them run at, the slower on
    a tie (then the narrower: 2xNDR before 4xHDR), whatever order the cables come in."""
    return max(tally, key=lambda r: (tally[r], *_rate_key(*r)))


def ib_bundle(rates: Iterable[tuple[int, str, int]]) -> IbLink:
    """The edge of parallel cables given as (width, speed, cables) per rate, in any order and repeats allowed:
    IbLink(4, "NDR", 3) when all run at 4xNDR; with several rates, each cable at its own rate (`IbLink.cables`)."""
    tally: dict[tuple[int, str], int] = {}
    for width, speed, n in rates:
        ib_link(f"{width}x{speed}")          # a known width and speed, or ValueError naming them
        if n > 0:
            tally[width, speed] = tally.get((width, speed), 0) + n
    if not tally:
        raise ValueError("an IB bundle needs at least one cable")
    if len(tally) == 1:
        (width, speed), n = next(iter(tally.items()))
        return IbLink(width, speed, n)
    width, speed = main_rate(tally)
    cables = tuple(f"{w}x{sp}" for (w, sp), n in tally.items() for _ in range(n))
    return IbLink(width, speed, sum(tally.values()), cables)


def ib_link(spec: str, count: int = 1) -> IbLink:
    """'4xNDR' -> IbLink(4, 'NDR'). Raises ValueError naming the accepted speeds."""
    s = spec.strip().upper()
    width, _, speed = s.partition("X")
    if width not in IB_WIDTH_TEXTS or speed not in IB_LANE_GBYTES:
        raise ValueError(f'expected an IB link like "4xNDR" (widths {", ".join(IB_WIDTH_TEXTS)}; speeds '
                         f'{", ".join(IB_LANE_GBYTES)}), got {spec!r}')
    return IbLink(int(width), speed, count)



# ------------------------------------------------------------------------------------------------- the graph
