"""The core ops (elementwise, creation, `Linear`, structure): dim rule, RETURNN layer,
PyTorch code and eager implementation. The ops over whole dims are in reductions.py, others in
the modules netc/ops/__init__.py imports. Adding an op means adding one class. Eager
implementations import torch lazily so that the compiler itself never loads it.
"""

from __future__ import annotations

import functools

from netc.ir.dims import DimError, DimTable
from netc.ir.model import Value
from netc.ops.align import align_code, align_tensor
from netc.ops.base import OpDef, OutType, register
from netc.ops.param_parts import param_part, tied_params
from netc.ops.param_parts import returnn_helpers as param_returnn_helpers
from netc.ops.rules import broadcast, check_out_dim


def dims_attr_names(axis) -> list[str]:
    """An `axis`/`reduce` attribute (one dim or a list of dims) as a list of dims."""
    return list(axis) if isinstance(axis, (list, tuple)) else [axis]


def _dims_attr(dt: DimTable, axis) -> list[str]:
    names = dims_attr_names(axis)
    for n in names:
        if not isinstance(n, str) or n not in dt.dims:
            raise DimError("`axis` must be a dim or a list of dims")
    return names


def _float_check(op: str, args: list[Value]) -> None:
    for a in args:
        if a.dtype != "float32":
            raise DimError(f"`{op}` needs float tensors, got {a.dtype}")


# --- elementwise -----------------------------------------------------------------------


class _Binary(OpDef):
    """`a <op> b` on tensors, or with one Python number (attr `scalar`, `scalar_left`)."""

    tensors = ("a", "b")
    symbol = ""
    combine_kind = ""
    torch_fn = ""

    def api(self, a, b):
        pass

    def infer(self, dt, args, attrs):
        if len({a.dtype for a in args}) > 1:
            raise DimError(f"operands of `{self.symbol}` have different dtypes")
        return [OutType(broadcast(dt, args, f"`{self.symbol}`"), args[0].dtype)]

    def _scalar_expr(self, attrs: dict, operand: str) -> str:
        s = repr(attrs["scalar"])
        return f"{s} {self.symbol} {operand}" if attrs.get("scalar_left") else f"{operand} {self.symbol} {s}"

    def returnn(self, ctx, op):
        if "scalar" in op.attrs:
            return {"class": "eval", "from": [ctx.src(0)], "eval": self._scalar_expr(op.attrs, "source(0)")}
        return {"class": "combine", "kind": self.combine_kind, "from": [ctx.src(0), ctx.src(1)]}

    def torch(self, ctx, op):
        dims = op.outs[0].dims
        if "scalar" in op.attrs:
            return self._scalar_expr(op.attrs, ctx.arg(0))
        return f"{ctx.aligned(0, dims)} {self.symbol} {ctx.aligned(1, dims)}"

    def eager(self, ctx, args, attrs, outs):
        dims = outs[0].dims
        xs = [align_tensor(a.data, a.dims, dims) for a in args]
        if "scalar" in attrs:
            s = attrs["scalar"]
            xs = [s, xs[0]] if attrs.get("scalar_left") else [xs[0], s]
        return self.apply(*xs)

    def apply(self, a, b):
        raise NotImplementedError


@register
class Add(_Binary):
    name, symbol, combine_kind = "add", "+", "add"

    def apply(self, a, b):
        return a + b


@register
class Sub(_Binary):
    name, symbol, combine_kind = "sub", "-", "sub"

    def apply(self, a, b):
        return a - b


@register
class Mul(_Binary):
    name, symbol, combine_kind = "mul", "*", "mul"

    def apply(self, a, b):
        return a * b


@register
class Div(_Binary):
    name, symbol, combine_kind = "div", "/", "truediv"

    def apply(self, a, b):
        return a / b


class _IntBinary(_Binary):
    """`a // b`, `a % b` of int32 tensors (labels' numbers: their class dim is not the result's),
    TF's floor semantics (torch's `rounding_mode="floor"`, `remainder`: the sign of the divisor).
    A number divisor must not be 0; a tensor's 0 is an error at run time, as in TF and torch."""

    tf_fn = ""

    def infer(self, dt, args, attrs):
        if any(a.dtype != "int32" for a in args):
            raise DimError(f"`{self.symbol}` takes int32 tensors (labels' numbers), got {args[0].dtype}")
        if "scalar" in attrs:
            s = attrs["scalar"]
            if isinstance(s, bool) or not isinstance(s, int):
                raise DimError(f"`{self.symbol}` of an int32 tensor and the number {s!r} (an integer is needed)")
            if attrs.get("scalar_left"):
                raise DimError(
                    f"`{s} {self.symbol} x` of a number and a tensor is not supported (`x {self.symbol} n` is)"
                )
            if s == 0:
                raise DimError(f"`{self.symbol} 0`: division by zero")
        return [OutType(broadcast(dt, args, f"`{self.symbol}`"), "int32")]

    def returnn(self, ctx, op):
        # an `eval` with a dense int32 output: of labels, RETURNN would keep their class dim
        if "scalar" in op.attrs:
            code, srcs = f"tf.math.{self.tf_fn}(source(0), {op.attrs['scalar']!r})", [ctx.src(0)]
        else:
            code, srcs = f"tf.math.{self.tf_fn}(source(0), source(1))", [ctx.src(0), ctx.src(1)]
        return {"class": "eval", "from": srcs, "eval": code, "out_type": {"dtype": "int32", "sparse": False}}

    def torch(self, ctx, op):
        dims = op.outs[0].dims
        a = ctx.arg(0) if "scalar" in op.attrs else ctx.aligned(0, dims)
        b = repr(op.attrs["scalar"]) if "scalar" in op.attrs else ctx.aligned(1, dims)
        return self.torch_code(a, b)

    def torch_code(self, a: str, b: str) -> str:
        raise NotImplementedError


@register
class FloorDiv(_IntBinary):
    name, symbol, tf_fn = "floordiv", "//", "floordiv"

    def torch_code(self, a: str, b: str) -> str:
        return f'torch.div({a}, {b}, rounding_mode="floor")'

    def apply(self, a, b):
        import torch

        return torch.div(a, b, rounding_mode="floor")


@register
class Mod(_IntBinary):
    name, symbol, tf_fn = "mod", "%", "floormod"

    def torch_code(self, a: str, b: str) -> str:
        return f"torch.remainder({a}, {b})"

    def apply(self, a, b):
        import torch

        return torch.remainder(a, b)


class _Compare(_Binary):
    """Elementwise comparison: a bool tensor (RETURNN `compare`, torch operators)."""

    flipped = ""  # the comparison with operands swapped, for `number < tensor`

    def infer(self, dt, args, attrs):
        if len({a.dtype for a in args}) > 1:  # RETURNN's `compare` (TF) takes one dtype
            raise DimError(f"operands of `{self.symbol}` have different dtypes: {args[0].dtype} and {args[1].dtype}")
        return [OutType(broadcast(dt, args, f"`{self.symbol}`"), "bool")]

    def returnn(self, ctx, op):
        if "scalar" in op.attrs:
            kind = REGISTRY_COMPARE_KIND[self.flipped if op.attrs.get("scalar_left") else self.name]
            return {"class": "compare", "kind": kind, "from": [ctx.src(0)], "value": op.attrs["scalar"]}
        return {"class": "compare", "kind": REGISTRY_COMPARE_KIND[self.name], "from": [ctx.src(0), ctx.src(1)]}

    def apply(self, a, b):
        import operator

        return getattr(operator, self.name)(a, b)


REGISTRY_COMPARE_KIND = {
    "eq": "equal",
    "ne": "not_equal",
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
}
for _name, _sym, _flip in [
    ("eq", "==", "eq"),
    ("ne", "!=", "ne"),
    ("lt", "<", "gt"),
    ("le", "<=", "ge"),
    ("gt", ">", "lt"),
    ("ge", ">=", "le"),
]:
    register(type(f"Compare_{_name}", (_Compare,), {"name": _name, "symbol": _sym, "flipped": _flip}))


class _Unary(OpDef):
    """A float → float function applied elementwise."""

    activation = ""  # RETURNN activation name
    torch_fn = ""  # torch function, e.g. "torch.tanh"

    def infer(self, dt, args, attrs):
        _float_check(self.fn_name or self.name, args)
        return [OutType(args[0].dims)]

    def returnn(self, ctx, op):
        return {"class": "activation", "activation": self.activation, "from": ctx.src(0)}

    def torch(self, ctx, op):
        return f"{self.torch_fn}({ctx.arg(0)})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        fn = functools.reduce(getattr, self.torch_fn.split(".")[1:], torch)  # e.g. torch.nn.functional.gelu
        return fn(args[0].data)


def _unary(name: str, activation: str, torch_fn: str) -> None:
    cls = type(
        name.capitalize(), (_Unary,), {"name": name, "fn_name": name, "activation": activation, "torch_fn": torch_fn}
    )
    register(cls)


for _n, _act, _fn in [
    ("tanh", "tanh", "torch.tanh"),
    ("sigmoid", "sigmoid", "torch.sigmoid"),
    ("relu", "relu", "torch.relu"),
    ("gelu", "gelu", "torch.nn.functional.gelu"),
    ("exp", "exp", "torch.exp"),
    ("log", "log", "torch.log"),
    ("sqrt", "sqrt", "torch.sqrt"),
    # half to even on every target (TensorFlow's `tf.round`, torch's `torch.round`): 2.5 -> 2.0
    ("round", "round", "torch.round"),
]:
    _unary(_n, _act, _fn)


@register
class Neg(OpDef):
    name = "neg"

    def infer(self, dt, args, attrs):
        return [OutType(args[0].dims, args[0].dtype)]

    def returnn(self, ctx, op):
        return {"class": "eval", "from": [ctx.src(0)], "eval": "-source(0)"}

    def torch(self, ctx, op):
        return f"-{ctx.arg(0)}"

    def eager(self, ctx, args, attrs, outs):
        return -args[0].data


# --- creation --------------------------------------------------------------------------


class _Fill(OpDef):
    """A constant tensor over `dims` (batch, static and dynamic dims; a dynamic dim's lengths come
    from where it was made: an input, a loop or an op such as `max_pool`)."""

    tensors = ()
    fill: float = 0.0

    def api(self, *dims):
        pass

    def bind(self, args, kwargs):
        if kwargs:
            raise TypeError(f"{self.fn_name}() takes only dims")
        return [], {"dims": list(args)}

    def infer(self, dt, args, attrs):
        dims = attrs["dims"]
        for d in dims:
            if not isinstance(d, str) or d not in dt.dims:
                raise DimError(f"`{self.fn_name}` takes dims")
        if len(set(dims)) != len(dims):
            raise DimError(f"`{self.fn_name}`: a dim appears twice in ({', '.join(dims)})")
        dt.check_lengths(dims, self.fn_name)
        return [OutType(dt.canonical(dims))]

    def _value(self, attrs):
        return attrs.get("value", self.fill)

    def returnn(self, ctx, op):
        out = op.outs[0]
        layer = {"class": "constant", "value": self._value(op.attrs), "shape": [ctx.dim(d) for d in out.dims]}
        if out.dtype != "float32":
            layer["dtype"] = out.dtype
        if out.sparse_dim:
            layer["sparse_dim"] = ctx.dim(out.sparse_dim)
        # dims made by an op or a loop get their lengths when that layer is built: build it first
        deps = [ctx.dim_source(d) for d in out.dims if ctx.is_dynamic(d)]
        if any(deps):
            layer["shape_deps"] = list(dict.fromkeys(x for x in deps if x))
        return layer

    def torch(self, ctx, op):
        out = op.outs[0]
        shape = ", ".join(ctx.size(d) for d in out.dims)
        comma = "," if len(out.dims) == 1 else ""
        dtype = {"int32": "torch.long", "bool": "torch.bool"}.get(out.dtype, ctx.float_dtype)
        return f"torch.full(({shape}{comma}), {self._value(op.attrs)!r}, dtype={dtype}, device={ctx.device})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        dtype = {"int32": torch.long, "bool": torch.bool}.get(outs[0].dtype, torch.float32)
        return torch.full(tuple(ctx.size(d) for d in outs[0].dims), self._value(attrs), dtype=dtype)


@register
class Zeros(_Fill):
    name = fn_name = "zeros"
    fill = 0.0


@register
class Ones(_Fill):
    name = fn_name = "ones"
    fill = 1.0


@register
class Full(_Fill):
    """`full(*dims, value=v, dtype="float32", class_dim=None)`: `value` everywhere. With
    `class_dim=vocab` the result is int32 labels over that class dim (e.g. a BOS label:
    `full(batch, value=0, class_dim=vocab)`), usable wherever `Labels` are."""

    name = fn_name = "full"

    def api(self, *dims, value, dtype=None, class_dim=None):
        pass

    def bind(self, args, kwargs):
        import inspect

        bound = inspect.signature(self.api).bind(*args, **kwargs).arguments  # TypeError on misuse
        attrs = {"dims": list(bound.get("dims", ())), "value": bound["value"]}
        attrs.update({k: bound[k] for k in ("dtype", "class_dim") if bound.get(k) is not None})
        return [], attrs

    @staticmethod
    def _dtype(attrs) -> str:
        return attrs.get("dtype") or ("int32" if attrs.get("class_dim") is not None else "float32")

    def infer(self, dt, args, attrs):
        outs = super().infer(dt, args, attrs)
        value, class_dim, dtype = attrs["value"], attrs.get("class_dim"), self._dtype(attrs)
        if dtype not in ("float32", "int32", "bool"):
            raise DimError(f"`full` dtype must be one of 'float32', 'int32', 'bool', got {dtype!r}")
        if isinstance(value, bool) != (dtype == "bool") or not isinstance(value, (int, float)):
            raise DimError(f"`full` of dtype {dtype} cannot hold the value {value!r}")
        if dtype == "int32" and not isinstance(value, int):
            raise DimError(f"`full` of dtype int32 needs an integer value, got {value!r}")
        if class_dim is not None:
            if dtype != "int32":
                raise DimError(f"`full` with a class dim makes int32 labels, not {dtype}")
            if not isinstance(class_dim, str) or class_dim not in dt.dims or dt[class_dim].kind != "static":
                raise DimError("`full` needs `class_dim` to be a static dim")
            if not 0 <= value < dt[class_dim].size:
                raise DimError(f"label {value} is not a class of `{class_dim}` (0..{dt[class_dim].size - 1})")
            if class_dim in outs[0].dims:
                raise DimError(f"the class dim `{class_dim}` cannot also be a dim of the labels")
        return [OutType(outs[0].dims, dtype, sparse_dim=class_dim)]

    def _value(self, attrs):
        return float(attrs["value"]) if self._dtype(attrs) == "float32" else attrs["value"]


# --- modules ---------------------------------------------------------------------------


@register
class Linear(OpDef):
    """`Linear(out_dim, with_bias=True)(x)`: x @ W + b over x's feature dim."""

    name = "linear"
    fn_name = "Linear"
    module = True
    weights = {"weight": "W"}

    def ctor(self, out_dim, with_bias=True):
        pass

    def infer(self, dt, args, attrs):
        _float_check("Linear", args)
        x = args[0]
        feat = dt.feature(x.dims)
        out = attrs["out_dim"]
        check_out_dim(dt, "Linear", out, tuple(d for d in x.dims if d != feat))
        return [OutType(dt.canonical([d for d in x.dims if d != feat] + [out]))]

    def params(self, dt, args, attrs):
        feat = dt.feature(args[0].dims)
        p = {"W": (feat, attrs["out_dim"])}
        if attrs.get("with_bias", True):
            p["b"] = (attrs["out_dim"],)
        return p

    # `attrs["rows"]`: the rows of the module's kernel this op reads (the `split_linear` pass
    # made it from a Linear over a concat; the module's W is the whole kernel)
    def returnn(self, ctx, op):
        layer = {
            "class": "linear",
            "from": ctx.src(0),
            "out_dim": ctx.dim(op.attrs["out_dim"]),
            "with_bias": bool(op.attrs.get("with_bias", True)),
        }
        rows = op.attrs.get("rows")
        if rows is not None:  # RETURNN wants a getter for each of the layer's parameters
            parts = {"W": param_part(ctx.variable("W"), list(ctx.param_shape("W")), rows=list(rows))}
            if layer["with_bias"]:
                parts["b"] = param_part(ctx.variable("b"), list(ctx.param_shape("b")))
            layer["reuse_params"] = {"map": parts}
        return tied_params(ctx, op, layer, ["W", "b"] if layer["with_bias"] else ["W"])

    def returnn_helpers(self, op):
        return param_returnn_helpers() if "rows" in op.attrs or "tied" in op.attrs else {}

    # canonical order keeps the one static (feature) dim last: a plain matmul contracts it;
    # with a bias, `linear` adds it in the same matrix multiply (addmm), W [in, out] seen as [out, in]
    def torch(self, ctx, op):
        if op.attrs.get("with_bias", True):
            w = self.weight(ctx, op)  # [out, in] for `linear`: an embedding's table as it is
            w = w.removesuffix(".t()") if op.transposed("W") else f"{w}.t()"
            return f"torch.nn.functional.linear({ctx.arg(0)}, {w}, {ctx.param('b')})"
        return f"torch.matmul({ctx.arg(0)}, {self.weight(ctx, op)})"

    def weight(self, ctx, op) -> str:
        """The kernel [in, out] in torch code: for a part, its rows (sliced once per call)."""
        w = ctx.param("W")
        rows = op.attrs.get("rows")
        if rows is None:
            return w
        return ctx.once(f"{w}[{rows[0]}:{rows[1]}]", f"{op.param}_W_{rows[0]}_{rows[1]}")

    def eager(self, ctx, args, attrs, outs):
        import torch

        y = torch.matmul(args[0].data, ctx.param("W"))
        return y + ctx.param("b") if attrs.get("with_bias", True) else y


# --- structure -------------------------------------------------------------------------


@register
class Split(OpDef):
    """`split(x, n)` into n equal parts of the feature dim, or `split(x, [d1, d2])`; with
    `axis=d` the parts of static dim `d` of a value with several (a per-head projection)."""

    name = fn_name = "split"

    def api(self, x, parts, axis=None):
        pass

    def _axis(self, dt: DimTable, x: Value, axis) -> str:
        if axis is None:
            return dt.feature(x.dims)
        if not isinstance(axis, str) or axis not in x.dims or dt[axis].kind != "static":
            raise DimError(f"split's `axis` must be a static dim of [{', '.join(x.dims)}]")
        return axis

    def _part_dims(self, dt: DimTable, feat: str, parts) -> list[str]:
        if isinstance(parts, int) and not isinstance(parts, bool):
            if parts < 1:
                raise DimError("split needs a positive number of parts")
            return [dt.part(feat, parts).name] * parts
        if isinstance(parts, (list, tuple)) and all(isinstance(p, str) and p in dt.dims for p in parts):
            total = sum(dt[p].size or 0 for p in parts)
            if total != dt[feat].size:
                raise DimError(f"split parts sum to {total}, but `{feat}` has size {dt[feat].size}")
            return list(parts)
        raise DimError("split(x, n) takes a number of parts or a list of dims")

    def infer(self, dt, args, attrs):
        x = args[0]
        feat = self._axis(dt, x, attrs.get("axis"))
        parts = self._part_dims(dt, feat, attrs["parts"])
        rest = [d for d in x.dims if d != feat]
        for p in parts:
            if p in rest:
                raise DimError(f"split part dim `{p}` is already a dim of the input")
        return [OutType(dt.canonical(rest + [p]), x.dtype) for p in parts]

    @staticmethod
    def _split_axis(x_dims: tuple[str, ...], outs) -> str:
        """The dim split: the one input dim no part has."""
        return [d for d in x_dims if d not in outs[0].dims][0]

    def returnn(self, ctx, op):
        return {
            "class": "split",
            "from": ctx.src(0),
            "axis": ctx.dim(self._split_axis(ctx.in_dims(0), op.outs)),
            "out_dims": [ctx.dim(self._part(o.dims, ctx.in_dims(0))) for o in op.outs],
        }

    @staticmethod
    def _part(out_dims: tuple[str, ...], x_dims: tuple[str, ...]) -> str:
        return [d for d in out_dims if d not in x_dims][0]

    def returnn_outs(self, layer, op):
        return [f"{layer}/{i}" for i in range(len(op.outs))]

    def _in_place(self, x_dims: tuple[str, ...], outs) -> tuple[int, list[tuple[str, ...]]]:
        """The split dim's position in x, and each part's dims as `torch.split` leaves them."""
        k = x_dims.index(self._split_axis(x_dims, outs))
        return k, [(*x_dims[:k], self._part(o.dims, x_dims), *x_dims[k + 1 :]) for o in outs]

    def torch(self, ctx, op):
        x_dims = ctx.in_dims(0)
        k, srcs = self._in_place(x_dims, op.outs)
        sizes = [ctx.size(self._part(o.dims, x_dims)) for o in op.outs]
        if all(src == o.dims for src, o in zip(srcs, op.outs)):  # parts in place: the feature dim's split
            return f"torch.split({ctx.arg(0)}, [{', '.join(sizes)}], dim={k if k < len(x_dims) - 1 else -1})"
        # a part whose dim sorts elsewhere among the static dims: each part a view, aligned
        starts = ["0"]
        for s in sizes[:-1]:
            last = starts[-1]
            if last.isdigit() and s.isdigit():
                starts.append(str(int(last) + int(s)))
            else:
                starts.append(s if last == "0" else f"{last} + {s}")
        parts = [
            align_code(f"{ctx.arg(0)}.narrow({k}, {start}, {size})", src, o.dims)
            for start, size, src, o in zip(starts, sizes, srcs, op.outs)
        ]
        return f"({', '.join(parts)})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        x_dims = args[0].dims
        k, srcs = self._in_place(x_dims, outs)
        sizes = [ctx.size(self._part(o.dims, x_dims)) for o in outs]
        pieces = torch.split(args[0].data, sizes, dim=k)
        return tuple(align_tensor(p, src, o.dims) for p, src, o in zip(pieces, srcs, outs))


@register
class Concat(OpDef):
    """`concat(a, b, ...)` along the feature dims."""

    name = fn_name = "concat"
    tensors = ("xs",)

    def api(self, *xs):
        pass

    def infer(self, dt, args, attrs):
        if len(args) < 2:
            raise DimError("concat needs at least two tensors")
        feats = [dt.feature(a.dims) for a in args]
        rests = [tuple(d for d in a.dims if d != f) for a, f in zip(args, feats)]
        if len(set(rests)) != 1:
            raise DimError(
                "concat inputs must agree on all dims but the feature dim: "
                + " vs ".join(f"[{', '.join(r)}]" for r in rests)
            )
        out = dt.concat(feats)
        return [OutType(dt.canonical(list(rests[0]) + [out.name]), args[0].dtype)]

    def returnn(self, ctx, op):
        srcs = [[ctx.src(i), ctx.dim(ctx.in_dims(i)[-1])] for i in range(len(op.args))]
        layer = {"class": "concat", "from": [tuple(s) for s in srcs], "out_dim": ctx.dim(op.outs[0].dims[-1])}
        if ctx.in_unit:  # RETURNN may stack one operand's frames after the loop and not the other's
            layer["allow_broadcast"] = True
        return layer

    def torch(self, ctx, op):
        return f"torch.cat([{', '.join(ctx.arg(i) for i in range(len(op.args)))}], dim=-1)"

    def eager(self, ctx, args, attrs, outs):
        import torch

        return torch.cat([a.data for a in args], dim=-1)


@register
class Expand(OpDef):
    """`expand(x, dim)`: x repeated along a new dim (explicit broadcasting, see `rules.broadcast`)."""

    name = fn_name = "expand"

    def api(self, x, dim):
        pass

    def infer(self, dt, args, attrs):
        d = attrs["dim"]
        if not isinstance(d, str) or d not in dt.dims or dt[d].kind == "batch":
            raise DimError("`expand(x, dim)` takes a dim other than batch")
        if d in args[0].dims:
            raise DimError(f"`{d}` is already a dim of [{', '.join(args[0].dims)}]")
        dt.check_lengths([d], self.fn_name)
        x = args[0]
        return [OutType(dt.canonical((*x.dims, d)), x.dtype, sparse_dim=x.sparse_dim)]

    def returnn(self, ctx, op):
        d = op.attrs["dim"]
        dep = ctx.dim_source(d) if ctx.is_dynamic(d) else None
        # A dynamic dim goes where RETURNN's time axis is ("T"), a static one last (RETURNN counts an
        # int axis batch-major, and a layer it moves out of a loop has the loop's axis too: a count
        # from the front would put the dim elsewhere than the frames' template). A value of batch
        # alone has no time axis: "T" puts the new dim first, as its feature axis. In a unit the
        # dim goes last too (first, the frames' template would differ from the layer RETURNN
        # moves out of the loop); at the top level it is made the time axis: a loss over it has
        # none to sum the valid frames along otherwise ("Loss flattening not implemented")
        # (the same for a value of static dims over a dim an op or a loop made: the `switch` below
        # sets no time axis)
        alone = ctx.in_dims(0) == ("batch",)
        static = "batch" in ctx.in_dims(0) and not any(ctx.is_dynamic(x) for x in ctx.in_dims(0))
        as_time = ctx.is_dynamic(d) and not ctx.in_unit and (alone or (static and bool(dep)))
        if not dep:
            # an int axis needs a batch dim; "f" puts the new axis after the feature axis or last,
            # for a value without batch (`range_over(half)`)
            axis = ("T" if ctx.is_dynamic(d) and not alone else -1) if "batch" in ctx.in_dims(0) else "f"
            layer = {"class": "expand_dims", "from": ctx.src(0), "axis": axis, "dim": ctx.dim(d)}
            if not as_time:
                return layer
            sub = {"expanded": {**layer, "from": "data"}}
        else:
            # a dim made by an op or a loop gets its lengths when that layer is built, which must come
            # first (`expand_dims` has no `shape_deps`): a `switch` on a mask over the dim that has them
            mask = {
                "class": "constant",
                "value": True,
                "dtype": "bool",
                "shape": [ctx.dim(d)],
                "shape_deps": [f"base:{dep}"],
            }
            switch = {"class": "switch", "condition": "mask", "true_from": "data", "false_from": "data"}
            sub = {"mask": mask, "expanded": switch}
            if ctx.in_unit:
                # the `switch` puts the dim where RETURNN adds a new one, which depends on the data's
                # other axes: elsewhere in the frames' template than in the layer RETURNN moves out
                # of the loop (stacked over the loop's axis); last in both
                last = {"class": "transpose", "from": "switched", "perm": {-1: ctx.dim(d)}}
                sub = {"mask": mask, "switched": switch, "expanded": last}
        if as_time:
            axes = {"T": ctx.dim(d), "F": None} if alone else {"T": ctx.dim(d)}
            sub["output"] = {"class": "reinterpret_data", "from": "expanded", "set_axes": axes}
        else:
            sub["output"] = sub.pop("expanded")
        return {"class": "subnetwork", "from": ctx.src(0), "subnetwork": sub}

    def torch(self, ctx, op):
        dims = op.outs[0].dims
        return f"{ctx.aligned(0, dims)}.expand({', '.join(ctx.size(d) for d in dims)})"

    def eager(self, ctx, args, attrs, outs):
        dims = outs[0].dims
        x = align_tensor(args[0].data, args[0].dims, dims)
        while x.dim() < len(dims):
            x = x.unsqueeze(0)
        # x's own dims keep their sizes (a dim a loop made has no length known outside its value)
        return x.expand(*(-1 if d in args[0].dims else ctx.size(d) for d in dims))
