"""LSTMs: `Lstm(out_dim, direction=1)(x)` over a whole sequence, and `LstmCell(out_dim)(x_t, (h, c))`,
one step inside a loop.

`Lstm` is RETURNN's `rec` layer with `unit: nativelstm2` over x's one dynamic dim. Parameter
roles are RETURNN's TF variable names for that layer: `W` [in, 4*out] (input projection), `b`
[4*out] and `W_re` [out, 4*out] (recurrent). The 4*out axis holds RETURNN's gate order
(cell input, input gate, forget gate, output gate); torch's `lstm` wants (input, forget,
cell input, output), so the torch code permutes the gate blocks. `direction=-1` runs each
sequence from its own last valid frame to its first (the native unit skips padded frames,
so a backward pass over the padded batch starts every sequence at its own end).

`LstmCell` is RETURNN's `rnn_cell` layer with `unit: "LSTMBlock"`, which on TensorFlow 2 is
TF's `LSTMCell` (RETURNN's `StandardLSTM`): see `LstmCell` below.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.naming import Code, py_literal
from netc.ops.align import align_code, align_tensor
from netc.ops.base import OpDef, OutType, TorchCtx, register
from netc.ops.rules import check_out_dim

# torch's gate block k is RETURNN's block _TORCH_GATES[k]: (i, f, g, o) from (g, i, f, o)
_TORCH_GATES = [1, 2, 0, 3]
LSTM_SEQ = "_lstm_seq"


def _lstm_seq_helper(name: str) -> str:
    return f'''@torch.jit.unused
def {name}_traced() -> bool:
    return torch.compiler.is_compiling()


@torch.jit.unused
def {name}_scan(x: torch.Tensor, weights: list[torch.Tensor]) -> torch.Tensor:
    """{name}, as a `scan` of `torch.lstm_cell` over time."""
    from torch._higher_order_ops.scan import scan

    def step(carry: list[torch.Tensor], xs: list[torch.Tensor]):
        h, c = torch.lstm_cell(xs[0], (carry[0], carry[1]), weights[0], weights[1], weights[2], weights[3])
        contiguous = torch.contiguous_format  # a carried value keeps its strides
        return [h.clone(memory_format=contiguous), c.clone(memory_format=contiguous)], [h.clone()]

    zeros = x.new_zeros(x.shape[0], weights[1].shape[1])
    return scan(step, [zeros, zeros.clone()], [x.transpose(0, 1).clone()])[1][0].transpose(0, 1)


def {name}(x: torch.Tensor, n: int, weights: list[torch.Tensor], train: bool) -> torch.Tensor:
    """An LSTM over x [batch, time, in] from zero states: h per frame. `weights` in torch.lstm's
    layout (w_ih, w_hh, b_ih, b_hh). Traced by torch.export or torch.compile, it runs as torch's
    `scan` (which keeps time dynamic; they unroll torch.lstm at the example's length). `train`:
    the module's `training`, as nn.LSTM passes it (cuDNN keeps what its backward needs only then)."""
    if not torch.jit.is_scripting():
        if {name}_traced():
            return {name}_scan(x, weights)
    h0 = x.new_zeros(1, x.shape[0], n)
    # torch.lstm(input, (h0, c0), params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    return torch.lstm(x, (h0, h0), weights, True, 1, 0.0, train, False, True)[0]
'''


@register
class Lstm(OpDef):
    """`Lstm(out_dim, direction=1)(x)`: an LSTM over x's dynamic dim, state starting at zero per
    sequence; `direction=-1` from each sequence's last valid frame back to its first.

    h_t = o * tanh(c_t), c_t = f * c_{t-1} + i * g, with [g, i, f, o] = x_t @ W + b + h_{t-1} @ W_re
    (g through tanh, the gates through sigmoid). Padded frames never affect valid ones.
    """

    name = "lstm"
    fn_name = "Lstm"
    module = True
    param_init = {"W": "glorot", "W_re": "glorot", "b": "zeros"}

    def ctor(self, out_dim, direction=1):
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
        if attrs.get("direction", 1) not in (1, -1) or isinstance(attrs.get("direction"), bool):
            raise DimError(f"`Lstm` direction is 1 (forward) or -1 (backward), got {attrs['direction']!r}")
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
        layer = {
            "class": "rec",
            "unit": "nativelstm2",
            "from": ctx.src(0),
            "axis": ctx.dim(time),
            "out_dim": ctx.dim(op.attrs["out_dim"]),
        }
        if op.attrs.get("direction", 1) == -1:
            layer["direction"] = -1
        return layer

    def torch(self, ctx, op):
        (time,) = [d for d in ctx.in_dims(0) if ctx.is_dynamic(d)]
        feat = ctx.in_dims(0)[-1]  # canonical order: the one static (feature) dim is last
        out = op.attrs["out_dim"]
        n = ctx.size(out)
        src = ("batch", time, feat)
        x = ctx.aligned(0, src)
        gates = repr(_TORCH_GATES)

        def w(role: str, rows: str) -> str:  # [rows, 4*out] in RETURNN's gate order -> torch's [4*out, rows]
            # contiguous: cuDNN views the weights into its flat buffer (a transposed view fails on CUDA)
            return f"{ctx.param(role)}.view({rows}, 4, {n})[:, {gates}].flatten(1).t().contiguous()"

        b = ctx.param("b")
        backward = op.attrs.get("direction", 1) == -1
        if backward:  # each sequence reversed within its length, run forward, reversed back
            x = _reverse_in_length(x, ctx.size(feat), ctx.seq_lens(time), ctx.size(time), ctx.device)
        # a forward LSTM is causal: valid frames (a prefix) never see the padded ones
        weights = (
            f"[{w('W', ctx.size(feat))}, {w('W_re', n)}, {b}.view(4, {n})[{gates}].flatten(), torch.zeros_like({b})]"
        )
        expr = f"{ctx.helper(LSTM_SEQ)}({x}, {n}, {weights}, {ctx.training})"
        if backward:
            expr = _reverse_in_length(expr, n, ctx.seq_lens(time), ctx.size(time), ctx.device)
        return align_code(expr, (*src[:2], out), op.outs[0].dims)

    def torch_helpers(self, op):
        return {LSTM_SEQ: _lstm_seq_helper}

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
        steps = range(xs.shape[1])  # one sequence: its valid frames only
        for t in reversed(steps) if attrs.get("direction", 1) == -1 else steps:  # RETURNN's gate order: g, i, f, o
            z = xs[:, t] @ W + b + h @ W_re
            g, i, f, o = torch.tanh(z[:, :n]), *torch.sigmoid(z[:, n:]).split(n, dim=1)
            c = f * c + i * g
            h = o * torch.tanh(c)
            ys.append(h)
        if attrs.get("direction", 1) == -1:
            ys.reverse()  # aligned with the input frames
        y = torch.stack(ys, dim=1) if ys else xs.new_zeros(xs.shape[0], 0, n)
        return align_tensor(y, ("batch", time, out), outs[0].dims)


def _reverse_in_length(x: str, feat: str, lens: str, size: str, device: str) -> str:
    """Code for x [batch, time, feat] with each sequence's valid frames reversed (padding stays)."""
    t = f"torch.arange({size}, device={device})[None, :]"
    idx = f"torch.where({t} < {lens}[:, None], {lens}[:, None] - 1 - {t}, {t})"
    return f"{x}.gather(1, ({idx})[:, :, None].expand(-1, -1, {feat}))"


def _check_step(dt, cell: str, attrs: dict, args: tuple) -> str:
    """A one-step cell's checks: float operands (`args`: (value, what) pairs, the input first),
    its out_dim, and an input [batch, feature]. Returns the out_dim."""
    for v, what in args:
        if v.dtype != "float32":
            raise DimError(f"`{cell}` needs a float {what}, got {v.dtype}")
    out = attrs["out_dim"]
    check_out_dim(dt, cell, out, ("batch",))
    x = args[0][0]
    if "batch" not in x.dims or len(x.dims) != 2 or dt[x.dims[-1]].kind != "static":
        raise DimError(f"`{cell}` runs one step on [batch, feature], got [{', '.join(x.dims)}]")
    return out


FORGET_BIAS = 1.0  # TF's LSTMCell default, added to the forget gate's pre-activation (not a parameter)
# torch's gate block k is TF LSTMCell's block TORCH_FROM_TF[k]: (i, f, g, o) from (i, g, f, o)
TORCH_FROM_TF = [0, 2, 1, 3]


def torch_forget_bias(ctx: TorchCtx, n: str, forget: float = FORGET_BIAS) -> str:
    """Code for torch's `b_hh` [4*n] that adds `forget` to the forget gate (torch's block 1) and
    nothing else, in the float dtype on the device of the computation."""
    values = py_literal([0.0, forget, 0.0, 0.0])
    return f"torch.tensor({values}, dtype={ctx.float_dtype}, device={ctx.device}).repeat_interleave({n})"


STATE_C_HELPER = "lstm_cell_state_c"
STATE_C_HELPER_SOURCE = f'''def {STATE_C_HELPER}(source, **_kwargs):
    """The cell state c of the `rnn_cell` layer source(0) after this step. Source 1, this layer's
    own previous value, is not used: reading it keeps this layer in the loop, and the cell,
    collocated with it, too, where c exists for every step (RETURNN would move a cell whose
    input needs no loop state out of the loop, and there only the last state is known). The
    cell is collocated with h too, which stays in the loop alike: with only h read (c unused),
    a cell whose input is invariant was moved out, where it has no time axis."""
    source(1, as_layer=True)  # every source of an `eval` must be read
    return source(0, as_layer=True).get_last_hidden_state("c")
'''


@register
class LstmCell(OpDef):
    """`h, c = LstmCell(out_dim)(x, (h, c))`: one LSTM step, as RETURNN's `rnn_cell` with
    `unit: "LSTMBlock"`. On TensorFlow 2, RETURNN maps LSTMBlock to TF's `LSTMCell` (its
    `StandardLSTM`), whose numbers these are:

        z = concat(x, h) @ kernel + bias            kernel [in+out, 4*out], bias [4*out]
        i, g, f, o = split(z, 4)                    gate blocks in this order
        c' = sigmoid(f + 1.0) * c + sigmoid(i) * tanh(g)   (forget bias 1.0, not a parameter)
        h' = sigmoid(o) * tanh(c')

    Parameter roles are its TF variable names `lstm_cell/kernel` and `lstm_cell/bias` (rows of the
    kernel: x's features, then h's). x is [batch, feature], h and c [batch, out_dim].

    RETURNN's `rnn_cell` keeps its state itself (the previous step's), so the RETURNN target
    needs the state passed in to be the (h, c) this cell returned at the previous step, as in
    `h, c = cell(x_t, (h, c))`; their values before the loop become its `initial_state` unless
    they are zeros, the cell's default (RETURNN does not repeat an `initial_state` layer for the
    hypotheses of a beam search).
    """

    name = "lstm_cell"
    fn_name = "LstmCell"
    module = True
    param_init = {"lstm_cell/kernel": "glorot", "lstm_cell/bias": "zeros"}  # RETURNN: xavier, TF: zeros

    def ctor(self, out_dim):
        pass

    def returnn_helpers(self, op):
        return {STATE_C_HELPER: STATE_C_HELPER_SOURCE}

    def module_args(self, args, kwargs):
        if len(args) != 2 or kwargs or not isinstance(args[1], (tuple, list)) or len(args[1]) != 2:
            raise TypeError("`LstmCell(out_dim)` is called as `cell(x, (h, c))`")
        return [args[0], *args[1]]

    def infer(self, dt, args, attrs):
        x, h, c = args
        out = _check_step(dt, "LstmCell", attrs, ((x, "input"), (h, "state h"), (c, "state c")))
        for v, what in ((h, "h"), (c, "c")):
            if v.dims != ("batch", out):
                raise DimError(f"`LstmCell` state {what} must be [batch, {out}], got [{', '.join(v.dims)}]")
        return [OutType(("batch", out)), OutType(("batch", out))]

    def params(self, dt, args, attrs):
        feat, out = args[0].dims[-1], attrs["out_dim"]
        gates = dt.scaled(out, 4).name
        return {"lstm_cell/kernel": (dt.concat([feat, out]).name, gates), "lstm_cell/bias": (gates,)}

    def returnn(self, ctx, op):
        from netc.errors import CompileError

        h, c = ctx.carry(1), ctx.carry(2)
        if h is None or c is None or (h.next, c.next) != (op.outs[0].id, op.outs[1].id):
            raise CompileError(
                op.span,
                "RETURNN target: `LstmCell`'s state must be the (h, c) this cell returned at the previous "
                "step of its loop, as in `h, c = cell(x_t, (h, c))` (RETURNN's `rnn_cell` keeps its own state)",
            )
        out = ctx.dim(op.attrs["out_dim"])
        layer = {"class": "rnn_cell", "unit": "LSTMBlock", "from": ctx.src(0), "n_out": Code(f"{out}.dimension")}
        # zeros are the cell's default; a layer as initial state is not tiled for a beam search
        if not (h.init_zero and c.init_zero):
            layer["initial_state"] = {"c": c.init, "h": h.init}
        return layer

    def returnn_extra(self, ctx, layer, own, op, fresh):
        out = ctx.dim(op.attrs["out_dim"])
        h, c = fresh(f"{layer}_h"), fresh(f"{layer}_c")
        own["collocate_with"] = [c, h]  # see STATE_C_HELPER_SOURCE
        # h and c are read after the loop as these layers' last frames: a sequence without one
        # has the loop's initial state
        init_h, init_c = ctx.carry(1), ctx.carry(2)
        return {
            # `rnn_cell` makes its own feature dim (`<layer>:rnn_cell_feat`): h gets out_dim's, by a
            # template of its own: the cell's has no batch dim when its input is computed from `prev:h`
            # alone (RETURNN finds the cycle's templates from the sources). Reading its own `prev:`
            # value keeps h in the loop, where that template holds (no time axis)
            0: (
                h,
                {
                    "class": "eval",
                    "from": [layer, f"prev:{h}"],
                    "eval": "(source(1), source(0))[-1]",
                    "out_type": {"dim_tags": [Code("batch_dim"), out]},
                    "initial_output": "zeros" if init_h.init_zero else init_h.init,
                },
            ),
            # c through a helper that also reads its own `prev:` value: see STATE_C_HELPER_SOURCE
            1: (
                c,
                {
                    "class": "eval",
                    "from": [layer, f"prev:{c}"],
                    "eval": Code(STATE_C_HELPER),
                    "out_type": {"dim_tags": [Code("batch_dim"), out]},
                    **({} if init_c.init_zero else {"initial_output": init_c.init}),
                },
            ),
        }

    def torch(self, ctx, op):
        n = ctx.size(op.attrs["out_dim"])
        n_in = ctx.size(ctx.in_dims(0)[-1])
        kernel, bias = ctx.param("lstm_cell/kernel"), ctx.param("lstm_cell/bias")
        gates = repr(TORCH_FROM_TF)

        def w(rows: str, hint: str) -> str:  # kernel rows [rows, 4*out] in TF's gate order -> torch's [4*out, rows]
            return ctx.once(f"{kernel}[{rows}].view(-1, 4, {n})[:, {gates}].flatten(1).t()", hint)

        # reordered once per call, not in every step of the loop the cell runs in
        b_ih = ctx.once(f"{bias}.view(4, {n})[{gates}].flatten()", "b_ih")
        b_hh = ctx.once(torch_forget_bias(ctx, n), "b_hh")
        return (
            f"torch.lstm_cell({ctx.arg(0)}, ({ctx.arg(1)}, {ctx.arg(2)}), "
            f"{w(f':{n_in}', 'w_ih')}, {w(f'{n_in}:', 'w_hh')}, {b_ih}, {b_hh})"
        )

    def eager(self, ctx, args, attrs, outs):
        import torch

        x, h, c = (a.data for a in args)
        z = torch.cat([x, h], dim=-1) @ ctx.param("lstm_cell/kernel") + ctx.param("lstm_cell/bias")
        i, g, f, o = z.chunk(4, dim=-1)
        c = torch.sigmoid(f + FORGET_BIAS) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


GRU_HELPER = "netc_gru_cell"
GRU_HELPER_SOURCE = f'''def _netc_gru_blocks(data, like):
    """Data `data` (a projection, its feature the gate blocks r, z, n) with the dims of `like`
    (dims it lacks broadcast) but its own feature, split into the blocks."""
    import tensorflow as tf

    axis = like.feature_dim_axis
    target = like.copy_template_replace_dim_tag(axis=axis, new_dim_tag=data.feature_dim_or_sparse_dim)
    return tf.split(data.copy_compatible_to(target).placeholder, 3, axis=axis)


def {GRU_HELPER}(source, self, **_kwargs):
    """One step of torch's GRU cell from the projections of its input (source 0) and of its
    state (source 1), and the state h (source 2). RETURNN may run the step over all frames at
    once (outside the loop) when it reads no loop state: then any source may have the time dim."""
    import tensorflow as tf

    i_r, i_z, i_n = _netc_gru_blocks(source(0, as_layer=True).output, self.output)
    h_r, h_z, h_n = _netc_gru_blocks(source(1, as_layer=True).output, self.output)
    r = tf.sigmoid(i_r + h_r)
    z = tf.sigmoid(i_z + h_z)
    n = tf.tanh(i_n + r * h_n)
    return (1.0 - z) * n + z * source(2)


def {GRU_HELPER}_out(sources, name, out_dim, **_kwargs):
    """The result: the dims of both projections (sources 0 and 1), feature `out_dim` (while
    RETURNN builds a loop's templates, the state's may not be known yet)."""
    from returnn.tensor import Tensor

    known = [s.output for s in sources[:2] if s.output.feature_dim_axis is not None]
    like = [d.copy_template_replace_dim_tag(axis=d.feature_dim_axis, new_dim_tag=out_dim) for d in known]
    return Tensor.get_common_data(like, name="%s_output" % name)
'''


@register
class GruCell(OpDef):
    """`h = GruCell(out_dim)(x, h)`: one GRU step as torch computes it (`nn.GRUCell`):

        gi = x @ ih/W + ih/b                          ih/W [in, 3*out], ih/b [3*out]
        gh = h @ hh/W + hh/b                          hh/W [out, 3*out], hh/b [3*out]
        r, z, n gate blocks, in this order
        r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z)
        n = tanh(gi_n + r * gh_n)                     (r after the state's projection)
        h' = (1 - z) * n + z * h

    torch: one `torch.gru_cell` call (its weights are the transposed kernels). RETURNN has no
    unit of these numbers (its `GRU` unit is TF's GRUCell, r before the projection): a
    `subnetwork` of two `linear` layers `ih` and `hh` (the parameter roles are their variable
    names), their gate blocks split, and an `eval` for the gates.
    """

    name = "gru_cell"
    fn_name = "GruCell"
    module = True
    param_init = {"ih/W": "glorot", "ih/b": "zeros", "hh/W": "glorot", "hh/b": "zeros"}  # RETURNN's linear

    def ctor(self, out_dim):
        pass

    def module_args(self, args, kwargs):
        if len(args) != 2 or kwargs or isinstance(args[1], (tuple, list)):
            raise TypeError("`GruCell(out_dim)` is called as `cell(x, h)`")
        return list(args)

    def infer(self, dt, args, attrs):
        x, h = args
        out = _check_step(dt, "GruCell", attrs, ((x, "input"), (h, "state")))
        if h.dims != ("batch", out):
            raise DimError(f"`GruCell` state must be [batch, {out}], got [{', '.join(h.dims)}]")
        return [OutType(("batch", out))]

    def params(self, dt, args, attrs):
        feat, out = args[0].dims[-1], attrs["out_dim"]
        gates = dt.scaled(out, 3).name
        return {"ih/W": (feat, gates), "ih/b": (gates,), "hh/W": (out, gates), "hh/b": (gates,)}

    def returnn_helpers(self, op):
        return {GRU_HELPER: GRU_HELPER_SOURCE}

    def returnn(self, ctx, op):
        out = ctx.dim(op.attrs["out_dim"])
        gates = Code(f"3 * {out}.dimension")
        sub = {
            "ih": {"class": "linear", "from": "data:0", "n_out": gates},
            "hh": {"class": "linear", "from": "data:1", "n_out": gates},
            "output": {
                "class": "eval",
                "from": ["ih", "hh", "data:1"],
                "eval": Code(GRU_HELPER),
                "out_type": Code(f"{GRU_HELPER}_out"),
                "eval_locals": {"out_dim": out},
            },
        }
        # x and h stay apart (`data:0`, `data:1`), not concatenated
        return {"class": "subnetwork", "from": [ctx.src(0), ctx.src(1)], "concat_sources": False, "subnetwork": sub}

    def torch(self, ctx, op):
        w_ih, w_hh = ctx.param("ih/W"), ctx.param("hh/W")
        b_ih, b_hh = ctx.param("ih/b"), ctx.param("hh/b")
        return f"torch.gru_cell({ctx.arg(0)}, {ctx.arg(1)}, {w_ih}.t(), {w_hh}.t(), {b_ih}, {b_hh})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        x, h = (a.data for a in args)
        i_r, i_z, i_n = (x @ ctx.param("ih/W") + ctx.param("ih/b")).chunk(3, dim=-1)
        h_r, h_z, h_n = (h @ ctx.param("hh/W") + ctx.param("hh/b")).chunk(3, dim=-1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return (1.0 - z) * n + z * h
