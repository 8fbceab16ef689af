"""A block of the RETURNN config being emitted: the network, or a `rec` layer's unit."""

from __future__ import annotations

from collections import Counter

from netc.ir.model import Loop, Node, Op
from netc.naming import Namespace
from netc.ops.base import Carry


class Block:
    def __init__(self, reserved: set[str], dims: dict[str, str], in_unit: bool = False, path: tuple[str, ...] = ()):
        self.in_unit = in_unit
        self.path = path  # rec layer names down to this block: () for the network, ("rec",) for its unit
        # IR dim -> the config's dim variable here: inside a loop over `time`, a value that has
        # `time` holds the whole sequence, which RETURNN must see as a dim other than the loop's
        self.dims = dims
        self.ns = Namespace(reserved, python=False, letter_first=True)
        self.layers: dict[str, dict] = {}
        self.refs: dict[int, str] = {}
        self.layer_of: dict[int, str] = {}  # value id -> its own layer in this block (not a `base:`/`prev:` ref)
        self.retagged: dict[tuple, str] = {}  # (value id, tag changes) -> its `reinterpret_data` layer
        self.carries: dict[int, Carry] = {}  # carried value id -> its initial and next value
        self.read: Counter = Counter()  # in a unit: reads of the body's values (count_uses_in_loop)
        # in a unit: its inner loops' rec layers to keep in its loop (`RecLowering._body`)
        self.keep_nested: set[str] = set()
        # in a chunked loop's unit: its chunk dim -> the layer giving it the step's lengths
        self.dim_source: dict[str, str] = {}


def loop_names(nodes: list[Node]) -> list[str]:
    """The rec layers' names, chosen by a pass (a fused op's loop too: this target may emit it)."""
    return [n.name for n in nodes if isinstance(n, Loop)] + [
        name for n in nodes if isinstance(n, Op) for name in loop_names(n.unfused)
    ]
