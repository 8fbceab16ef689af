"""The op registry: importing this package registers every op."""

from netc.ops import cells as _cells  # noqa: F401  (registers the recurrent cells)
from netc.ops import defs as _defs  # noqa: F401  (registers the ops)
from netc.ops import nn as _nn  # noqa: F401  (registers the nn ops)
from netc.ops import search as _search  # noqa: F401  (registers choice)
from netc.ops import sequence as _sequence  # noqa: F401  (registers the ops passes make over sequences)
from netc.ops.base import BY_FN_NAME, REGISTRY, OpDef

__all__ = ["BY_FN_NAME", "REGISTRY", "OpDef"]
