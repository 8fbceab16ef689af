"""`ConvTranspose1d`: a transposed 1-D convolution over a dynamic axis (upsampling: each input
frame spreads over `filter_size` output frames, `stride` apart), as RETURNN's `transposed_conv`.

For a sequence of n frames (its padded frames are zeros first, as for `Conv1d`: each sequence
gives what it gives alone), the full result has (n-1)*stride + filter_size frames, frame
t*stride + j getting x[t] @ W[j]. padding "valid" keeps its first n*stride + max(k - stride, 0)
frames (zeros after the full result where k < stride), padding "same" n*stride frames from
frame max(k - stride, 0) // 2 on (TensorFlow's `conv2d_transpose`). Either makes a new dynamic
dim `out_axis` (declared by the model) with those lengths, RETURNN's `deconv_output_length`.
"""

from __future__ import annotations

import inspect

from netc.ir.dims import DimError
from netc.ops.align import where_valid
from netc.ops.base import OpDef, OutType, register
from netc.ops.rules import check_out_dim


def _call(x, axis, out_axis):
    pass


@register
class ConvTranspose1d(OpDef):
    """`ConvTranspose1d(out_dim, filter_size, stride=1, padding="valid", with_bias=True)(x,
    axis=time, out_axis=new_time)` on x [batch, time, in]: [batch, new_time, out_dim].
    Parameters: `W_native_transposed_conv` [filter<k>, filter<1>, out, in] (RETURNN's layout
    and name) and `bias` [out]."""

    name = "conv_transpose1d"
    fn_name = "ConvTranspose1d"
    module = True
    param_init = {"bias": "zeros"}
    W = "W_native_transposed_conv"

    def ctor(self, out_dim, filter_size, stride=1, padding="valid", with_bias=True):
        pass

    def module_call(self, args, kwargs):
        a = inspect.signature(_call).bind(*args, **kwargs).arguments  # TypeError on misuse
        return [a["x"]], {"axis": a["axis"], "out_axis": a["out_axis"]}

    def makes_dims(self, attrs):
        out = attrs.get("out_axis")
        return [out] if isinstance(out, str) else []

    @staticmethod
    def extra(attrs) -> int:
        """Frames past n*stride of padding "valid"."""
        return max(attrs["filter_size"] - attrs["stride"], 0) if attrs["padding"] == "valid" else 0

    @staticmethod
    def crop(attrs) -> int:
        """Frames cut at the start of the full result: TF's "same" puts half (rounded down) there."""
        return max(attrs["filter_size"] - attrs["stride"], 0) // 2 if attrs["padding"] == "same" else 0

    def infer(self, dt, args, attrs):
        x, axis, out_axis, out = args[0], attrs["axis"], attrs["out_axis"], attrs["out_dim"]
        if x.dtype != "float32":
            raise DimError(f"`ConvTranspose1d` needs a float tensor, got {x.dtype}")
        if not isinstance(axis, str) or axis not in x.dims or dt[axis].kind != "dynamic":
            raise DimError(f"`ConvTranspose1d` needs `axis` to be a dynamic dim of [{', '.join(x.dims)}]")
        rest = [d for d in x.dims if d not in ("batch", axis)]
        if "batch" not in x.dims or len(rest) != 1 or dt[rest[0]].kind != "static":
            raise DimError(f"`ConvTranspose1d` upsamples [batch, {axis}, feature], got [{', '.join(x.dims)}]")
        for k in ("filter_size", "stride"):
            v = attrs[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise DimError(f"`ConvTranspose1d` needs `{k}` to be an int >= 1, got {v!r}")
        if attrs["padding"] not in ("same", "valid"):
            raise DimError(f"`ConvTranspose1d` padding is 'same' or 'valid', got {attrs['padding']!r}")
        check_out_dim(dt, "ConvTranspose1d", out, ("batch", axis))  # may be the input channels' dim
        if out_axis is None:
            raise DimError("`ConvTranspose1d` makes a new dynamic dim: pass `out_axis=` (a declared Dim)")
        if not isinstance(out_axis, str) or out_axis not in dt.dims:
            raise DimError("`ConvTranspose1d` needs `out_axis` to be a dim (declared as Dim(name))")
        # a sequence without frames gets none, unless "valid" adds frames past n*stride
        dt.make_lengths(out_axis, "ConvTranspose1d", may_be_empty=dt[axis].may_be_empty and not self.extra(attrs))
        return [OutType(("batch", out_axis, out))]

    def params(self, dt, args, attrs):
        feat = next(d for d in args[0].dims if d not in ("batch", attrs["axis"]))
        p = {self.W: (dt.window(attrs["filter_size"]).name, dt.window(1).name, attrs["out_dim"], feat)}
        if attrs["with_bias"]:
            p["bias"] = (attrs["out_dim"],)
        return p

    def returnn(self, ctx, op):
        a = op.attrs
        return {
            "class": "transposed_conv",
            "from": ctx.src(0),
            "in_spatial_dims": [ctx.dim(a["axis"])],
            "filter_size": (a["filter_size"],),
            "strides": (a["stride"],),
            "padding": a["padding"],
            "out_dim": ctx.dim(a["out_dim"]),
            "out_spatial_dims": [ctx.derived_dim(a["out_axis"])],
            "with_bias": bool(a["with_bias"]),
            "use_time_mask": True,  # padded frames are zeros before the convolution
        }

    def made_lengths(self, attrs, lens):
        axis, out = attrs["axis"], attrs["out_axis"]
        if axis not in lens:
            return {}
        return {out: [n * attrs["stride"] + self.extra(attrs) for n in lens[axis]]}

    def torch_made_dims(self, ctx, op):
        a = op.attrs
        s, e = a["stride"], self.extra(a)
        return {a["out_axis"]: (f"{ctx.seq_lens(a['axis'])} * {s} + {e}", f"{ctx.size(a['axis'])} * {s} + {e}")}

    @classmethod
    def _code(cls, x: str, w: str, b: str, attrs, n: str) -> str:
        """Code of the result [batch, out, n*stride + extra] of x [batch, in, n] (zeros past each
        sequence's end) and W [k, 1, out, in]."""
        k, s = attrs["filter_size"], attrs["stride"]
        y = f"torch.nn.functional.conv_transpose1d({x}, {w}[:, 0].permute(2, 1, 0), None, {s})"
        if s > k:  # the full result ends before n*stride
            y = f"torch.nn.functional.pad({y}, (0, {s - k}))"
        start = cls.crop(attrs)
        y = f"{y}[:, :, {start}:{start} + {n} * {s} + {cls.extra(attrs)}]"
        return f"({y} + {b}[:, None])" if attrs["with_bias"] else y

    # canonical order: x is [batch, time, in], the result [batch, out_axis, out]
    def torch(self, ctx, op):
        a = op.attrs
        x = where_valid(ctx.arg(0), ctx.mask(a["axis"], ctx.in_dims(0)), "0.0") + ".transpose(1, 2)"
        b = ctx.param("bias") if a["with_bias"] else "None"
        return f"{self._code(x, ctx.param(self.W), b, a, ctx.size(a['axis']))}.transpose(1, 2)"

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0].data.transpose(1, 2)
        w = ctx.param(self.W)[:, 0].permute(2, 1, 0)  # torch's [in, out, k]
        k, s, n = attrs["filter_size"], attrs["stride"], x.shape[-1]
        if n == 0:  # no frames: zeros over the frames "valid" adds
            y = x.new_zeros(x.shape[0], w.shape[1], max((n - 1) * s + k, 0))
        else:
            y = torch.nn.functional.conv_transpose1d(x, w, None, s)
        y = torch.nn.functional.pad(y, (0, max(s - k, 0)))
        start = self.crop(attrs)
        y = y[:, :, start : start + n * s + self.extra(attrs)]
        if attrs["with_bias"]:
            y = y + ctx.param("bias")[:, None]
        return y.transpose(1, 2)
