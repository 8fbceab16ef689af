"""Recurrent cells run over a whole sequence: `Lstm(out_dim)(x)`.

RETURNN: a `rec` layer with `unit: nativelstm2` over x's one dynamic dim. Parameter roles
are RETURNN's TF variable names for that layer: `W` [in, 4*out] (input projection), `b`
[4*out] and `W_re` [out, 4*out] (recurrent). The 4*out axis holds RETURNN's gate order
(cell input, input gate, forget gate, output gate); torch's `lstm` wants (input, forget,
cell input, output), so the torch code permutes the gate blocks.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.align import align_code, align_tensor
from netc.ops.base import OpDef, OutType, register
from netc.ops.rules import check_out_dim

# torch's gate block k is RETURNN's block _TORCH_GATES[k]: (i, f, g, o) from (g, i, f, o)
_TORCH_GATES = [1, 2, 0, 3]


@register
class Lstm(OpDef):
    """`Lstm(out_dim)(x)`: an LSTM over x's dynamic dim, state starting at zero per sequence.

    h_t = o * tanh(c_t), c_t = f * c_{t-1} + i * g, with [g, i, f, o] = x_t @ W + b + h_{t-1} @ W_re
    (g through tanh, the gates through sigmoid). Padded frames never affect valid ones.
    """

    name = "lstm"
    fn_name = "Lstm"
    module = True
    param_init = {"W": "glorot", "W_re": "glorot", "b": "zeros"}

    def ctor(self, out_dim):
        pass

    def _dims(self, dt, x) -> tuple[str, str]:
        """(time, feature) of x; checks the dims."""
        if x.dtype != "float32":
            raise DimError(f"`Lstm` needs a float tensor, got {x.dtype}")
        dyn = dt.dynamic(x.dims)
        if len(dyn) != 1:
            got = ", ".join(dyn) or "none"
            raise DimError(f"`Lstm` runs over exactly one dynamic dim, [{', '.join(x.dims)}] has {got}")
        if "batch" not in x.dims:
            raise DimError(f"`Lstm` needs a tensor with the batch dim, got [{', '.join(x.dims)}]")
        return dyn[0], dt.feature(x.dims)

    def infer(self, dt, args, attrs):
        x = args[0]
        _, feat = self._dims(dt, x)
        out = attrs["out_dim"]
        check_out_dim(dt, "Lstm", out, tuple(d for d in x.dims if d != feat))
        return [OutType(dt.canonical([d for d in x.dims if d != feat] + [out]))]

    def params(self, dt, args, attrs):
        feat = dt.feature(args[0].dims)
        out = attrs["out_dim"]
        gates = dt.scaled(out, 4).name  # `4*out`: the four gate blocks
        return {"W": (feat, gates), "W_re": (out, gates), "b": (gates,)}

    def returnn(self, ctx, op):
        (time,) = [d for d in ctx.in_dims(0) if ctx.is_dynamic(d)]
        return {
            "class": "rec",
            "unit": "nativelstm2",
            "from": ctx.src(0),
            "axis": ctx.dim(time),
            "out_dim": ctx.dim(op.attrs["out_dim"]),
        }

    def torch(self, ctx, op):
        (time,) = [d for d in ctx.in_dims(0) if ctx.is_dynamic(d)]
        feat = ctx.in_dims(0)[-1]  # canonical order: the one static (feature) dim is last
        out = op.attrs["out_dim"]
        n = ctx.size(out)
        src = ("batch", time, feat)
        x = ctx.aligned(0, src)
        gates = repr(_TORCH_GATES)

        def w(role: str, rows: str) -> str:  # [rows, 4*out] in RETURNN's gate order -> torch's [4*out, rows]
            return f"{ctx.param(role)}.view({rows}, 4, {n})[:, {gates}].flatten(1).t()"

        b = ctx.param("b")
        # a forward LSTM is causal: valid frames (a prefix) never see the padded ones
        h0 = f"{x}.new_zeros(1, {ctx.size('batch')}, {n})"
        # torch.lstm(input, (h0, c0), [w_ih, w_hh, b_ih, b_hh], has_biases, num_layers, dropout,
        #            train, bidirectional, batch_first)
        expr = (
            f"torch.lstm({x}, ({h0}, {h0}), "
            f"[{w('W', ctx.size(feat))}, {w('W_re', n)}, {b}.view(4, {n})[{gates}].flatten(), torch.zeros_like({b})], "
            f"True, 1, 0.0, False, False, True)[0]"
        )
        return align_code(expr, (*src[:2], out), op.outs[0].dims)

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0]
        out = attrs["out_dim"]
        feat = x.dims[-1]  # canonical order: the one static (feature) dim is last
        (time,) = [d for d in x.dims if d not in ("batch", feat)]
        xs = align_tensor(x.data, x.dims, ("batch", time, feat))
        W, W_re, b = ctx.param("W"), ctx.param("W_re"), ctx.param("b")
        n = W_re.shape[0]
        h = xs.new_zeros(xs.shape[0], n)
        c = xs.new_zeros(xs.shape[0], n)
        ys = []
        for t in range(xs.shape[1]):  # RETURNN's gate order: cell input, input, forget, output
            z = xs[:, t] @ W + b + h @ W_re
            g, i, f, o = torch.tanh(z[:, :n]), *torch.sigmoid(z[:, n:]).split(n, dim=1)
            c = f * c + i * g
            h = o * torch.tanh(c)
            ys.append(h)
        y = torch.stack(ys, dim=1) if ys else xs.new_zeros(xs.shape[0], 0, n)
        return align_tensor(y, ("batch", time, out), outs[0].dims)
