"""Axis alignment by dim name, shared by the torch emitter (as code) and eager mode (on tensors)."""

from __future__ import annotations


def align_plan(src: tuple[str, ...], dst: tuple[str, ...]) -> tuple[list[int] | None, list[int]]:
    """How to bring a tensor with dims `src` to broadcast against `dst` (dims ⊆ dst).

    Returns (permutation or None, positions in `dst` order where a size-1 axis is inserted).
    """
    missing = [d for d in src if d not in dst]
    if missing:
        raise ValueError(f"dims {missing} not in target {dst}")
    order = [d for d in dst if d in src]
    perm = None if list(src) == order else [src.index(d) for d in order]
    # torch broadcasting aligns trailing axes, so leading missing dims need no insertion
    first = next((i for i, d in enumerate(dst) if d in src), len(dst))
    inserts = [i - first for i, d in enumerate(dst) if d not in src and i > first]
    return perm, inserts


def align_code(expr: str, src: tuple[str, ...], dst: tuple[str, ...]) -> str:
    perm, inserts = align_plan(src, dst)
    if perm is not None:
        expr = f"{expr}.permute({', '.join(map(str, perm))})"
    if inserts:
        idx = []
        pos = 0
        n_total = len(src) + len(inserts)
        for i in range(n_total):
            if i in inserts:
                idx.append("None")
            else:
                idx.append(":")
                pos += 1
        while idx and idx[-1] == ":":
            idx.pop()
        expr = f"{expr}[{', '.join(idx)}]"
    return expr


def align_tensor(t, src: tuple[str, ...], dst: tuple[str, ...]):
    perm, inserts = align_plan(src, dst)
    if perm is not None:
        t = t.permute(*perm)
    for i in inserts:
        t = t.unsqueeze(i)
    return t


def where_valid(x: str, valid: str, fill: str) -> str:
    """Code for x where `valid` holds, else `fill`. `torch.where`, not `masked_fill`: torch.export
    traces `masked_fill` as a `where` made contiguous, whose strides fix sizes of 1 (a derived
    dim, e.g. after a strided convolution, then must never have one frame)."""
    return f"torch.where({valid}, {x}, {fill})"
