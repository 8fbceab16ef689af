"""Eager mode's parameters for a module the compiled graph has none for."""

from __future__ import annotations

import torch

from netc.ir.dims import DimTable
from netc.ir.model import Value
from netc.ops import OpDef


def throwaway_params(opdef: OpDef, dt: DimTable, args: list[Value], attrs: dict) -> dict[str, torch.Tensor]:
    """Parameters of a module whose result nothing reads (no live output depends on them): fresh
    ones of the shapes its inputs give, drawn from a generator of their own so that the
    parameters of live modules stay as they are."""
    gen = torch.Generator().manual_seed(0)
    out = {}
    for role, dims in opdef.params(dt, args, attrs).items():
        init = opdef.init_of(role, dims)
        t = torch.empty(*(dt[d].size for d in dims))
        if init == "glorot":
            torch.nn.init.xavier_uniform_(t, generator=gen)
        else:
            t.fill_(1.0 if init == "ones" else 0.0)
        out[role] = t
    return out
