"""InfiniBand link rates and the edge that carries them: what the fabric file, the ibnetdiscover reader and the
planner's view need to know about a cable, without the graph (and so without importing networkx).
Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

# IB lane rate in GB/s of data per direction after encoding (4xNDR = 4 * 12.5 = 50 GB/s = 400 Gb/s).
IB_LANE_GBYTES = {"SDR": 0.25, "DDR": 0.5, "QDR": 1.0, "FDR10": 1.25, "FDR": 1.7, "EDR": 3.125,
                  "HDR": 6.25, "NDR": 12.5, "XDR": 25.0}
#: lanes an IB port can run (the spec's 1x, 2x, 4x, 8x and 12x); 0x or 3x is a damaged dump or a typo, not a link
IB_WIDTHS = (1, 2, 4, 8, 12)
IB_WIDTH_TEXTS = tuple(map(str, IB_WIDTHS))  # as dumps and files write them: "4" of 4xNDR


@dataclass(frozen=True)
class IbLink:
    """`count` parallel InfiniBand cables of `width` lanes at `speed` (4xNDR)."""
    kind: ClassVar[str] = "ib"
    width: int = 4
    speed: str = "NDR"
    count: int = 1

    @property
    def gbytes(self) -> float:
        return self.count * self.width * IB_LANE_GBYTES[self.speed]


def ib_link(spec: str, count: int = 1) -> IbLink:
    """'4xNDR' -> IbLink(4, 'NDR'). Raises ValueError naming the accepted speeds."""
    s = spec.strip().upper()
    width, _, speed = s.partition("X")
    if width not in IB_WIDTH_TEXTS or speed not in IB_LANE_GBYTES:
        raise ValueError(f'expected an IB link like "4xNDR" (widths {", ".join(IB_WIDTH_TEXTS)}; speeds '
                         f'{", ".join(IB_LANE_GBYTES)}), got {spec!r}')
    return IbLink(int(width), speed, count)



# ------------------------------------------------------------------------------------------------- the graph
