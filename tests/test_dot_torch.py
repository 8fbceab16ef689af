"""`dot` lowered to one `bmm` in torch code (netc/ops/dot_torch.py): the same values and the same
gradients as the einsum it replaces, for each layout it takes; the layouts it leaves to einsum."""

from __future__ import annotations

import pytest
import torch

from netc.ops.dot_torch import dot_bmm_code

SIZES = {"batch": 3, "time": 5, "key": 4, "out": 6, "heads": 2}
LETTERS = {d: "abcde"[i] for i, d in enumerate(SIZES)}


def _einsum(a_dims, b_dims, out_dims) -> str:
    def spec(dims):
        return "".join(LETTERS[d] for d in dims)

    return f"{spec(a_dims)},{spec(b_dims)}->{spec(out_dims)}"


@pytest.mark.parametrize(
    ("a_dims", "b_dims", "axis", "out_dims", "call"),
    [
        # attention energies: keys against a query vector (the vector goes left, keys transposed)
        (("batch", "time", "key"), ("batch", "key"), "key", ("batch", "time"), "torch.bmm(b.unsqueeze(1), a.permute"),
        # attention context: weights (a vector over time) against values
        (("batch", "time"), ("batch", "time", "out"), "time", ("batch", "out"), "torch.bmm(a.unsqueeze(1), b)"),
        # the reduced dim first, the result's dims in another order than the operands'
        (("batch", "key", "time"), ("key", "batch"), "key", ("batch", "time"), "torch.bmm(b.permute"),
        # both with a dim of their own: a batched matrix product
        (("batch", "time", "key"), ("batch", "key", "out"), "key", ("batch", "time", "out"), "torch.bmm(a, b)"),
        (("batch", "time", "key"), ("batch", "out", "key"), "key", ("batch", "out", "time"), ".permute(0, 2, 1)"),
    ],
)
def test_bmm_has_einsums_values_and_gradients(a_dims, b_dims, axis, out_dims, call):
    code = dot_bmm_code("a", a_dims, "b", b_dims, [axis], out_dims)
    assert code is not None and call in code, code
    gen = torch.Generator().manual_seed(0)
    a0 = torch.randn([SIZES[d] for d in a_dims], generator=gen, dtype=torch.float64)
    b0 = torch.randn([SIZES[d] for d in b_dims], generator=gen, dtype=torch.float64)
    grad = torch.randn([SIZES[d] for d in out_dims], generator=gen, dtype=torch.float64)
    results = []
    for compute in (
        lambda a, b: eval(code, {"torch": torch, "a": a, "b": b}),
        lambda a, b: torch.einsum(_einsum(a_dims, b_dims, out_dims), a, b),
    ):
        a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
        out = compute(a, b)
        out.backward(grad)
        results.append((out, a.grad, b.grad))
    for got, want in zip(results[0], results[1], strict=True):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("a_dims", "b_dims", "axes", "out_dims"),
    [
        (("batch", "key"), ("batch", "key"), ["key"], ("batch",)),  # two vectors: a product summed
        (("batch", "time", "key"), ("batch", "key"), ["time", "key"], ("batch",)),  # two reduced dims
        (("batch", "heads", "time"), ("batch", "heads", "time", "out"), ["time"], ("batch", "heads", "out")),
        (("batch", "time", "heads", "key"), ("batch", "key"), ["key"], ("batch", "time", "heads")),
    ],
)
def test_other_layouts_stay_einsum(a_dims, b_dims, axes, out_dims):
    assert dot_bmm_code("a", a_dims, "b", b_dims, axes, out_dims) is None
