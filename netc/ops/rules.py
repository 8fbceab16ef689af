"""Dim-rule pieces shared by the op definitions."""

from __future__ import annotations

from netc.ir.dims import DimError, DimTable
from netc.ir.model import Value


def union(dt: DimTable, args: list[Value]) -> tuple[str, ...]:
    """All dims of the operands, in canonical order (broadcasting by name)."""
    return dt.canonical([d for a in args for d in a.dims])


def check_out_dim(dt: DimTable, module: str, out, taken: tuple[str, ...]) -> None:
    """`Module(out_dim)`: out_dim is a static dim that is none of `taken` (input dims it must not repeat)."""
    if not isinstance(out, str) or out not in dt.dims or dt[out].kind != "static":
        raise DimError(f"{module}(out_dim) needs a static dim")
    if out in taken:
        raise DimError(f"{module} output dim `{out}` is already a dim of its input")
