"""`dot` in torch code as one `bmm`, where its dims allow.

`torch.einsum` picks its own operand layouts; for an attention step (keys [B, T, K] against a
query [B, K]) it runs a matrix-vector `bmm`, and the backward's transposed operands take
torch's slow strided paths: in a training step these einsums cost about a third more than the
`bmm` a PyTorch engineer writes (bench/bench_train.py). Here the operand without dims of its
own (a vector over the reduced dim) goes left as a row [*, 1, R] against the other as
[*, R, N] (a transposed view if need be), the layout whose forward and backward are fast.
"""

from __future__ import annotations

from netc.ops.align import align_code


def dot_bmm_code(
    a: str, a_dims: tuple[str, ...], b: str, b_dims: tuple[str, ...], axes: list[str], out_dims: tuple[str, ...]
) -> str | None:
    """`bmm` code of `dot(a, b, reduce=axes)` with result dims `out_dims`, or None (einsum then):
    one reduced dim, one dim both share besides it (the batch), at most one dim of each's own.
    Summing over the same products in another order changes results by rounding only."""
    if len(axes) != 1:
        return None
    (r,) = axes
    shared = [d for d in out_dims if d in a_dims and d in b_dims]
    a_own = [d for d in a_dims if d not in b_dims]
    b_own = [d for d in b_dims if d not in a_dims]
    if len(shared) != 1 or len(a_own) > 1 or len(b_own) > 1 or not (a_own or b_own):
        return None  # more than one dim of its own, or two vectors (a product summed): einsum
    if a_own and b_own:
        left, right = align_code(a, a_dims, (*shared, *a_own, r)), align_code(b, b_dims, (*shared, r, *b_own))
        return align_code(f"torch.bmm({left}, {right})", (*shared, *a_own, *b_own), out_dims)
    (vec, vec_dims), (mat, mat_dims) = ((b, b_dims), (a, a_dims)) if a_own else ((a, a_dims), (b, b_dims))
    own = a_own or b_own
    left = f"{align_code(vec, vec_dims, (*shared, r))}.unsqueeze(1)"
    right = align_code(mat, mat_dims, (*shared, r, *own))
    return align_code(f"torch.bmm({left}, {right}).squeeze(1)", (*shared, *own), out_dims)


def dot_grouped_code(
    h: str, h_dims: tuple[str, ...], s: str, s_dims: tuple[str, ...], r: str, out_dims: tuple[str, ...], group: str
) -> str | None:
    """`bmm` code of a `dot` over `r` of `h`, whose batch rows are `group` rows per row of `s`'s
    (a beam search's hypotheses, b * group + k), with `s` (what the search reads from before its
    loop: keys, encoder states), without repeating `s` per row of `h`: `h`'s rows of one sequence
    as one [group, R] block against that sequence's [R, N] of `s`. The same products, summed over
    `r` as the one-row `bmm` sums them; None where the dims are not `h` a vector over `r` (and the
    batch) and `s` one more dim of its own."""
    shared = [d for d in out_dims if d in h_dims and d in s_dims]
    h_own = [d for d in h_dims if d not in s_dims]
    s_own = [d for d in s_dims if d not in h_dims]
    if shared != ["batch"] or h_own or len(s_own) != 1:
        return None
    left = f"{align_code(h, h_dims, ('batch', r))}.unflatten(0, (-1, {group}))"
    right = align_code(s, s_dims, ("batch", r, *s_own))
    return align_code(f"torch.bmm({left}, {right}).flatten(0, 1)", ("batch", *s_own), out_dims)
