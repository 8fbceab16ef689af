"""The op registry: importing this package registers every op and every loop iterable
(`netc.ops.iterables`): each module of the package in name order, so an op file (or a loop
kind's) registers by being here, listed nowhere else."""

import importlib
import pkgutil

from netc.ops.base import BY_FN_NAME, REGISTRY, OpDef
from netc.ops.iterables import ITERABLES, IterableDef

# functions the torch module's helpers and eager mode read from source or run, which import
# torch: the op files that use them import them when they run
_NOT_OP_FILES = {"ctc_search"}

for _m in pkgutil.iter_modules(__path__):
    if _m.name not in _NOT_OP_FILES:
        importlib.import_module(f"{__name__}.{_m.name}")

__all__ = ["BY_FN_NAME", "ITERABLES", "REGISTRY", "IterableDef", "OpDef"]
