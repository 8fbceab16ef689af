"""Neural-network ops: embeddings, layer norm, labels (argmax), selection, casts, gradient
stopping and dropout (losses: `netc.ops.losses`).

Each op is one class with its dim rule, its RETURNN layer, its PyTorch code and its eager
implementation, as in `netc.ops.defs`. Parameter roles are RETURNN's own variable names
for the layer used (`linear` on sparse input: `W`; `layer_norm`: `scale`, `bias`).
"""

from __future__ import annotations

from netc.ir.dims import DimError, DimTable
from netc.ir.model import Value
from netc.naming import Code
from netc.ops.align import align_code, align_tensor, where_valid
from netc.ops.base import OpDef, OutType, register, signature
from netc.ops.param_parts import returnn_helpers as param_returnn_helpers
from netc.ops.param_parts import tied_params
from netc.ops.rules import broadcast, check_out_dim

DTYPES = ("float32", "int32", "bool")
LAYER_NORM_EPS = 1e-6  # RETURNN's `layer_norm` default (LayerNormLayer.__init__)
_TORCH_CAST = {"float32": "float", "int32": "long", "bool": "bool"}


def _one_dim(dt: DimTable, x: Value, axis, what: str) -> str:
    if not isinstance(axis, str) or axis not in dt.dims:
        raise DimError(f"`{what}` needs `axis` to be one dim")
    if axis not in x.dims:
        raise DimError(f"`axis` `{axis}` is not a dim of [{', '.join(x.dims)}]")
    if dt[axis].kind == "batch":
        raise DimError(f"`{what}` over the batch dim is not allowed")
    return axis


def _float(what: str, v: Value) -> None:
    if v.dtype != "float32":
        raise DimError(f"`{what}` needs a float tensor, got {v.dtype}")


def _labels(what: str, v: Value, dt: DimTable) -> str | None:
    """Check that `v` is int32 labels; their class dim (None when not known, see below)."""
    if v.dtype != "int32":
        raise DimError(f"`{what}` needs int32 labels (e.g. a `Labels[...]` input), got a {v.dtype} tensor")
    if v.sparse_dim is None:
        raise DimError(f"`{what}` needs labels with a class dim (`Labels[..., vocab]` or `argmax`)")
    return v.sparse_dim


# --- modules ---------------------------------------------------------------------------


@register
class Embedding(OpDef):
    """`Embedding(out_dim)(labels)`: row `labels` of W [vocab, out_dim].

    RETURNN: a `linear` layer without bias on the sparse input (an embedding lookup of its
    `W`, shape [vocab, out_dim]), so the variable is `<path>/W`.
    """

    name = "embedding"
    fn_name = "Embedding"
    module = True
    weights = {"weight": "W"}

    def ctor(self, out_dim):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        cls = _labels("Embedding", x, dt)  # int32 labels with a class dim
        if cls is not None and dt[cls].kind == "dynamic":  # W's rows would be as many as a batch's frames
            raise DimError(
                f"`Embedding` needs labels over a static class dim (a vocabulary); these are positions in "
                f"the frames of dynamic dim `{cls}`: read the chosen frame with `dot(one_hot(...), ..., reduce={cls})`"
            )
        out = attrs["out_dim"]
        check_out_dim(dt, "Embedding", out, x.dims)  # the class dim is no dim of the labels
        return [OutType(dt.canonical([*x.dims, out]))]

    def params(self, dt, args, attrs):
        return {"W": (args[0].sparse_dim, attrs["out_dim"])}

    def returnn(self, ctx, op):
        out = ctx.dim(op.attrs["out_dim"])
        # `out_type` dim: labels from a layer (e.g. `reduce` argmax) say "no feature axis",
        # which the linear layer would otherwise carry over to its dense output
        layer = {
            "class": "linear",
            "from": ctx.src(0),
            "out_dim": out,
            "with_bias": False,
            "out_type": {"dim": Code(f"{out}.dimension")},
        }
        return tied_params(ctx, op, layer, ["W"])

    def returnn_helpers(self, op):
        return param_returnn_helpers() if "tied" in op.attrs else {}

    def torch(self, ctx, op):
        src = (*ctx.in_dims(0), op.attrs["out_dim"])
        return align_code(f"torch.nn.functional.embedding({ctx.arg(0)}, {ctx.param('W')})", src, op.outs[0].dims)

    def eager(self, ctx, args, attrs, outs):
        import torch

        y = torch.nn.functional.embedding(args[0].data, ctx.param("W"))
        return align_tensor(y, (*args[0].dims, attrs["out_dim"]), outs[0].dims)


@register
class LayerNorm(OpDef):
    """`LayerNorm(eps=1e-6, with_bias=True)(x)`: normalise over the feature dim (biased variance,
    `eps` added to it), then `* scale + bias` (`* scale` without bias).

    RETURNN `layer_norm` (variables `scale`, `bias`; its epsilon 1e-6 by default); without bias a
    `norm` layer over the feature dim with `bias: False` (variable `scale`).
    """

    name = "layer_norm"
    fn_name = "LayerNorm"
    module = True
    param_init = {"scale": "ones", "bias": "zeros"}  # RETURNN's initialisers

    def ctor(self, eps=LAYER_NORM_EPS, with_bias=True):
        pass

    def infer(self, dt, args, attrs):
        _float("LayerNorm", args[0])
        dt.feature(args[0].dims)
        eps = attrs.get("eps", LAYER_NORM_EPS)
        if isinstance(eps, bool) or not isinstance(eps, int | float) or eps < 0:
            raise DimError(f"`LayerNorm` needs `eps` to be a number >= 0, got {eps!r}")
        return [OutType(args[0].dims)]

    def params(self, dt, args, attrs):
        feat = dt.feature(args[0].dims)
        return {"scale": (feat,), "bias": (feat,)} if attrs.get("with_bias", True) else {"scale": (feat,)}

    def returnn(self, ctx, op):
        feat = ctx.in_dims(0)[-1]  # canonical order: the one static (feature) dim is last
        eps = float(op.attrs.get("eps", LAYER_NORM_EPS))
        if not op.attrs.get("with_bias", True):
            return {"class": "norm", "from": ctx.src(0), "axis": ctx.dim(feat), "bias": False, "epsilon": eps}
        return {"class": "layer_norm", "from": ctx.src(0), "in_dim": ctx.dim(feat), "epsilon": eps}

    # canonical order keeps the one static (feature) dim last
    def torch(self, ctx, op):
        feat = op.outs[0].dims[-1]
        bias = ctx.param("bias") if op.attrs.get("with_bias", True) else "None"
        eps = float(op.attrs.get("eps", LAYER_NORM_EPS))
        return (
            f"torch.nn.functional.layer_norm({ctx.arg(0)}, ({ctx.size(feat)},), "
            f"{ctx.param('scale')}, {bias}, eps={eps!r})"
        )

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0].data
        bias = ctx.param("bias") if attrs.get("with_bias", True) else None
        eps = float(attrs.get("eps", LAYER_NORM_EPS))
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), ctx.param("scale"), bias, eps=eps)


# --- labels ----------------------------------------------------------------------------


@register
class Argmax(OpDef):
    """`argmax(x, axis=dim)`: int32 labels over the other dims, with `axis` as class dim."""

    name = fn_name = "argmax"

    def api(self, x, axis):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        _float("argmax", x)
        axis = _one_dim(dt, x, attrs["axis"], "argmax")
        return [OutType(tuple(d for d in x.dims if d != axis), "int32", sparse_dim=axis)]

    def returnn(self, ctx, op):
        return {"class": "reduce", "mode": "argmax", "from": ctx.src(0), "axis": ctx.dim(op.attrs["axis"])}

    def torch(self, ctx, op):
        axis = op.attrs["axis"]
        dims = ctx.in_dims(0)
        x = ctx.arg(0)
        if ctx.is_dynamic(axis):  # padded frames must never win
            x = where_valid(x, ctx.mask(axis, dims), "float('-inf')")
        return f"{x}.argmax(dim={dims.index(axis)})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        x, ax = args[0].data, args[0].dims.index(attrs["axis"])
        if x.shape[ax] == 0:  # a sequence with no frame along it: 0, as the targets' argmax of all -inf
            return x.new_zeros(x.shape[:ax] + x.shape[ax + 1 :], dtype=torch.int64)
        return x.argmax(dim=ax)


# --- selection and casts ---------------------------------------------------------------


@register
class Where(OpDef):
    """`where(cond, a, b)`: a where cond holds, else b; dims are the union of all three.

    `a` or `b` may be a Python number (attrs `a_scalar`/`b_scalar`). RETURNN `switch`.
    """

    name = fn_name = "where"
    tensors = ("cond", "a", "b")

    def api(self, cond, a, b):
        pass

    def bind(self, args, kwargs):
        bound = signature(self.api).bind(*args, **kwargs).arguments  # TypeError on misuse
        tensors, attrs = [bound["cond"]], {}
        for k in ("a", "b"):
            v = bound[k]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                attrs[f"{k}_scalar"] = v
            else:
                tensors.append(v)
        return tensors, attrs

    def _operands(self, args: list, attrs: dict) -> tuple:
        """(cond, a, b) where a/b are an arg or a number."""
        it = iter(args[1:])
        a = attrs["a_scalar"] if "a_scalar" in attrs else next(it)
        b = attrs["b_scalar"] if "b_scalar" in attrs else next(it)
        return args[0], a, b

    def infer(self, dt, args, attrs):
        cond, a, b = self._operands(args, attrs)
        if cond.dtype != "bool":
            raise DimError(f"`where` needs a bool condition, got {cond.dtype}")
        tensors = [v for v in (a, b) if isinstance(v, Value)]
        dtypes = {v.dtype for v in tensors}
        if len(dtypes) > 1:
            raise DimError(f"`where` branches have different dtypes: {a.dtype} and {b.dtype}")
        dtype = dtypes.pop() if dtypes else "float32"
        for s in (a, b):
            if isinstance(s, Value):
                continue
            if dtype == "bool" or (dtype == "int32" and not isinstance(s, int)):
                raise DimError(f"`where` cannot combine a tensor of dtype {dtype} with the number {s!r}")
        sparse = {v.sparse_dim for v in tensors}
        sparse_dim = sparse.pop() if len(sparse) == 1 and dtype == "int32" else None  # labels stay labels
        return [OutType(broadcast(dt, args, "`where`"), dtype, sparse_dim=sparse_dim)]

    def returnn(self, ctx, op):
        it = iter(range(1, len(op.args)))
        a = op.attrs["a_scalar"] if "a_scalar" in op.attrs else ctx.src(next(it))
        b = op.attrs["b_scalar"] if "b_scalar" in op.attrs else ctx.src(next(it))
        sparse = op.outs[0].sparse_dim
        if sparse is not None and len(op.args) == 2:
            # labels and a number: `switch` would check the number's (dense) constant against the
            # labels' sparse output and fail; an `eval` gives the labels' class dim to the result
            where = (
                "tf.where(source(0), source(1), {b!r})"
                if "b_scalar" in op.attrs
                else "tf.where(source(0), {a!r}, source(1))"
            )
            return {
                "class": "eval",
                "from": [ctx.src(0), ctx.src(1)],
                "eval": where.format(a=a, b=b),
                "out_type": {"dtype": "int32", "sparse_dim": ctx.dim(sparse)},
            }
        return {"class": "switch", "condition": ctx.src(0), "true_from": a, "false_from": b}

    def torch(self, ctx, op):
        dims = op.outs[0].dims
        it = iter(range(1, len(op.args)))
        a = repr(op.attrs["a_scalar"]) if "a_scalar" in op.attrs else ctx.aligned(next(it), dims)
        b = repr(op.attrs["b_scalar"]) if "b_scalar" in op.attrs else ctx.aligned(next(it), dims)
        expr = f"torch.where({ctx.aligned(0, dims)}, {a}, {b})"
        if len(op.args) == 1:  # two numbers: torch would make the default dtype
            expr += f".to({ctx.float_dtype})" if op.outs[0].dtype == "float32" else ".long()"
        return expr

    def eager(self, ctx, args, attrs, outs):
        import torch

        dims = outs[0].dims
        cond, a, b = self._operands(args, attrs)
        a = a if isinstance(a, (int, float)) else align_tensor(a.data, a.dims, dims)
        b = b if isinstance(b, (int, float)) else align_tensor(b.data, b.dims, dims)
        return torch.where(align_tensor(cond.data, cond.dims, dims), a, b)


@register
class MaskInf(OpDef):
    """`mask_inf(x, cond)`: −inf where cond holds, x elsewhere (dims: the union of both's): scores
    a search must never choose (a shallow fusion's EOS threshold). Its own op because netc's
    numbers are finite (a `where` branch cannot be −inf): RETURNN `switch` with a −inf branch."""

    name = fn_name = "mask_inf"
    tensors = ("x", "cond")

    def api(self, x, cond):
        pass

    def infer(self, dt, args, attrs):
        x, cond = args
        if x.dtype != "float32":
            raise DimError(f"`mask_inf` needs float scores, got {x.dtype}")
        if cond.dtype != "bool":
            raise DimError(f"`mask_inf` needs a bool condition, got {cond.dtype}")
        return [OutType(broadcast(dt, args, "`mask_inf`"))]

    def returnn(self, ctx, op):
        return {
            "class": "switch",
            "condition": ctx.src(1),
            "true_from": Code('float("-inf")'),
            "false_from": ctx.src(0),
        }

    def torch(self, ctx, op):
        dims = op.outs[0].dims
        return f'torch.where({ctx.aligned(1, dims)}, float("-inf"), {ctx.aligned(0, dims)})'

    def eager(self, ctx, args, attrs, outs):
        dims = outs[0].dims
        import torch

        x, cond = (align_tensor(a.data, a.dims, dims) for a in args)
        return torch.where(cond, float("-inf"), x)


@register
class Cast(OpDef):
    """`cast(x, dtype)` to "float32", "int32" or "bool" (float → int truncates toward zero).
    `cast(x, "int32", class_dim=vocab)`: int32 labels over the class dim `vocab` (the values are
    kept: RETURNN's `reinterpret_data` with `set_sparse_dim`, which does not check them either);
    over a dynamic dim, positions in its frames."""

    name = fn_name = "cast"

    def api(self, x, dtype, class_dim=None):
        pass

    def bind(self, args, kwargs):
        tensors, attrs = super().bind(args, kwargs)
        if attrs.get("class_dim") is None:  # the plain cast's attributes as before
            attrs.pop("class_dim", None)
        return tensors, attrs

    def infer(self, dt, args, attrs):
        x, dtype, class_dim = args[0], attrs["dtype"], attrs.get("class_dim")
        if dtype not in DTYPES:
            raise DimError(f"`cast` dtype must be one of {', '.join(map(repr, DTYPES))}, got {dtype!r}")
        if class_dim is not None:
            if dtype != "int32":
                raise DimError(f"`cast` with a class dim makes int32 labels, not {dtype}")
            # a dynamic class dim: positions in its frames (a `choice` target over an encoder's frames)
            if not isinstance(class_dim, str) or class_dim not in dt.dims or dt[class_dim].kind == "batch":
                raise DimError("`cast` needs `class_dim` to be a static or dynamic dim (not batch)")
            if class_dim in x.dims:
                raise DimError(f"the class dim `{class_dim}` cannot also be a dim of the labels")
            return [OutType(x.dims, dtype, sparse_dim=class_dim)]
        sparse = x.sparse_dim if dtype == "int32" else None  # labels stay labels
        return [OutType(x.dims, dtype, sparse_dim=sparse)]

    def returnn(self, ctx, op):
        if "class_dim" in op.attrs:  # an `eval` gives the result its class dim (as `where` of labels)
            return {
                "class": "eval",
                "from": ctx.src(0),
                "eval": "tf.cast(source(0), tf.int32)",
                "out_type": {"dtype": "int32", "sparse_dim": ctx.dim(op.attrs["class_dim"])},
            }
        return {"class": "cast", "from": ctx.src(0), "dtype": op.attrs["dtype"]}

    def torch(self, ctx, op):
        if op.attrs["dtype"] == "float32":  # the module's float dtype (float64 after `.double()`)
            return f"{ctx.arg(0)}.to({ctx.float_dtype})"
        if op.attrs["dtype"] == "bool":  # TorchScript has no Tensor.bool()
            return f"{ctx.arg(0)}.to(torch.bool)"
        return f"{ctx.arg(0)}.long()"

    def eager(self, ctx, args, attrs, outs):
        return getattr(args[0].data, _TORCH_CAST[attrs["dtype"]])()


@register
class StopGradient(OpDef):
    """`stop_gradient(x)`: identity forward, no gradient (RETURNN `scaled_grad` with scale 0,
    which is `tf.stop_gradient`)."""

    name = fn_name = "stop_gradient"

    def api(self, x):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        return [OutType(x.dims, x.dtype, sparse_dim=x.sparse_dim)]

    def returnn(self, ctx, op):
        return {"class": "scaled_grad", "from": ctx.src(0), "scale": 0.0}

    def torch(self, ctx, op):
        return f"{ctx.arg(0)}.detach()"

    def eager(self, ctx, args, attrs, outs):
        return args[0].data.detach()


@register
class Dropout(OpDef):
    """`dropout(x, p)`: in training, zero each value with probability p and scale the rest by
    1/(1-p); identity otherwise. RETURNN `dropout` with an elementwise mask (its default mask
    is shared over batch and time), which RETURNN applies only when training."""

    name = fn_name = "dropout"
    pure = False  # a fresh mask per call: never run once for all steps
    frames_independent = True  # the mask is elementwise: frames may be masked all at once

    def api(self, x, p):
        pass

    def infer(self, dt, args, attrs):
        _float("dropout", args[0])
        p = attrs["p"]
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
            raise DimError(f"`dropout` needs a probability 0 <= p < 1, got {p!r}")
        return [OutType(args[0].dims)]

    def returnn(self, ctx, op):
        p = float(op.attrs["p"])
        if p == 0.0:
            return {"class": "copy", "from": ctx.src(0)}
        return {"class": "dropout", "from": ctx.src(0), "dropout": p, "dropout_noise_shape": {"*": None}}

    def torch(self, ctx, op):
        return f"torch.nn.functional.dropout({ctx.arg(0)}, {float(op.attrs['p'])!r}, training={ctx.training})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        return torch.nn.functional.dropout(args[0].data, float(attrs["p"]), training=bool(ctx.training))
