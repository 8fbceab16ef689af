"""`Conv2d`: a 2-D convolution over time and a static feature axis, with channels (a CNN front
end such as RETURNN's `ConformerConvSubsample`), with padding "same" or "valid" and a stride
per axis.

Every sequence gives what it gives alone: its padded frames are zeros before the convolution,
and its windows follow from its own length n. "valid": windows start at frame 0, so TF's
windows are each sequence's. "same" with a time stride s > 1 pads k-1-(n-1)%s frames (at
least 0), half (rounded down) on the left, which TF (and RETURNN's `conv`) compute from the
batch's padded length instead: the windows of a sequence would depend on the batch's longest.
So the RETURNN lowering convolves with time stride 1 and gathers each sequence's frames
s*j + P - left(n) (P: the stride-1 left padding), and torch shifts each sequence right by its
own left padding before a "valid" strided convolution.
"""

from __future__ import annotations

import inspect

from netc.ir.dims import DimError
from netc.naming import Code
from netc.ops.align import align_code, align_tensor, where_valid
from netc.ops.base import OpDef, OutType, register
from netc.ops.conv import _float
from netc.ops.frames import TAKE_HELPER, take_helper
from netc.ops.rules import check_out_dim


def _conv2d_call(x, axis, feature_axis, out_axis=None, out_feature_axis=None):
    pass


def _pair(v) -> list[int] | None:
    """A stride: one int for both axes, or (time, feature); None if not ints >= 1."""
    v = [v, v] if type(v) is int else v
    return (
        list(v) if isinstance(v, list | tuple) and len(v) == 2 and all(type(k) is int and k >= 1 for k in v) else None
    )


def same_pad(n: int, k: int, s: int) -> tuple[int, int]:
    """TF's "same" padding of n frames for a filter of k and stride s: (left, right)."""
    pad = max(k - 1 - (n - 1) % s, 0) if n > 0 else 0
    return pad // 2, pad - pad // 2


def out_len(n: int, k: int, s: int, padding: str) -> int:
    """Frames of the result for n frames in: ceil(n/s) ("same"), max(0, (n-k)//s + 1) ("valid")."""
    return -(-n // s) if padding == "same" else max(0, (n - k) // s + 1)


@register
class Conv2d(OpDef):
    """`Conv2d(out_dim, filter_size=(kt, kf), padding="same", stride=(st, sf), groups=1,
    with_bias=True)(x, axis=time, feature_axis=feat, out_axis=None, out_feature_axis=None)` on
    x [batch, time, feat, channel] (two static dims): a 2-D convolution over (time, feat), the
    channel dim replaced by `out_dim`. A time stride > 1 or padding "valid" makes a new dynamic
    dim `out_axis` (declared by the model); a feature axis whose size changes needs
    `out_feature_axis`, a static dim of the new size. Parameters: `W` [filter<kt>, filter<kf>,
    channel/groups, out] (RETURNN `conv`'s layout), `bias` [out]."""

    name = "conv2d"
    fn_name = "Conv2d"
    module = True
    param_init = {"bias": "zeros"}

    def ctor(self, out_dim, filter_size, padding="same", stride=1, groups=1, with_bias=True):
        pass

    def module_call(self, args, kwargs):
        bound = inspect.signature(_conv2d_call).bind(*args, **kwargs)  # TypeError on misuse
        bound.apply_defaults()
        a = bound.arguments
        return [a["x"]], {k: a[k] for k in ("axis", "feature_axis", "out_axis", "out_feature_axis")}

    def makes_dims(self, attrs):
        out = attrs.get("out_axis")
        return [out] if isinstance(out, str) else []

    @staticmethod
    def channel(x_dims, attrs) -> str:
        return next(d for d in x_dims if d not in ("batch", attrs["axis"], attrs["feature_axis"]))

    @staticmethod
    def new_time(attrs) -> bool:
        """Whether the result is over a new dynamic dim (`out_axis`), not `axis`."""
        return attrs["padding"] == "valid" or _pair(attrs["stride"])[0] > 1

    @staticmethod
    def feat_out(attrs) -> str:
        return attrs["out_feature_axis"] or attrs["feature_axis"]

    def infer(self, dt, args, attrs):
        x, axis, fax, out = args[0], attrs["axis"], attrs["feature_axis"], attrs["out_dim"]
        _float("Conv2d", x)
        if not isinstance(axis, str) or axis not in x.dims or dt[axis].kind != "dynamic":
            raise DimError(f"`Conv2d` needs `axis` to be a dynamic dim of [{', '.join(x.dims)}]")
        if not isinstance(fax, str) or fax not in x.dims or dt[fax].kind != "static":
            raise DimError(f"`Conv2d` needs `feature_axis` to be a static dim of [{', '.join(x.dims)}]")
        rest = [d for d in x.dims if d not in ("batch", axis, fax)]
        if "batch" not in x.dims or len(rest) != 1 or dt[rest[0]].kind != "static":
            raise DimError(f"`Conv2d` convolves [batch, {axis}, {fax}, channel], got [{', '.join(x.dims)}]")
        chan = rest[0]
        fs = attrs["filter_size"]
        if not (isinstance(fs, list) and len(fs) == 2 and all(type(k) is int and k >= 1 for k in fs)):
            raise DimError(f"`Conv2d` needs `filter_size` to be two ints >= 1 (time, feature), got {fs!r}")
        stride = _pair(attrs["stride"])
        if stride is None:
            raise DimError(f"`Conv2d` needs `stride` to be an int >= 1 or two (time, feature), got {attrs['stride']!r}")
        padding = attrs["padding"]
        if padding not in ("same", "valid"):
            raise DimError(f"`Conv2d` padding is 'same' or 'valid', got {padding!r}")
        g = attrs["groups"]
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            raise DimError(f"`Conv2d` needs `groups` to be an int >= 1, got {g!r}")
        check_out_dim(dt, "Conv2d", out, ("batch", axis, fax))
        if dt[chan].size % g or dt[out].size % g:
            raise DimError(
                f"`Conv2d` groups={g} must divide the input channels `{chan}` ({dt[chan].size}) "
                f"and `out_dim` `{out}` ({dt[out].size})"
            )
        # the feature axis: a static dim of the size its windows give
        size = out_len(dt[fax].size, fs[1], stride[1], padding)
        if size < 1:
            raise DimError(f"`Conv2d` filter {fs[1]} is longer than `feature_axis` `{fax}` ({dt[fax].size})")
        fout = attrs["out_feature_axis"]
        if fout is None:
            if size != dt[fax].size:
                raise DimError(
                    f"`Conv2d` makes `{fax}` ({dt[fax].size}) {size} long: pass `out_feature_axis=` "
                    f"(a Dim of size {size})"
                )
            fout = fax
        if not isinstance(fout, str) or fout not in dt.dims or dt[fout].kind != "static":
            raise DimError("`Conv2d` needs `out_feature_axis` to be a static dim (declared as Dim(name, size))")
        if dt[fout].size != size:
            raise DimError(
                f"`Conv2d` gives `feature_axis` {size} frames; `out_feature_axis` `{fout}` has size {dt[fout].size}"
            )
        if fout != fax and fout in x.dims or fout == out:
            raise DimError(f"`Conv2d` `out_feature_axis` `{fout}` is already a dim of the input or `out_dim`")
        out_axis = attrs["out_axis"]
        if not self.new_time(attrs):
            if out_axis is not None:
                raise DimError(
                    "`Conv2d` with padding 'same' and time stride 1 keeps `axis`; `out_axis` is for "
                    "padding 'valid' or a time stride"
                )
            return [OutType(dt.canonical(["batch", axis, fout, out]))]
        if out_axis is None:
            raise DimError(
                "`Conv2d` with padding 'valid' or a time stride makes a new dynamic dim: pass `out_axis=` (a declared Dim)"
            )
        if not isinstance(out_axis, str) or out_axis not in dt.dims:
            raise DimError("`Conv2d` needs `out_axis` to be a dim (declared as Dim(name))")
        # a sequence shorter than the filter has no "valid" frame (nor one without frames)
        dt.make_lengths(out_axis, "Conv2d", may_be_empty=(padding == "valid" and fs[0] > 1) or dt[axis].may_be_empty)
        return [OutType(dt.canonical(["batch", out_axis, fout, out]))]

    def params(self, dt, args, attrs):
        chan, g = self.channel(args[0].dims, attrs), attrs["groups"]
        kt, kf = attrs["filter_size"]
        per_group = dt.part(chan, g).name if g > 1 else chan
        p = {"W": (dt.window(kt).name, dt.window(kf).name, per_group, attrs["out_dim"])}
        if attrs["with_bias"]:
            p["bias"] = (attrs["out_dim"],)
        return p

    def made_lengths(self, attrs, lens):
        axis, out = attrs["axis"], attrs["out_axis"]
        if out is None or axis not in lens:
            return {}
        kt, st = attrs["filter_size"][0], _pair(attrs["stride"])[0]
        return {out: [out_len(n, kt, st, attrs["padding"]) for n in lens[axis]]}

    # --- RETURNN -------------------------------------------------------------------------

    def returnn(self, ctx, op):
        a = op.attrs
        (kt, _), (st, sf) = a["filter_size"], _pair(a["stride"])
        layer = {
            "class": "conv",
            "from": ctx.src(0),
            "in_dim": ctx.dim(self.channel(ctx.in_dims(0), a)),
            "in_spatial_dims": [ctx.dim(a["axis"]), ctx.dim(a["feature_axis"])],
            "filter_size": tuple(a["filter_size"]),
            "padding": a["padding"],
            "out_dim": ctx.dim(a["out_dim"]),
            "with_bias": bool(a["with_bias"]),
            "use_time_mask": True,  # padded frames are zeros before the convolution
        }
        if a["groups"] != 1:
            layer["groups"] = a["groups"]
        fout = ctx.dim(self.feat_out(a))
        column = self._returnn_column(ctx, a)
        if column is not None:  # one window over the features: at feature stride 1, then a slice
            sf, fout = 1, column[0]
        if a["padding"] == "valid":  # TF's windows start at each sequence's frame 0
            if (st, sf) != (1, 1):
                layer["strides"] = (st, sf)
            layer["out_spatial_dims"] = [ctx.derived_dim(a["out_axis"]), fout]
        else:
            if sf != 1:
                layer["strides"] = (1, sf)  # the feature axis is static: TF's "same" is the rule
            if sf != 1 or column is not None or a["out_feature_axis"] not in (None, a["feature_axis"]):
                layer["out_spatial_dims"] = [ctx.dim(a["axis"]), fout]
            if st != 1:
                layer = self._returnn_time_stride(ctx, a, layer, kt, st)
        if column is None:
            return layer
        mid, start = column
        cut = {"class": "slice", "axis": mid, "slice_start": start, "slice_end": start + 1}
        cut["out_dim"] = ctx.dim(self.feat_out(a))
        if layer["class"] == "subnetwork":  # the time stride's: its gather, then the slice
            sub = layer["subnetwork"]
            sub["gathered"] = sub.pop("output")
            sub["output"] = {**cut, "from": "gathered"}
            return layer
        sub = {"conv": {**layer, "from": "data", "name_scope": ""}, "output": {**cut, "from": "conv"}}
        return {"class": "subnetwork", "from": ctx.src(0), "subnetwork": sub}

    def _returnn_column(self, ctx, a) -> tuple[Code, int] | None:
        """For a feature stride with one window over the features: the features a convolution at
        stride 1 makes (a dim of the config's own) and which of them is that window. TensorFlow's
        oneDNN float32 convolution computes such a layer wrong (as torch's does, `_feature_stride`)."""
        (_, kf), (_, sf) = a["filter_size"], _pair(a["stride"])
        f = ctx.size(a["feature_axis"])
        if sf == 1 or out_len(f, kf, sf, a["padding"]) != 1:
            return None
        if a["padding"] == "valid":  # the first window
            return ctx.static_dim(f"{ctx.dim(self.feat_out(a))}_columns", f - kf + 1), 0
        # "same": stride 1 pads (kf-1)//2 on the left, the stride's one window max(kf-f, 0)//2
        return ctx.static_dim(f"{ctx.dim(self.feat_out(a))}_columns", f), (kf - 1) // 2 - max(kf - f, 0) // 2

    @staticmethod
    def _returnn_time_stride(ctx, a, layer, kt: int, st: int) -> dict:
        """ "same" with a time stride: TF would pad by the batch's padded length. Time stride 1
        (left padding P = (kt-1)//2), then each sequence's frames st*j + P - left(n), left(n)
        its own "same" padding; j < ceil(n/st) of the new dim, others clamped to frame n-1."""
        axis, out = ctx.dim(a["axis"]), ctx.dim(a["out_axis"])
        left = f"tf.maximum({kt - 1} - tf.math.floormod(source(1) - 1, {st}), 0) // 2"
        sub: dict = {
            "conv": {**layer, "from": "data", "name_scope": ""},  # its variables are the module's own
            "length": {"class": "length", "from": "data", "axis": axis},
            "new_length": {"class": "eval", "from": "length", "eval": f"(source(0) + {st - 1}) // {st}"},
            # `range_from_length` gives the new dim its lengths and marks them as its size
            "steps": {"class": "range_from_length", "from": "new_length", "out_spatial_dim": out},
            "frames": {
                "class": "combine",
                "kind": "eval",
                "from": ["steps", "length"],
                "eval": f"tf.minimum(source(0) * {st} + {(kt - 1) // 2} - {left}, tf.maximum(source(1) - 1, 0))",
                "out_type": {"dtype": "int32"},
            },
            "output": {"class": "gather", "from": "conv", "axis": axis, "position": "frames"},
        }
        return {"class": "subnetwork", "from": ctx.src(0), "subnetwork": sub}

    # --- torch ---------------------------------------------------------------------------

    @staticmethod
    def _feature_pads(attrs, f: int) -> tuple[int, int]:
        if attrs["padding"] == "valid":
            return 0, 0
        return same_pad(f, attrs["filter_size"][1], _pair(attrs["stride"])[1])

    @staticmethod
    def _feature_stride(f: int, kf: int, sf: int) -> tuple[int, bool]:
        """The feature stride to convolve `f` padded features at, and whether to keep only the first
        column: one window over the features is the same at any stride, and torch 2.13's oneDNN
        float32 convolution computes wrong numbers for a feature stride with one output column
        (seen on an input of one channel, whose strides read as channels-last)."""
        if sf > 1 and (f - kf) // sf + 1 == 1:
            return 1, kf < f
        return sf, False

    def torch_made_dims(self, ctx, op):
        a = op.attrs
        if a["out_axis"] is None:
            return {}
        kt, st = a["filter_size"][0], _pair(a["stride"])[0]
        n = ctx.seq_lens(a["axis"])
        if a["padding"] == "same":
            lens = f"({n} + {st - 1}) // {st}"
        else:
            lens = f"torch.clamp(({n} - {kt}) // {st} + 1, min=0)"
        # the padded size: what the convolution of the input padded by kt - 1 frames gives, at
        # least the longest sequence's frames (frames past a sequence's length are masked)
        return {a["out_axis"]: (lens, f"({ctx.size(a['axis'])} - 1) // {st} + 1")}

    def torch_helpers(self, op):
        a = op.attrs
        return {TAKE_HELPER: take_helper} if a["padding"] == "same" and _pair(a["stride"])[0] > 1 else {}

    def torch(self, ctx, op):
        a = op.attrs
        dims = ctx.in_dims(0)
        chan = self.channel(dims, a)
        (kt, _), (st, sf) = a["filter_size"], _pair(a["stride"])
        order = ("batch", chan, a["axis"], a["feature_axis"])
        x = align_code(where_valid(ctx.arg(0), ctx.mask(a["axis"], dims), "0.0"), dims, order)
        fl, fr = self._feature_pads(a, int(ctx.size(a["feature_axis"])))
        if a["padding"] == "valid":  # frames on the right so that a batch shorter than the filter convolves
            x = f"torch.nn.functional.pad({x}, {(fl, fr, 0, kt - 1)})"
        elif st == 1:
            x = f"torch.nn.functional.pad({x}, {(fl, fr, (kt - 1) // 2, kt - 1 - (kt - 1) // 2)})"
        else:  # each sequence shifted right by its own left padding, then windows from frame 0
            p = (kt - 1) // 2
            x = f"torch.nn.functional.pad({x}, {(fl, fr, p, kt - 1)})"
            n = ctx.seq_lens(a["axis"])
            left = f"torch.clamp_min({kt - 1} - torch.remainder({n} - 1, {st}), 0) // 2"
            idx = f"torch.arange({ctx.size(a['axis'])} + {kt - 1}, device={ctx.device})[None, :] + ({p} - {left})[:, None]"
            x = f"{ctx.helper(TAKE_HELPER)}({x}, ({idx})[:, None, :, None], 2)"
        w = ctx.once(f"{ctx.param('W')}.permute(3, 2, 0, 1)", f"{op.param}_W")  # torch's [out, in/groups, kt, kf]
        b = ctx.param("bias") if a["with_bias"] else "None"
        sf, cut = self._feature_stride(int(ctx.size(a["feature_axis"])) + fl + fr, a["filter_size"][1], sf)
        stride = 1 if (st, sf) == (1, 1) else (st, sf)
        y = f"torch.nn.functional.conv2d({x}, {w}, {b}, {stride}, 0, 1, {a['groups']})"
        if cut:
            y = f"{y}[..., :1]"
        time = a["out_axis"] if self.new_time(a) else a["axis"]
        return align_code(y, ("batch", a["out_dim"], time, self.feat_out(a)), op.outs[0].dims)

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0]  # one sequence: its own length
        chan = self.channel(x.dims, attrs)
        (kt, kf), (st, sf) = attrs["filter_size"], _pair(attrs["stride"])
        t = align_tensor(x.data, x.dims, ("batch", chan, attrs["axis"], attrs["feature_axis"]))
        w = ctx.param("W").permute(3, 2, 0, 1)
        time = attrs["out_axis"] if self.new_time(attrs) else attrs["axis"]
        result = ("batch", attrs["out_dim"], time, self.feat_out(attrs))
        n = t.shape[2]
        frames = out_len(n, kt, st, attrs["padding"])
        fl, fr = self._feature_pads(attrs, t.shape[3])
        if frames == 0:  # no frame out (torch's conv2d needs the filter's span)
            y = t.new_zeros(t.shape[0], w.shape[0], 0, (t.shape[3] + fl + fr - kf) // sf + 1)
            return align_tensor(y, result, outs[0].dims)
        tl, tr = (0, 0) if attrs["padding"] == "valid" else same_pad(n, kt, st)
        t = torch.nn.functional.pad(t, (fl, fr, tl, tr))
        b = ctx.param("bias") if attrs["with_bias"] else None
        sf, cut = self._feature_stride(t.shape[3], kf, sf)
        y = torch.nn.functional.conv2d(t, w, b, (st, sf), 0, 1, attrs["groups"])
        return align_tensor(y[..., :1] if cut else y, result, outs[0].dims)
