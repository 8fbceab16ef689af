"""Elementwise ops beyond the arithmetic operators: `maximum`, `minimum`, `clip`, `abs`, `x ** k`.

Each is one class with its dim rule, RETURNN layer, PyTorch code and eager implementation
(see `netc.ops.base`). `maximum`/`minimum` broadcast like `+` (`rules.broadcast`) and take a
Python number for either operand.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.base import OpDef, OutType, register
from netc.ops.defs import _Binary


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _numeric(op: str, dtype: str) -> None:
    if dtype not in ("float32", "int32"):
        raise DimError(f"`{op}` needs float or int tensors, got {dtype}")


class _Extremum(_Binary):
    """`maximum(a, b)` / `minimum(a, b)`: elementwise, broadcasting like `+`; RETURNN `combine`."""

    def bind(self, args, kwargs):
        import inspect

        bound = inspect.signature(self.api).bind(*args, **kwargs).arguments  # TypeError on misuse
        a, b = bound["a"], bound["b"]
        if _number(a) and _number(b):
            raise TypeError("needs at least one tensor")
        if _number(b):
            return [a], {"scalar": b, "scalar_left": False}
        if _number(a):
            return [b], {"scalar": a, "scalar_left": True}
        return [a, b], {}

    def infer(self, dt, args, attrs):
        outs = super().infer(dt, args, attrs)
        _numeric(self.name, outs[0].dtype)
        if outs[0].dtype == "int32" and "scalar" in attrs and not isinstance(attrs["scalar"], int):
            raise DimError(f"`{self.name}` of an int tensor and the number {attrs['scalar']!r}")
        return outs

    def returnn(self, ctx, op):
        if "scalar" in op.attrs:  # symmetric: the number's side does not matter
            return {"class": "eval", "from": [ctx.src(0)], "eval": f"tf.{self.name}(source(0), {op.attrs['scalar']!r})"}
        if self.name == "maximum" and op.outs[0].dtype == "float32":
            # TensorFlow's graph optimizer (grappler's remapper) rewrites `maximum(x * c, x)` into
            # `LeakyRelu(x, alpha=c)`, which for c > 1 gives x where x > 0: the same maximum through
            # `minimum` of the negated operands, which it leaves alone (and which is exact)
            return {"class": "eval", "from": [ctx.src(0), ctx.src(1)], "eval": "-tf.minimum(-source(0), -source(1))"}
        return {"class": "combine", "kind": self.name, "from": [ctx.src(0), ctx.src(1)]}

    def torch(self, ctx, op):
        if "scalar" in op.attrs:
            clamp = "clamp_min" if self.name == "maximum" else "clamp_max"
            return f"torch.{clamp}({ctx.arg(0)}, {op.attrs['scalar']!r})"
        dims = op.outs[0].dims
        return f"torch.{self.name}({ctx.aligned(0, dims)}, {ctx.aligned(1, dims)})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        from netc.ops.align import align_tensor

        dims = outs[0].dims
        xs = [align_tensor(a.data, a.dims, dims) for a in args]
        if "scalar" in attrs:
            clamp = torch.clamp_min if self.name == "maximum" else torch.clamp_max
            return clamp(xs[0], attrs["scalar"])
        return getattr(torch, self.name)(*xs)


@register
class Maximum(_Extremum):
    name = fn_name = "maximum"
    symbol = "maximum"


@register
class Minimum(_Extremum):
    name = fn_name = "minimum"
    symbol = "minimum"


@register
class Clip(OpDef):
    """`clip(x, lo, hi)`: x limited to [lo, hi] (numbers, lo <= hi); `tf.clip_by_value`, `torch.clamp`."""

    name = fn_name = "clip"

    def api(self, x, lo, hi):
        pass

    def infer(self, dt, args, attrs):
        lo, hi = attrs["lo"], attrs["hi"]
        if not (_number(lo) and _number(hi)) or lo > hi:
            raise DimError(f"`clip(x, lo, hi)` takes numbers lo <= hi, got {lo!r} and {hi!r}")
        if args[0].dtype != "float32":
            raise DimError(f"`clip` needs a float tensor, got {args[0].dtype}")
        return [OutType(args[0].dims)]

    def returnn(self, ctx, op):
        lo, hi = float(op.attrs["lo"]), float(op.attrs["hi"])
        return {"class": "eval", "from": [ctx.src(0)], "eval": f"tf.clip_by_value(source(0), {lo!r}, {hi!r})"}

    def torch(self, ctx, op):
        return f"torch.clamp({ctx.arg(0)}, {float(op.attrs['lo'])!r}, {float(op.attrs['hi'])!r})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        return torch.clamp(args[0].data, float(attrs["lo"]), float(attrs["hi"]))


@register
class Abs(OpDef):
    """`abs(x)` (the builtin on a tensor, or `netc.abs`)."""

    name = fn_name = "abs"

    def api(self, x):
        pass

    def infer(self, dt, args, attrs):
        _numeric("abs", args[0].dtype)
        return [OutType(args[0].dims, args[0].dtype)]

    def returnn(self, ctx, op):
        return {"class": "eval", "from": [ctx.src(0)], "eval": "tf.abs(source(0))"}

    def torch(self, ctx, op):
        return f"torch.abs({ctx.arg(0)})"

    def eager(self, ctx, args, attrs, outs):
        return args[0].data.abs()


@register
class Pow(OpDef):
    """`x ** k` with a float tensor x and a number k (attr `scalar`, as the operators pass it);
    a negative base with a non-integer k gives NaN, as in TF and torch."""

    name = "pow"

    def infer(self, dt, args, attrs):
        if len(args) != 1 or attrs.get("scalar_left") or not _number(attrs.get("scalar")):
            raise DimError("`**` takes a float tensor and a number: `x ** k`")
        if args[0].dtype != "float32":
            raise DimError(f"`**` needs a float tensor, got {args[0].dtype}")
        return [OutType(args[0].dims)]

    def returnn(self, ctx, op):
        return {"class": "eval", "from": [ctx.src(0)], "eval": f"tf.pow(source(0), {float(op.attrs['scalar'])!r})"}

    def torch(self, ctx, op):
        return f"torch.pow({ctx.arg(0)}, {op.attrs['scalar']!r})"

    def eager(self, ctx, args, attrs, outs):
        return args[0].data ** attrs["scalar"]
