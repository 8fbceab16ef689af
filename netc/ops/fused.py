"""Loops the `fuse_cells` pass recognised as an LSTM or a GRU, as one native sequence op.

`lstm_loop(x, h0, c0)` and `gru_loop(x, h0)` are not called by users: the pass makes them
from a loop (kept in `Op.unfused`). Their parameters are the model's own Linears
(`attrs["params"]`: role -> (module path, role); `attrs["rows"]`: the rows of a joint kernel
over `concat(x, h)`), in the model's gate order (`attrs["gates"]`: for each of torch's gate
blocks, the source's split index). Results, in `attrs["results"]` order: "seq" (h per
frame), "h" and "c" (after each sequence's last frame).

torch: one `torch.lstm` call over the padded batch (valid frames come first and a forward cell
is causal, so padding never reaches them), one `torch.gru` call over the packed batch (valid
frames only: faster here than padded, unlike torch's LSTM; over the padded batch with
`attrs["padded"]`, which `netc export --format onnx` sets: ONNX cannot express packing), the
weights reordered to torch's layout. RETURNN: an LSTM with zero initial state and at most one bias is a `rec` layer with
`unit: "nativelstm2"` whose parameters are the model's variables, reordered through
`reuse_params`; anything else (a GRU: RETURNN has no native unit computing torch's GRU) is the
loop as written.
"""

from __future__ import annotations

import textwrap

from netc.naming import py_literal
from netc.ops.base import OpDef, register
from netc.ops.cells import torch_forget_bias
from netc.ops.param_parts import param_part, returnn_helpers

# the helpers' shared parts: no frame in the batch (torch's RNN ops and packing refuse a time
# of 0: a loop over a stack with `end` whose appends follow the `break` can have none); inputs
# each reversed within its length for a backward loop; h after each sequence's last frame from
# the outputs, which are put back in the frames' order
_EMPTY = """    if x.shape[1] == 0:  # no frame in any sequence: the initial state, nothing stacked
        return x.new_zeros(x.shape[0], 0, h0.shape[-1]), h0{c0}
"""
_REVERSE = """    valid = torch.arange(x.shape[1], device=x.device)[None, :] < lens[:, None]
    order: torch.Tensor | None = None
    if reverse:  # each sequence's valid frames reversed (padding stays)
        t = torch.arange(x.shape[1], device=x.device)[None, :]
        order = torch.where(valid, lens[:, None] - 1 - t, t)[:, :, None]
        x = x.gather(1, order.expand(-1, -1, x.shape[-1]))
"""
_LAST = """    last = (lens - 1).clamp(min=0)[:, None, None].expand(-1, 1, y.shape[-1])
    h = torch.where((lens > 0)[:, None], y.gather(1, last)[:, 0], h0)
    if order is not None:
        y = y.gather(1, order.expand(-1, -1, y.shape[-1]))
"""
LSTM_HELPER = "_lstm_loop"
GRU_HELPER = "_gru_loop"
GRU_PADDED_HELPER = "_gru_loop_padded"  # a `gru_loop` with attrs["padded"] (set for ONNX export)
# an input this large drives a sigmoid gate to exactly 1 (or 0) in every float dtype
_HOLD = 1e4


def _lstm_helper(name: str) -> str:
    return f'''def {name}(x, lens, h0, c0, weights: list[torch.Tensor], reverse: bool, need_c: bool, train: bool):
    """An LSTM over x [batch, time, in] in one native call (torch.lstm; `weights` in its layout:
    w_ih, w_hh, and b_ih, b_hh when it has biases), each sequence over its own frames, from its
    last backwards with `reverse`. Returns h per frame (zeros on padded frames) and h, c after
    each sequence's last frame (h0, c0 when it has none); c only with `need_c`. `train`: the
    module's `training`, as nn.LSTM passes it (cuDNN keeps what its backward needs only then)."""
{_EMPTY.format(c0=", c0")}{_REVERSE}    if need_c:
        # padded frames keep c: an extra input, 1 on them only, drives the forget gate (torch's
        # block 1) to exactly 1 and the input gate (block 0) to exactly 0 (padded frames of x
        # zeroed: their gates stay far from the threshold)
        x = x.masked_fill(~valid[:, :, None], 0)
        n = h0.shape[-1]
        hold = torch.cat([x.new_full((n,), -{_HOLD!r}), x.new_full((n,), {_HOLD!r}), x.new_zeros(2 * n)])
        x = torch.cat([x, (~valid)[:, :, None].to(x.dtype)], dim=-1)
        weights = [torch.cat([weights[0], hold[:, None]], dim=1)] + weights[1:]
    # torch.lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    y, _, c = torch.lstm(x, [h0[None], c0[None]], weights, len(weights) == 4, 1, 0.0, train, False, True)
{_LAST}    return y, h, c[0]
'''


_GRU_PADDED = """# torch.gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
y, _ = torch.gru(x, h0[None], weights, bias, 1, 0.0, train, False, True)
"""


def _gru_helper(name: str) -> str:
    return f'''def {name}(x, lens, h0, weights: list[torch.Tensor], reverse: bool, train: bool):
    """A GRU over x [batch, time, in] in one native call (torch.gru; `weights` in its layout:
    w_ih, w_hh, and b_ih, b_hh when it has biases), each sequence over its own frames, from its
    last backwards with `reverse`. Returns h per frame (anything on padded frames) and h after
    each sequence's last frame (h0 when it has none). `train`: the module's `training`, as
    nn.GRU passes it (cuDNN keeps what its backward needs only then)."""
{_EMPTY.format(c0="")}{_REVERSE}    bias = len(weights) == 4
    if x.device.type == "meta":  # no lengths to pack by: the padded batch, every frame
{textwrap.indent(_GRU_PADDED, " " * 8)}    else:  # valid frames only, as nn.GRU on a packed sequence (a sequence without any runs one)
        packed = nn.utils.rnn.pack_padded_sequence(x, lens.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
        h0_sorted = h0[packed.sorted_indices][None]
        # torch.gru(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional)
        y, _ = torch.gru(packed.data, packed.batch_sizes, h0_sorted, weights, bias, 1, 0.0, train, False)
        packed = nn.utils.rnn.PackedSequence(y, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
        y = nn.utils.rnn.pad_packed_sequence(packed, batch_first=True, total_length=x.shape[1])[0]
{_LAST}    return y, h
'''


def _gru_padded_helper(name: str) -> str:
    """The GRU helper over the padded batch, every frame (valid frames come first and h is read
    at each sequence's last one, so padding changes no result): the form torch's ONNX exporter
    writes as an ONNX `GRU` (`netc export --format onnx`; it cannot express packing)."""
    head = _gru_helper(name).split("    if x.device.type")[0]
    return head + textwrap.indent(_GRU_PADDED, " " * 4) + _LAST + "    return y, h\n"


# RETURNN's native LSTM has its gate blocks as (cell input, input, forget, output); torch as
# (input, forget, cell input, output): the unit's block k is torch's block _RETURNN_FROM_TORCH[k]
_RETURNN_FROM_TORCH = [2, 0, 1, 3]


class _CellLoop(OpDef):
    """The shared lowering of a fused LSTM or GRU loop."""

    blocks = 4
    helper = ""  # the key and name of its torch helper
    helper_source = staticmethod(_lstm_helper)  # its source, given the name chosen

    def torch_helpers(self, op):
        return {self.helper: self.helper_source}

    def _input(self, ctx, op) -> tuple[str, str]:
        """x as [batch, time, feature], and its time dim."""
        time = op.attrs["axis"]
        return ctx.aligned(0, ("batch", time, ctx.in_dims(0)[-1])), time

    def _weight(self, ctx, op, role: str, gates: list[int], signs: list[float] | None = None) -> str | None:
        """Code for one of torch's weights (`w_ih`, `w_hh`, `b_ih`, `b_hh`) from the model's parameter."""
        if op.attrs["params"][role] is None:
            return None
        p = ctx.param(role)
        n = ctx.size(op.attrs["hidden"])
        k = self.blocks
        sign = ""
        if signs is not None:
            sign = f" * torch.tensor({py_literal(signs)}, dtype={ctx.float_dtype}, device={ctx.device})[:, None]"
        if role.startswith("b"):
            if gates == list(range(k)) and not sign:
                return p
            return f"({p}.view({k}, {n})[{py_literal(gates)}]{sign}).flatten()"
        rows = op.attrs["rows"][role]
        if rows is not None:
            p = f"{p}[{rows[0]}:{rows[1]}]"
        # contiguous: cuDNN views the weights into its flat buffer (a transposed view fails on CUDA)
        if gates == list(range(k)) and not sign:
            return f"{p}.t().contiguous()"
        return f"({p}.view(-1, {k}, {n})[:, {py_literal(gates)}]{sign}).flatten(1).t().contiguous()"

    def _weights(self, ctx, op, x_gates: list[int], h_gates: list[int], signs=None) -> str:
        """torch's weight list, computed once per call (a variable named after the loop)."""
        w = [self._weight(ctx, op, r, g, signs) for r, g in (("w_ih", x_gates), ("w_hh", h_gates))]
        b_ih = self._weight(ctx, op, "b_ih", x_gates, signs)
        b_hh = self._weight(ctx, op, "b_hh", h_gates, signs)
        forget = op.attrs.get("forget_bias", 0.0)
        if forget:  # a constant on the forget gate (torch's block 1): the bias a model without one lacks
            assert b_hh is None and b_ih is not None
            b_hh = torch_forget_bias(ctx, ctx.size(op.attrs["hidden"]), forget)
        if b_ih or b_hh:  # torch takes both biases or none
            zeros = f"torch.zeros_like({ctx.param('b_ih' if b_ih else 'b_hh')})"
            w += [b_ih or zeros, b_hh or zeros]
        return ctx.once("[" + ", ".join(w) + "]", f"{op.attrs['loop']}_weights")

    def results(self, op, code: str, kinds: tuple[str, ...]) -> str:
        """The op's results (`attrs["results"]`, a subsequence of the helper's `kinds`) from the helper's."""
        picks = tuple(kinds.index(r) for r in op.attrs["results"])
        if len(picks) == len(kinds):
            return code
        return code + {(0,): "[0]", (1,): "[1]", (2,): "[2]", (0, 1): "[:2]", (1, 2): "[1:]", (0, 2): "[::2]"}[picks]

    def infer(self, dt, args, attrs):  # made by a pass from a loop whose results it keeps
        raise NotImplementedError

    def eager(self, ctx, args, attrs, outs):  # eager runs the source, never a pass's ops
        raise NotImplementedError


@register
class LstmLoop(_CellLoop):
    """A loop that is an LSTM (see netc.passes.fuse_cells)."""

    name = "lstm_loop"
    blocks = 4
    helper = LSTM_HELPER

    def torch(self, ctx, op):
        x, time = self._input(ctx, op)
        gates = op.attrs["gates"]
        weights = self._weights(ctx, op, gates, gates)
        need_c = "c" in op.attrs["results"]
        call = (
            f"{ctx.helper(LSTM_HELPER)}({x}, {ctx.seq_lens(time)}, {ctx.arg(1)}, {ctx.arg(2)}, {weights}, "
            f"{op.attrs['reverse']}, {need_c}, {ctx.training})"
        )
        return self.results(op, call, ("seq", "h", "c"))

    def returnn(self, ctx, op):
        p = op.attrs["params"]
        biases = [r for r in ("b_ih", "b_hh") if p[r] is not None]
        if not (ctx.is_zeros(1) and ctx.is_zeros(2)) or len(biases) > 1:
            return None  # no native unit: the loop as written
        names = {r: ctx.variable(r) for r in ("w_ih", "w_hh", *biases)}
        scope = _common_scope(list(names.values()))
        if scope is None:
            return None
        gates = [op.attrs["gates"][k] for k in _RETURNN_FROM_TORCH]

        def custom(role: str | None) -> dict:
            if role is None:
                return param_part(None, gates=gates)
            rows = op.attrs["rows"].get(role)
            forget = op.attrs.get("forget_bias") if role == "b_ih" else None  # the model's one bias (see `_build`)
            shape = list(ctx.param_shape(role))
            return param_part(names[role], shape, rows=rows and list(rows), gates=gates, forget=forget or None)

        layer = {
            "class": "rec",
            "unit": "nativelstm2",
            "from": ctx.src(0),
            "axis": ctx.dim(op.attrs["axis"]),
            "out_dim": ctx.dim(op.attrs["hidden"]),
        }
        if op.attrs["reverse"]:
            layer["direction"] = -1
        # the variables must lie in the layer's scope for RETURNN to train and save them as its own
        layer["name_scope"] = f"/{scope}"
        layer["reuse_params"] = {
            "map": {"W": custom("w_ih"), "W_re": custom("w_hh"), "b": custom(biases[0] if biases else None)}
        }
        return layer

    def returnn_helpers(self, op):
        return returnn_helpers()

    def returnn_outs(self, layer, op):
        return [layer if r == "seq" else "" for r in op.attrs["results"]]

    def returnn_extra(self, ctx, layer, own, op, fresh):
        out = ctx.dim(op.attrs["hidden"])
        return {
            i: (fresh(f"{layer}_{r}"), {"class": "get_last_hidden_state", "from": layer, "key": r, "out_dim": out})
            for i, r in enumerate(op.attrs["results"])
            if r != "seq"
        }


@register
class GruLoop(_CellLoop):
    """A loop that is a GRU as torch computes it (see netc.passes.fuse_cells)."""

    name = "gru_loop"
    blocks = 3

    def torch_helpers(self, op):  # the padded form where export asked for it
        if op.attrs.get("padded"):
            return {GRU_PADDED_HELPER: _gru_padded_helper}
        return {GRU_HELPER: _gru_helper}

    def torch(self, ctx, op):
        x, time = self._input(ctx, op)
        signs = [1.0, -1.0, 1.0] if op.attrs["negate_z"] else None  # sigmoid(-a) = 1 - sigmoid(a)
        weights = self._weights(ctx, op, op.attrs["x_gates"], op.attrs["gates"], signs)
        helper = ctx.helper(GRU_PADDED_HELPER if op.attrs.get("padded") else GRU_HELPER)
        call = f"{helper}({x}, {ctx.seq_lens(time)}, {ctx.arg(1)}, {weights}, {op.attrs['reverse']}, {ctx.training})"
        return self.results(op, call, ("seq", "h"))

    def returnn(self, ctx, op):
        return None  # RETURNN's GRU units compute another GRU: the loop as written


def _common_scope(names: list[str]) -> str | None:
    """The longest scope (`a/b`) all variable names lie in."""
    parts = [n.split("/")[:-1] for n in names]
    common: list[str] = []
    for level in zip(*parts):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return "/".join(common) or None
