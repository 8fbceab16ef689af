"""Dim-rule pieces shared by the op definitions."""

from __future__ import annotations

from netc.ir.dims import DimError, DimTable
from netc.ir.model import Value


def union(dt: DimTable, args: list[Value]) -> tuple[str, ...]:
    """All dims of the operands, in canonical order (broadcasting by name)."""
    return dt.canonical([d for a in args for d in a.dims])


def broadcast(dt: DimTable, args: list[Value], what: str) -> tuple[str, ...]:
    """The dims of an elementwise result. As in RETURNN, broadcasting is implicit only when one
    operand has all the dims of the others; anything else would silently make an outer
    product (`h + x_t` with [batch, hidden] and [batch, feat]), so it must be asked for."""
    dims = union(dt, args)
    if any(set(a.dims) >= set(dims) for a in args):
        return dims
    shown = " and ".join(f"[{', '.join(a.dims)}]" for a in args)
    lacking = [d for d in dims if d not in args[0].dims]
    raise DimError(
        f"{what} of {shown} would broadcast to [{', '.join(dims)}], but no operand has all of those dims; "
        f"if that is meant, expand an operand first, e.g. the first by `expand(a, {lacking[0]})`"
    )


def check_out_dim(dt: DimTable, module: str, out, taken: tuple[str, ...]) -> None:
    """`Module(out_dim)`: out_dim is a static dim that is none of `taken` (input dims it must not repeat)."""
    if not isinstance(out, str) or out not in dt.dims or dt[out].kind != "static":
        raise DimError(f"{module}(out_dim) needs a static dim")
    if out in taken:
        raise DimError(f"{module} output dim `{out}` is already a dim of its input")
