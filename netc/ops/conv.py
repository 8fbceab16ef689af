"""Ops of today's speech encoders (the Conformer): `silu`/`swish`, `glu` and the modules
`Conv1d` (a 1-D convolution over a dynamic axis, depthwise with `groups`) and `BatchNorm`
(statistics of valid frames); `Conv2d` is in `netc.ops.conv2d`.

`Conv1d` never lets a padded frame into a valid one: the input's padded frames are zeros
before the convolution (RETURNN `conv` with `use_time_mask=True`; torch `where`), so
padding "same" (stride 1) gives each sequence what it gives alone; padding "causal" (stride 1)
pads on the left only, so frame t reads frames up to t (a streaming encoder's convolution,
which runs chunk by chunk on a cache of the last (k-1)*dilation frames). Padding "valid" makes a
new dynamic dim (`out_axis`, declared by the model) whose windows start at frame 0 of every
sequence: TF's "valid" padding does not depend on the batch's longest length, unlike its
"same" padding with a stride, which netc therefore refuses. Over a static axis (a chunked loop's
window of the cached frames and the chunk's, `netc.ops.chunk_cache`), padding "causal" with a
static `out_axis`: the results of the window's frames after its first span - 1 (those whose
causal context the window holds), |axis| - span + 1 of them, no padding: the same module as the
whole sequence's causal convolution, run on a chunk and its cache.
"""

from __future__ import annotations

import inspect
import textwrap

from netc.ir.dims import DimError
from netc.ops.align import align_code, align_tensor, where_valid
from netc.ops.base import EagerUnsupported, OpDef, OutType, register
from netc.ops.defs import _unary
from netc.ops.rules import check_out_dim

# SiLU (swish): x * sigmoid(x); RETURNN `activation` with tf.nn.silu
_unary("silu", "silu", "torch.nn.functional.silu")
_unary("swish", "silu", "torch.nn.functional.silu")


def _float(what: str, x) -> None:
    if x.dtype != "float32":
        raise DimError(f"`{what}` needs a float tensor, got {x.dtype}")


@register
class Glu(OpDef):
    """`glu(x, out_dim)`: the first half of x's feature dim times the sigmoid of its second half
    (torch's `glu` over the feature dim); `out_dim` is half of the feature dim. RETURNN `gating`."""

    name = fn_name = "glu"

    def api(self, x, out_dim):
        pass

    def infer(self, dt, args, attrs):
        x, out = args[0], attrs["out_dim"]
        _float("glu", x)
        feat = dt.feature(x.dims)
        check_out_dim(dt, "glu", out, x.dims)
        if 2 * dt[out].size != dt[feat].size:
            raise DimError(f"`glu` halves `{feat}` ({dt[feat].size}): `out_dim` `{out}` has size {dt[out].size}")
        return [OutType(dt.canonical([out if d == feat else d for d in x.dims]))]

    def returnn(self, ctx, op):
        out = ctx.dim(op.attrs["out_dim"])
        return {"class": "gating", "from": ctx.src(0), "activation": "identity", "out_dim": out}

    # canonical order keeps the one static (feature) dim last
    def torch(self, ctx, op):
        return f"torch.nn.functional.glu({ctx.arg(0)}, dim=-1)"

    def eager(self, ctx, args, attrs, outs):
        import torch

        return torch.nn.functional.glu(args[0].data, dim=-1)


def _conv_call(x, axis, out_axis=None):
    pass


_INTS = ("filter_size", "stride", "dilation", "groups")


@register
class Conv1d(OpDef):
    """`Conv1d(out_dim, filter_size, padding="same", stride=1, dilation=1, groups=1,
    with_bias=True)(x, axis=time, out_axis=None)` on x [batch, time, in]: a 1-D convolution over
    `axis`. Parameters: `W` [filter<k>, in/groups, out] (RETURNN `conv`'s layout) and `bias` [out].

    padding "same" (stride 1): a result per frame of `axis`, (k-1)*dilation zero frames around
    each sequence, half of them (rounded down) on the left; padding "causal" (stride 1): all of
    them on the left, frame t reads frames up to t. padding "valid": a new dynamic dim
    `out_axis` with max(0, (n - span) // stride + 1) frames for a sequence of n frames, where
    span = (k-1)*dilation + 1.
    """

    name = "conv1d"
    fn_name = "Conv1d"
    module = True
    param_init = {"bias": "zeros"}

    def ctor(self, out_dim, filter_size, padding="same", stride=1, dilation=1, groups=1, with_bias=True):
        pass

    def module_call(self, args, kwargs):
        bound = inspect.signature(_conv_call).bind(*args, **kwargs)  # TypeError on misuse
        bound.apply_defaults()
        a = bound.arguments
        return [a["x"]], {"axis": a["axis"], "out_axis": a["out_axis"]}

    def makes_dims(self, attrs):
        out = attrs.get("out_axis")  # causal with `out_axis`: over a static axis, a static dim
        return [out] if isinstance(out, str) and attrs.get("padding") != "causal" else []

    @staticmethod
    def span(attrs) -> int:
        return (attrs["filter_size"] - 1) * attrs["dilation"] + 1

    def infer(self, dt, args, attrs):
        x, axis, out_axis = args[0], attrs["axis"], attrs["out_axis"]
        _float("Conv1d", x)
        static = isinstance(axis, str) and axis in x.dims and dt[axis].kind == "static"
        if static and attrs["padding"] == "causal" and out_axis is not None:
            return self._infer_static(dt, x, attrs)
        if not isinstance(axis, str) or axis not in x.dims or dt[axis].kind != "dynamic":
            raise DimError(
                f"`Conv1d` needs `axis` to be a dynamic dim of [{', '.join(x.dims)}]"
                + (" (or a static window, with padding='causal' and a static `out_axis`)" if static else "")
            )
        rest = [d for d in x.dims if d not in ("batch", axis)]
        if "batch" not in x.dims or len(rest) != 1 or dt[rest[0]].kind != "static":
            raise DimError(f"`Conv1d` convolves [batch, {axis}, feature], got [{', '.join(x.dims)}]")
        feat, out = rest[0], attrs["out_dim"]
        for k in _INTS:
            v = attrs[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise DimError(f"`Conv1d` needs `{k}` to be an int >= 1, got {v!r}")
        check_out_dim(dt, "Conv1d", out, ("batch", axis))  # may be the input channels' dim
        g = attrs["groups"]
        if dt[feat].size % g or dt[out].size % g:
            raise DimError(
                f"`Conv1d` groups={g} must divide the input channels `{feat}` ({dt[feat].size}) "
                f"and `out_dim` `{out}` ({dt[out].size})"
            )
        padding = attrs["padding"]
        if padding in ("same", "causal"):
            if attrs["stride"] != 1:
                raise DimError(
                    f"`Conv1d` with padding '{padding}' takes stride 1 (one result per frame); "
                    "use padding='valid' with `out_axis`, or `max_pool` after it"
                )
            if out_axis is not None:
                raise DimError(f"`Conv1d` with padding '{padding}' keeps `axis`; `out_axis` is for padding 'valid'")
            return [OutType(("batch", axis, out))]
        if padding != "valid":
            raise DimError(f"`Conv1d` padding is 'same', 'causal' or 'valid', got {padding!r}")
        if out_axis is None:
            raise DimError("`Conv1d` with padding 'valid' makes a new dynamic dim: pass `out_axis=` (a declared Dim)")
        if not isinstance(out_axis, str) or out_axis not in dt.dims:
            raise DimError("`Conv1d` needs `out_axis` to be a dim (declared as Dim(name))")
        # a sequence shorter than the filter's span has no frame (nor one without frames)
        dt.make_lengths(out_axis, "Conv1d", may_be_empty=self.span(attrs) > 1 or dt[axis].may_be_empty)
        return [OutType(("batch", out_axis, out))]

    def _infer_static(self, dt, x, attrs) -> list[OutType]:
        """Over a static axis: padding "valid", stride 1, `out_axis` a static dim of the results."""
        axis, out_axis, out = attrs["axis"], attrs["out_axis"], attrs["out_dim"]
        rest = [d for d in x.dims if d not in ("batch", axis)]
        if "batch" not in x.dims or len(rest) != 1 or dt[rest[0]].kind != "static":
            raise DimError(f"`Conv1d` convolves [batch, {axis}, feature], got [{', '.join(x.dims)}]")
        for k in _INTS:
            v = attrs[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise DimError(f"`Conv1d` needs `{k}` to be an int >= 1, got {v!r}")
        if attrs["stride"] != 1:
            raise DimError(f"`Conv1d` over the static dim `{axis}` (a window of cached and new frames) takes stride 1")
        n = dt[axis].size - self.span(attrs) + 1
        if not isinstance(out_axis, str) or out_axis not in dt.dims or dt[out_axis].kind != "static":
            raise DimError(f"`Conv1d` over the static dim `{axis}` needs `out_axis=` a static dim of its {n} results")
        if dt[out_axis].size != n or n < 1:
            raise DimError(
                f"`Conv1d` over `{axis}` ({dt[axis].size} frames) gives {n} results: `out_axis` `{out_axis}` "
                f"has {dt[out_axis].size}"
            )
        check_out_dim(dt, "Conv1d", out, ("batch", axis, out_axis))
        g = attrs["groups"]
        if dt[rest[0]].size % g or dt[out].size % g:
            raise DimError(
                f"`Conv1d` groups={g} must divide the input channels `{rest[0]}` ({dt[rest[0]].size}) "
                f"and `out_dim` `{out}` ({dt[out].size})"
            )
        return [OutType(dt.canonical(("batch", out_axis, out)))]

    @staticmethod
    def _layout(op_or_attrs, dims) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The static case's operand and result layouts: [batch, axis, in], [batch, out_axis, out]."""
        a = op_or_attrs
        feat = next(d for d in dims if d not in ("batch", a["axis"]))
        return ("batch", a["axis"], feat), ("batch", a["out_axis"], a["out_dim"])

    def params(self, dt, args, attrs):
        feat = next(d for d in args[0].dims if d not in ("batch", attrs["axis"]))
        g = attrs["groups"]
        per_group = dt.part(feat, g).name if g > 1 else feat
        p = {"W": (dt.window(attrs["filter_size"]).name, per_group, attrs["out_dim"])}
        if attrs["with_bias"]:
            p["bias"] = (attrs["out_dim"],)
        return p

    def returnn(self, ctx, op):
        a = op.attrs
        static = not ctx.is_dynamic(a["axis"])
        if a["padding"] == "causal" and not static:
            return self._returnn_causal(ctx, op)
        layer = {
            "class": "conv",
            "from": ctx.src(0),
            "in_spatial_dims": [ctx.dim(a["axis"])],
            "filter_size": (a["filter_size"],),
            "padding": "valid" if static else a["padding"],
            "out_dim": ctx.dim(a["out_dim"]),
            "with_bias": bool(a["with_bias"]),
            "use_time_mask": True,  # padded frames are zeros before the convolution
        }
        if a["dilation"] != 1:
            layer["dilation_rate"] = a["dilation"]
        if a["groups"] != 1:
            layer["groups"] = a["groups"]
        depthwise = a["groups"] > 1 and ctx.param_shape("W")[1] == 1  # groups = input channels
        if a["stride"] != 1 and a["dilation"] != 1 and depthwise:
            # TF's depthwise convolution (RETURNN's for groups = channels) computes wrong frames
            # with both a stride and a dilation: stride 1, then every stride-th frame
            sub = {"conv": layer, "output": {"class": "slice", "from": "conv", "axis": "T", "slice_step": a["stride"]}}
            sub["output"]["out_dim"] = ctx.derived_dim(a["out_axis"])
            inner = {**layer, "from": "data", "name_scope": ""}  # its variables are the module's own
            return {"class": "subnetwork", "from": ctx.src(0), "subnetwork": {**sub, "conv": inner}}
        if a["stride"] != 1:
            layer["strides"] = a["stride"]
        if static:  # the window may be the last static dim: name the channels
            layer["in_dim"] = ctx.dim(next(d for d in ctx.in_dims(0) if d not in ("batch", a["axis"])))
            layer["use_time_mask"] = False
            layer["out_spatial_dims"] = [ctx.dim(a["out_axis"])]
        elif a["padding"] == "valid":
            layer["out_spatial_dims"] = [ctx.derived_dim(a["out_axis"])]
        return layer

    def _returnn_causal(self, ctx, op) -> dict:
        """Left padding only: the masked input padded by (k-1)*dilation frames on the left, then a
        "valid" `conv` (n frames again), retagged to `axis`: RETURNN's conv pads symmetrically."""
        a = op.attrs
        axis = ctx.dim(a["axis"])
        conv = {
            "class": "conv",
            "from": "padded",
            "filter_size": (a["filter_size"],),
            "padding": "valid",
            "out_dim": ctx.dim(a["out_dim"]),
            "with_bias": bool(a["with_bias"]),
            "name_scope": "",  # its variables are the module's own
        }
        if a["dilation"] != 1:
            conv["dilation_rate"] = a["dilation"]
        if a["groups"] != 1:
            conv["groups"] = a["groups"]
        sub = {
            # the padded frames are zeros first, so that each sequence's last frames see no padding
            "masked": {"class": "seq_len_mask", "from": "data", "axis": axis, "mask_value": 0.0},
            "padded": {"class": "pad", "from": "masked", "axes": axis, "padding": (self.span(a) - 1, 0)},
            "conv": conv,
            "output": {"class": "reinterpret_data", "from": "conv", "size_base": "data"},
        }
        return {"class": "subnetwork", "from": ctx.src(0), "subnetwork": sub}

    def made_lengths(self, attrs, lens):
        axis, out = attrs["axis"], attrs["out_axis"]
        if out is None or axis not in lens:
            return {}
        span, s = self.span(attrs), attrs["stride"]
        return {out: [max(0, (n - span) // s + 1) for n in lens[axis]]}

    def torch_made_dims(self, ctx, op):
        a = op.attrs
        if a["out_axis"] is None or not ctx.is_dynamic(a["axis"]):
            return {}
        span, s = self.span(a), a["stride"]
        lens = f"torch.clamp(({ctx.seq_lens(a['axis'])} - {span}) // {s} + 1, min=0)"
        # the padded size is what the convolution of the input padded by span - 1 frames gives,
        # (n - 1) // s + 1 (0 for n = 0): at least the longest sequence's frames, without a
        # max(0, ...) or a slice, which torch.export would specialise to inputs at least as
        # long as the filter; the frames past a sequence's length are masked as any padding
        return {a["out_axis"]: (lens, f"({ctx.size(a['axis'])} - 1) // {s} + 1")}

    # canonical order: x is [batch, time, in], the result [batch, time or out_axis, out]
    def torch(self, ctx, op):
        a = op.attrs
        if not ctx.is_dynamic(a["axis"]):  # a static axis: no padding, no frame to mask
            have, made = self._layout(a, ctx.in_dims(0))
            w = ctx.once(f"{ctx.param('W')}.permute(2, 1, 0)", f"{op.param}_W")
            b = ctx.param("bias") if a["with_bias"] else "None"
            x = f"{ctx.aligned(0, have)}.transpose(1, 2)"
            y = f"torch.nn.functional.conv1d({x}, {w}, {b}, 1, 0, {a['dilation']}, {a['groups']}).transpose(1, 2)"
            return align_code(y, made, op.outs[0].dims)
        x = where_valid(ctx.arg(0), ctx.mask(a["axis"], ctx.in_dims(0)), "0.0") + ".transpose(1, 2)"
        w = ctx.once(f"{ctx.param('W')}.permute(2, 1, 0)", f"{op.param}_W")  # torch's [out, in/groups, k]
        b = ctx.param("bias") if a["with_bias"] else "None"
        total = self.span(a) - 1
        if a["padding"] == "same":
            pad = (total // 2, total - total // 2)
        elif a["padding"] == "causal":
            pad = (total, 0)
        else:  # frames on the right so that a batch shorter than the filter still convolves
            pad = (0, total)
        if pad != (0, 0):
            x = f"torch.nn.functional.pad({x}, {pad})"
        y = f"torch.nn.functional.conv1d({x}, {w}, {b}, {a['stride']}, 0, {a['dilation']}, {a['groups']})"
        return f"{y}.transpose(1, 2)"

    def eager(self, ctx, args, attrs, outs):
        import torch

        have, made = self._layout(attrs, args[0].dims)
        x = align_tensor(args[0].data, args[0].dims, have).transpose(1, 2)  # a static axis: any order
        w = ctx.param("W").permute(2, 1, 0)
        b = ctx.param("bias") if attrs["with_bias"] else None
        total = self.span(attrs) - 1
        if x.shape[-1] == 0 or (attrs["padding"] == "valid" and x.shape[-1] <= total):
            return x.new_zeros(x.shape[0], 0, w.shape[0])  # no frame in, or shorter than the filter: none out
        if attrs["padding"] == "same":
            x = torch.nn.functional.pad(x, (total // 2, total - total // 2))
        elif attrs["padding"] == "causal" and attrs["out_axis"] is None:  # else over a static window
            x = torch.nn.functional.pad(x, (total, 0))
        y = torch.nn.functional.conv1d(x, w, b, attrs["stride"], 0, attrs["dilation"], attrs["groups"])
        out_axis = attrs["out_axis"] or attrs["axis"]
        return align_tensor(y.transpose(1, 2), ("batch", out_axis, attrs["out_dim"]), outs[0].dims)


# the valid frames' mean and biased variance (m, v), and the running statistics moved toward them
# (after use, as RETURNN's `batch_norm`): the part both batch-norm helpers run
_BN_STATS = """axes = [i for i in range(x.dim() - 1)]  # a list: TorchScript has no tuple(range(...))
valid = torch.ones_like(x[..., :1]) if mask is None else mask.to(x.dtype).expand_as(x[..., :1])
n = valid.sum()
m = (x * valid).sum(axes) / n
v = ((x - m) ** 2 * valid).sum(axes) / n
with torch.no_grad():
    mean.add_((m - mean) * momentum)
    variance.add_((v - variance) * momentum)
"""

BN_HELPER = "masked_batch_norm"


def _bn_helper_source(name: str) -> str:
    return f'''def {name}(
    x, mask: torch.Tensor | None, mean, variance, gamma, beta, training: bool, momentum: float, eps: float
):
    """Batch norm over the feature (last) dim of x; `mask` (None: all) marks the valid frames.
    Training: the valid frames' mean and biased variance, then the running statistics move
    `momentum` towards them (after use, as RETURNN's `batch_norm`); else the running ones."""
    if training:
{textwrap.indent(_BN_STATS, " " * 8)}        mean, variance = m, v
    return (x - mean) * torch.rsqrt(variance + eps) * gamma + beta
'''


BN_MOVED_HELPER = "masked_batch_norm_moved"


def _bn_moved_helper_source(name: str) -> str:
    return f'''def {name}(
    x, mask: torch.Tensor | None, mean, variance, gamma, beta, training: bool, momentum: float, eps: float
):
    """`BatchNorm(update_in_inference=True)`: as `masked_batch_norm`, but also in inference the
    running statistics first move `momentum` towards the valid frames' and are then used (RETURNN's
    `batch_norm` defaults before behavior version 12)."""
{textwrap.indent(_BN_STATS, " " * 4)}    if training:
        mean, variance = m, v
    return (x - mean) * torch.rsqrt(variance + eps) * gamma + beta
'''


@register
class BatchNorm(OpDef):
    """`BatchNorm(eps=1e-3, momentum=0.1)(x)` on x [batch, feature] or [batch, time, feature]:
    per feature, (x - mean) / sqrt(variance + eps) * gamma + beta. In training, mean and (biased)
    variance of the valid frames of the batch, and the running statistics then move by
    `momentum` towards them; otherwise the running statistics, with `update_in_inference` first
    moved so too (RETURNN's defaults before behavior version 12: in inference the numbers depend
    on the batch). RETURNN `batch_norm` (param version 2, masked time); its variables are the roles
    `batch_norm/v2_mean`, `.../v2_variance` (not trained), `.../v2_gamma`, `.../v2_beta`."""

    name = "batch_norm"
    fn_name = "BatchNorm"
    module = True
    pure = False  # training updates the running statistics
    batch_statistics = True
    ROLES = ("batch_norm/v2_mean", "batch_norm/v2_variance", "batch_norm/v2_gamma", "batch_norm/v2_beta")
    param_init = dict(zip(ROLES, ("zeros", "ones", "ones", "zeros")))

    def ctor(self, eps=1e-3, momentum=0.1, update_in_inference=False):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        _float("BatchNorm", x)
        dyn = dt.dynamic(x.dims)
        if "batch" not in x.dims or len(dyn) > 1 or len(x.dims) != 2 + len(dyn):
            raise DimError(
                f"`BatchNorm` normalises [batch, feature] or [batch, time, feature], got [{', '.join(x.dims)}]"
            )
        dt.feature(x.dims)
        for k in ("eps", "momentum"):
            v = attrs[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (k == "momentum" and v > 1):
                raise DimError(
                    f"`BatchNorm` needs `{k}` to be a number in {'[0, 1]' if k == 'momentum' else '[0, inf)'}, got {v!r}"
                )
        if not isinstance(attrs["update_in_inference"], bool):
            raise DimError(
                f"`BatchNorm` needs `update_in_inference` to be True or False, got {attrs['update_in_inference']!r}"
            )
        if attrs["update_in_inference"] and not dyn:  # RETURNN: TF's fused batch norm, updated in training only
            raise DimError("`BatchNorm(update_in_inference=True)` normalises [batch, time, feature] only")
        return [OutType(x.dims)]

    def params(self, dt, args, attrs):
        feat = dt.feature(args[0].dims)
        return {role: (feat,) for role in self.ROLES}

    def returnn(self, ctx, op):
        dims = ctx.in_dims(0)
        return {
            "class": "batch_norm",
            "from": ctx.src(0),
            "in_dim": ctx.dim(dims[-1]),
            "epsilon": float(op.attrs["eps"]),
            "momentum": float(op.attrs["momentum"]),
            # in inference too: moved, then used (RETURNN's defaults before behavior version 12)
            "update_sample_only_in_training": not op.attrs["update_in_inference"],
            "delay_sample_update": not op.attrs["update_in_inference"],
            "param_version": 2,
            "masked_time": len(dims) == 3,  # statistics over the valid frames only
        }

    def batch_coupled(self, attrs):
        return bool(attrs["update_in_inference"])

    def torch_helpers(self, op):
        if op.attrs["update_in_inference"]:
            return {BN_MOVED_HELPER: _bn_moved_helper_source}
        return {BN_HELPER: _bn_helper_source}

    def torch(self, ctx, op):
        dims = ctx.in_dims(0)
        mask = ctx.mask(dims[1], dims) if len(dims) == 3 else "None"
        mean, var, gamma, beta = (ctx.param(r) for r in self.ROLES)
        a = op.attrs
        helper = BN_MOVED_HELPER if a["update_in_inference"] else BN_HELPER
        return (
            f"{ctx.helper(helper)}({ctx.arg(0)}, {mask}, {mean}, {var}, {gamma}, {beta}, {ctx.training}, "
            f"{float(a['momentum'])!r}, {float(a['eps'])!r})"
        )

    def eager(self, ctx, args, attrs, outs):
        import torch

        if ctx.training:  # one sequence at a time: the batch's statistics are not there
            raise EagerUnsupported(
                "eager mode runs one sequence at a time: `BatchNorm` in training mode needs the whole batch",
            )
        if attrs["update_in_inference"]:
            raise EagerUnsupported(
                "eager mode runs one sequence at a time: `BatchNorm(update_in_inference=True)` needs the whole batch",
            )
        mean, var, gamma, beta = (ctx.param(r) for r in self.ROLES)
        return (args[0].data - mean) * torch.rsqrt(var + float(attrs["eps"])) * gamma + beta
