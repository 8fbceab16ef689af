"""Convolution and normalisation layers as conformer-style RETURNN setups use them: `conv` (1-D
over time) → `Conv1d`, `layer_norm` → `LayerNorm`, `batch_norm` → `BatchNorm`, `gating` → `glu`
(or the two halves' activations multiplied).

Parameters keep RETURNN's names: `conv`'s `W` [filter, in/groups, out] and `bias`, `layer_norm`'s
`scale` and `bias`, `batch_norm`'s `batch_norm/v2_*` (param version 2)."""

from __future__ import annotations

from netc.importer.dims import BATCH
from netc.importer.syntax import binop, call, identifier, literal, name, num, tuple_
from netc.importer.values import Refused, Val, feature, sources
from netc.importer.writer import Assign, ModuleRef

KNOWN = {
    "conv": {
        "filter_size",
        "padding",
        "strides",
        "dilation_rate",
        "groups",
        "n_out",
        "out_dim",
        "in_dim",
        "in_spatial_dims",
        "out_spatial_dims",
        "with_bias",
        "activation",
        "use_time_mask",
        "forward_weights_init",
        "bias_init",
        "dropout",
    },
    "transposed_conv": {
        "reuse_params",
        "filter_size",
        "strides",
        "padding",
        "remove_padding",
        "output_padding",
        "n_out",
        "out_dim",
        "in_dim",
        "in_spatial_dims",
        "out_spatial_dims",
        "with_bias",
        "activation",
        "use_time_mask",
        "forward_weights_init",
        "bias_init",
        "dropout",
    },
    "layer_norm": {"epsilon", "in_dim", "out_dim", "dropout"},
    "batch_norm": {
        "in_dim",
        "use_shift",
        "use_std",
        "use_sample",
        "force_sample",
        "momentum",
        "epsilon",
        "update_sample_only_in_training",
        "delay_sample_update",
        "param_version",
        "gamma_init",
        "beta_init",
        "masked_time",
        "dropout",
    },
    "gating": {"activation", "gate_activation", "n_out", "out_dim", "dropout"},
}
# layers whose output is zeros past each sequence's end where their input is (`_zero_padded`)
_RESHAPES = {"split_dims", "merge_dims", "copy", "reinterpret_data", "expand_dims", "dropout"}
LAYER_NORM_EPS = 1e-6  # RETURNN's `layer_norm` default, netc's `LayerNorm`


def _int(v):
    """An int, or the int of a one-element sequence (RETURNN's `(3,)`); else None."""
    if isinstance(v, list | tuple) and len(v) == 1:
        v = v[0]
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class ConvNormLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _l_conv(self, layer, d, scope, var, full) -> Val:
        fs = d.get("filter_size")
        if isinstance(fs, list | tuple) and len(fs) == 2:
            return self._conv2d(layer, d, scope, var, full)
        src = self._source(d, scope, full)
        dyn = [x for x in src.dims if self.dims.is_dynamic(x)]
        if src.sparse is not None or BATCH not in src.dims or len(dyn) != 1 or len(src.dims) != 3:
            raise Refused(full, "conv", "a 1-D conv of [batch, time, feature] (one dynamic dim) is supported")
        time, feat = dyn[0], feature(src, self.dims)
        k, stride, dilation = (_int(d.get(o, 1)) for o in ("filter_size", "strides", "dilation_rate"))
        groups = d.get("groups", 1)
        if k is None or k < 1 or "filter_size" not in d:
            raise Refused(
                full,
                "conv",
                f"filter_size {d.get('filter_size')!r} (one size: a 1-D conv over time; two: over time and a feature axis)",
            )
        if stride is None or stride < 1 or dilation is None or dilation < 1:
            raise Refused(full, "conv", "strides and dilation_rate: one positive int each")
        padding = d.get("padding")
        padding = padding.lower() if isinstance(padding, str) else padding
        if padding not in ("same", "valid"):
            raise Refused(full, "conv", f"padding {d.get('padding')!r} ('same' or 'valid' are supported)")
        if padding == "same" and stride != 1:
            raise Refused(
                full, "conv", "padding 'same' with strides > 1 (its windows depend on the batch's longest sequence)"
            )
        for opt, want in (("in_spatial_dims", time), ("in_dim", feat)):
            if opt in d:
                given = d[opt]
                given = given[0] if isinstance(given, list | tuple) and len(given) == 1 else given
                if self._axis(src, given) != want:
                    raise Refused(full, "conv", f"{opt} {d[opt]!r} (the input's time dim, its feature dim)")
        out = self._out_dim(layer, d, full)
        size, out_size = self.dims.size(feat), self.dims.size(out)
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1 or size % groups or out_size % groups:
            raise Refused(full, "conv", f"groups {groups!r} (dividing the input's and output's features)")
        if groups == size and groups > 1 and stride > 1 and dilation > 1:
            # RETURNN's depthwise convolution (TF's `depthwise_conv2d`) computes wrong frames then
            raise Refused(full, "conv", "a depthwise conv with both strides and dilation_rate > 1")
        with_bias = d.get("with_bias", self.cfg.behavior_version >= 10)  # RETURNN's default
        kwargs = {"padding": literal(padding)} if padding != "same" else {}
        for key, value, default in (("stride", stride, 1), ("dilation", dilation, 1), ("groups", groups, 1)):
            if value != default:
                kwargs[key] = num(value)
        if not with_bias:
            kwargs["with_bias"] = literal(False)
        at = {"axis": self.dim(time)}
        out_time = time
        if padding == "valid":
            out_time = self._conv_out_time(layer, d, full)
            at["out_axis"] = self.dim(out_time)
        self.imports.add("Conv1d")
        expr = call(call("Conv1d", self.dim(out), num(k), **kwargs), src.tensor(), **at)
        dims = (BATCH, out_time, out)
        val = self._activation(Val(expr, dims), d.get("activation"), full, "conv")
        self._emit(scope, var, val.expr, layer, ModuleRef("conv", self._tf_prefix(layer, d, scope)))
        if padding == "same" and (k - 1) * dilation > 0:
            self._warn_same_conv(layer, d, scope, full, "Conv1d")
        return Val(name(var), dims)

    def _l_transposed_conv(self, layer, d, scope, var, full) -> Val:
        """A 1-D transposed conv over time (upsampling): `act(ConvTranspose1d(dim, k, stride=s,
        padding=p)(x, axis=time, out_axis=<layer>_time))`; RETURNN's defaults: strides the
        filter size, padding "same"; parameters `W_native_transposed_conv` [k, 1, out, in], `bias`."""
        src = self._source(d, scope, full)
        dyn = [x for x in src.dims if self.dims.is_dynamic(x)]
        if src.sparse is not None or BATCH not in src.dims or len(dyn) != 1 or len(src.dims) != 3:
            raise Refused(full, "transposed_conv", "a 1-D transposed conv of [batch, time, feature] is supported")
        time, feat = dyn[0], feature(src, self.dims)
        k = _int(d.get("filter_size"))
        stride = _int(d.get("strides", k))
        if k is None or k < 1:
            raise Refused(full, "transposed_conv", f"filter_size {d.get('filter_size')!r} (one size: over time)")
        if stride is None or stride < 1:
            raise Refused(full, "transposed_conv", f"strides {d.get('strides')!r} (one positive int)")
        padding = str(d.get("padding", "same")).lower()
        if padding not in ("same", "valid"):
            raise Refused(full, "transposed_conv", f"padding {d.get('padding')!r} ('same' or 'valid' are supported)")
        for opt, default in (("remove_padding", 0), ("output_padding", None)):
            v = d.get(opt, default)
            if v != default and not (isinstance(v, list | tuple) and all(x == default for x in v)):
                raise Refused(full, "transposed_conv", f"{opt} {v!r} not supported")
        for opt, want in (("in_spatial_dims", time), ("in_dim", feat)):
            if opt in d:
                given = d[opt]
                given = given[0] if isinstance(given, list | tuple) and len(given) == 1 else given
                if self._axis(src, given) != want:
                    raise Refused(full, "transposed_conv", f"{opt} {d[opt]!r} (the input's time dim, its feature dim)")
        out = self._out_dim(layer, d, full)
        given = d.get("out_spatial_dims")
        tag = given[0] if isinstance(given, list | tuple) and len(given) == 1 else given
        if given is None:
            up = self.dims.fresh(f"{identifier(layer)}_time", None)
        elif (
            isinstance(tag, dict)
            and tag["__dim__"] not in self.dims._by_tag
            and self.dims.tags[tag["__dim__"]].kind == "dynamic"
        ):
            up = self.dims.tag(tag["__dim__"])
        else:
            raise Refused(full, "transposed_conv", f"out_spatial_dims {given!r} (a new dim tag is supported)")
        kwargs = {"stride": num(stride)} if stride != 1 else {}
        if padding != "valid":
            kwargs["padding"] = literal(padding)
        if not d.get("with_bias", True):
            kwargs["with_bias"] = literal(False)
        self.imports.add("ConvTranspose1d")
        module = call("ConvTranspose1d", self.dim(out), num(k), **kwargs)
        ref = ModuleRef("transposed_conv", self._tf_prefix(layer, d, scope))
        if d.get("reuse_params") is not None or self._reused(layer, scope):  # the owner's module, shared
            module, ref = self._shared_module(layer, d, scope, full, module, "transposed_conv", feat), None
        expr = call(module, src.tensor(), axis=self.dim(time), out_axis=self.dim(up))
        dims = (BATCH, up, out)
        val = self._activation(Val(expr, dims), d.get("activation"), full, "transposed_conv")
        self._emit(scope, var, val.expr, layer, ref)
        if k > stride and not d.get("use_time_mask") and not self._zero_padded(d, scope):
            why = (
                "RETURNN's transposed_conv without `use_time_mask: True` spreads the frame after a shorter "
                "sequence's end (its filter is longer than its stride) into the sequence's last frames, where its "
                "input (not a raw input) may be nonzero; netc's ConvTranspose1d reads zeros there, so the numbers "
                "at a shorter sequence's last frames may differ"
            )
            self.warnings.append(Refused(full, "transposed_conv", why))
            scope.stmts[-1].note = f"warning: layer {layer!r}: {why}"
        return Val(name(var), dims)

    def _warn_same_conv(self, layer, d, scope, full, op: str) -> None:
        """RETURNN's unmasked "same" conv reads the frames past a shorter sequence's end: a warning
        unless they are zeros (a raw input, as RETURNN's datasets pad it) or masked."""
        if d.get("use_time_mask") or self._zero_padded(d, scope):
            return
        why = (
            "RETURNN's 'same' conv without `use_time_mask: True` reads the frames after a shorter "
            f"sequence's end, where its input (not a raw input) may be nonzero; netc's {op} reads zeros "
            "there, so the numbers at a shorter sequence's last frames may differ"
        )
        self.warnings.append(Refused(full, "conv", why))
        scope.stmts[-1].note = f"warning: layer {layer!r}: {why}"

    def _zero_padded(self, d: dict, scope) -> bool:
        """Whether the layer's input is zeros past each sequence's end: raw inputs (as RETURNN's
        datasets pad them), and what only reshapes or copies them."""
        for s in sources(d):
            if scope.rec is None and not scope.sub and (s == "data" or s.startswith("data:")):
                continue
            sd = scope.layers.get(s) if scope.rec is None and not scope.sub else None
            if not isinstance(sd, dict) or sd.get("class") not in _RESHAPES or not self._zero_padded(sd, scope):
                return False
        return True

    def _conv2d(self, layer, d, scope, var, full) -> Val:
        """A 2-D conv over time and a feature axis of [batch, time, feature, channel] (a CNN front
        end): `Conv2d(dim, filter_size=(kt, kf), padding=p, stride=(st, sf))(x, axis=time,
        feature_axis=f)`; padding "valid" or a time stride makes a new dynamic dim (`out_axis`), a
        feature axis of another size a static one (`out_feature_axis`); RETURNN's `W` [kt, kf,
        in/groups, out] and `bias`."""
        kt, kf = (_int(x) for x in d["filter_size"])
        if kt is None or kf is None or kt < 1 or kf < 1:
            raise Refused(full, "conv", f"filter_size {d['filter_size']!r} (two positive ints)")
        padding = str(d.get("padding")).lower()
        if padding not in ("same", "valid"):
            raise Refused(full, "conv", f"padding {d.get('padding')!r} ('same' or 'valid' are supported)")
        v = d.get("strides", 1)
        strides = [v, v] if isinstance(v, int) else list(v) if isinstance(v, list | tuple) else None
        if not (strides and len(strides) == 2 and all(_int(x) is not None and x >= 1 for x in strides)):
            raise Refused(full, "conv", f"strides {v!r} (one positive int or one per axis: time, feature)")
        st, sf = strides
        v = d.get("dilation_rate", 1)
        if not (v == 1 or (isinstance(v, list | tuple) and all(x == 1 for x in v))):
            raise Refused(full, "conv", f"dilation_rate {v!r} (a 2-D conv: 1 is supported)")
        src = self._source(d, scope, full)
        dyn = [x for x in src.dims if self.dims.is_dynamic(x)]
        static = [x for x in src.dims if self.dims.is_static(x)]
        if src.sparse is not None or BATCH not in src.dims or len(dyn) != 1 or len(static) != 2:
            raise Refused(full, "conv", "a 2-D conv of [batch, time, feature, channel] (one dynamic dim) is supported")
        time, (spatial, channel) = dyn[0], static  # RETURNN's channels: the feature axis, the last
        if "in_spatial_dims" in d:
            given = d["in_spatial_dims"]
            axes = [self._axis(src, a) for a in given] if isinstance(given, list | tuple) else None
            if (
                axes is None
                or len(axes) != 2
                or axes[0] != time
                or axes[1] is None
                or self.dims.find(axes[1]) != self.dims.find(spatial)
            ):
                raise Refused(full, "conv", f"in_spatial_dims {given!r} (the time dim, then the feature axis)")
        if "in_dim" in d and self._axis(src, d["in_dim"]) != channel:
            raise Refused(full, "conv", f"in_dim {d['in_dim']!r} (the input's channels)")
        out = self._out_dim(layer, d, full)
        groups = d.get("groups", 1)
        size, out_size = self.dims.size(channel), self.dims.size(out)
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1 or size % groups or out_size % groups:
            raise Refused(full, "conv", f"groups {groups!r} (dividing the input's and output's channels)")
        if self.dims.find(out) in (self.dims.find(time), self.dims.find(spatial)):
            raise Refused(full, "conv", "n_out/out_dim: the feature axis' own dim")
        f = self.dims.size(spatial)
        fsize = -(-f // sf) if padding == "same" else (f - kf) // sf + 1  # TF's
        if fsize < 1:
            raise Refused(full, "conv", f"filter_size {kf} over the feature axis of {self.dims.size(spatial)}")
        new_time = padding == "valid" or st > 1
        out_time, out_feat = self._conv2d_out_dims(layer, d, full, src, new_time, fsize, out)
        kwargs = {"filter_size": tuple_(num(kt), num(kf))}
        if padding == "valid":
            kwargs["padding"] = literal("valid")
        if (st, sf) != (1, 1):
            kwargs["stride"] = tuple_(num(st), num(sf))
        if groups != 1:
            kwargs["groups"] = num(groups)
        if not d.get("with_bias", self.cfg.behavior_version >= 10):
            kwargs["with_bias"] = literal(False)
        at = {"axis": self.dim(time), "feature_axis": self.dim(spatial)}
        if new_time:
            at["out_axis"] = self.dim(out_time)
        if self.dims.find(out_feat) != self.dims.find(spatial):
            at["out_feature_axis"] = self.dim(out_feat)
        self.imports.add("Conv2d")
        expr = call(call("Conv2d", self.dim(out), **kwargs), src.tensor(), **at)
        new = {time: out_time, spatial: out_feat, channel: out}
        dims = tuple(new.get(x, x) for x in src.dims)
        if scope.outer is None:  # RETURNN's names of its spatial tags (what `stag:` reads)
            self.layer_tags |= {f"{layer}:conv:s0": out_time, f"{layer}:conv:s1": out_feat}
        val = self._activation(Val(expr, dims), d.get("activation"), full, "conv")
        self._emit(scope, var, val.expr, layer, ModuleRef("conv", self._tf_prefix(layer, d, scope)))
        if padding == "same" and st > 1:
            why = (
                f"RETURNN's 'same' conv with time stride {st} pads by the batch's longest length (TensorFlow's "
                "'same'), netc's Conv2d by each sequence's own, so a sequence's windows differ where its length "
                f"is not congruent to the longest's modulo {st} (they agree where it is)"
            )
            self.warnings.append(Refused(full, "conv", why))
            scope.stmts[-1].note = f"warning: layer {layer!r}: {why}"
        if padding == "same" and kt > 1:
            self._warn_same_conv(layer, d, scope, full, "Conv2d")
        return Val(name(var), dims)

    def _conv2d_out_dims(self, layer, d, full, src: Val, new_time: bool, fsize: int, out: str) -> tuple[str, str]:
        """A 2-D conv's time and feature dims out: a new dynamic dim where it makes one (its
        `out_spatial_dims` tag, else one of its own), the feature axis' static dim of its new size."""
        from netc.importer.attention import new_dim

        time = next(x for x in src.dims if self.dims.is_dynamic(x))
        spatial = next(x for x in src.dims if self.dims.is_static(x))
        given = d.get("out_spatial_dims")
        if given is not None and not (isinstance(given, list | tuple) and len(given) == 2):
            raise Refused(full, "conv", f"out_spatial_dims {given!r} (the time dim, then the feature axis)")
        out_time = time
        if new_time:
            out_time = self._conv_out_time(layer, {"out_spatial_dims": given[0]} if given else {}, full)
        elif given is not None and (not isinstance(given[0], dict) or self.dims.tag(given[0]["__dim__"]) != time):
            raise Refused(full, "conv", f"out_spatial_dims {given!r} (the input's time dim, then the feature axis)")
        if fsize == self.dims.size(spatial):
            out_feat = spatial
        else:
            out_feat = new_dim(self, fsize, f"{identifier(layer)}_feature", set(src.dims) | {out})
        if given is not None:
            tag = given[1]
            key = self.dims.tag(tag["__dim__"]) if isinstance(tag, dict) else None
            if key is None or self.dims.size(key) != fsize:
                raise Refused(full, "conv", f"out_spatial_dims {given!r} (a static feature dim of {fsize})")
            if self.dims.find(key) != self.dims.find(out_feat):
                if self.dims.find(key) in {self.dims.find(x) for x in (*src.dims, out) if x != spatial}:
                    raise Refused(full, "conv", f"out_spatial_dims {given!r} (a feature dim of its own)")
                out_feat = key
        return out_time, out_feat

    def _conv_out_time(self, layer, d, full) -> str:
        """The dynamic dim a "valid" conv makes: its `out_spatial_dims` tag, else one of its own."""
        given = d.get("out_spatial_dims")
        if given is None:
            return self.dims.fresh(f"{identifier(layer)}_time", None)
        tag = given[0] if isinstance(given, list | tuple) and len(given) == 1 else given
        if not isinstance(tag, dict) or tag["__dim__"] in self.dims._by_tag:
            raise Refused(full, "conv", f"out_spatial_dims {given!r} (a new dim tag is supported)")
        key = self.dims.tag(tag["__dim__"])
        if not self.dims.is_dynamic(key):
            raise Refused(full, "conv", f"out_spatial_dims {given!r} (a new dim tag is supported)")
        return key

    def _l_layer_norm(self, layer, d, scope, var, full) -> Val:
        src = self._source(d, scope, full)
        if src.sparse is not None:
            raise Refused(full, "layer_norm", "labels (sparse) as input")
        feat = feature(src, self.dims)
        for opt in ("in_dim", "out_dim"):
            if opt in d and self._axis(src, d[opt]) != feat:
                raise Refused(full, "layer_norm", f"{opt} other than the feature dim")
        if d.get("epsilon", LAYER_NORM_EPS) != LAYER_NORM_EPS:
            raise Refused(full, "layer_norm", f"epsilon {d['epsilon']!r} (netc's `LayerNorm` has RETURNN's 1e-6)")
        self.imports.add("LayerNorm")
        value = call(call("LayerNorm"), src.tensor())
        self._emit(scope, var, value, layer, ModuleRef("layer_norm", self._tf_prefix(layer, d, scope)))
        return Val(name(var), src.dims)

    def _l_batch_norm(self, layer, d, scope, var, full, src: Val | None = None) -> Val:
        """`BatchNorm(eps, momentum)`: RETURNN's batch norm where netc's is the same: statistics of
        the batch's valid frames in training (`use_sample` 0, `masked_time`), the running ones
        otherwise, updated in training only; or, with RETURNN's defaults before behavior version
        12 (`update_sample_only_in_training` and `delay_sample_update` False), updated outside
        training too and then used: `update_in_inference=True`. (With updates in training only,
        `delay_sample_update` changes nothing: the running statistics are read only where they are
        not updated.) Param versions 0 and 1 name the variables otherwise, [1, ..., feature]. `src`:
        the output of a layer with the `batch_norm` option (RETURNN's `LayerBase.batch_norm` the same)."""
        src = self._source(d, scope, full) if src is None else src
        dyn = [x for x in src.dims if self.dims.is_dynamic(x)]
        if scope.rec is not None or src.sparse is not None or BATCH not in src.dims or len(src.dims) != 2 + len(dyn):
            raise Refused(full, "batch_norm", "[batch, feature] or [batch, time, feature] outside rec units")
        feat = feature(src, self.dims)
        if "in_dim" in d and self._axis(src, d["in_dim"]) != feat:
            raise Refused(full, "batch_norm", "in_dim other than the feature dim")
        new = self.cfg.behavior_version >= 12  # RETURNN's defaults changed there
        defaults = {
            "use_shift": True,
            "use_std": True,
            "use_sample": 0.0,
            "force_sample": False,
            "masked_time": True,
        }
        why = {"masked_time": " (netc's statistics are those of the valid frames)"}
        if not dyn and d.get("masked_time", True):  # RETURNN flattens the time axis it lacks: an assertion
            raise Refused(full, "batch_norm", "masked_time True on [batch, feature] (RETURNN rejects it too)")
        for opt, default in defaults.items():
            got = d.get(opt, default)
            if got != default and (opt != "masked_time" or dyn):  # [batch, feature]: nothing to mask
                given = "" if opt in d else " (RETURNN's default with this behavior_version)"
                raise Refused(full, "batch_norm", f"{opt} {got!r}{given} not supported{why.get(opt, '')}")
        only_training = d.get("update_sample_only_in_training", new)
        delay = d.get("delay_sample_update", new)
        if only_training not in (True, False) or delay not in (True, False):
            raise Refused(full, "batch_norm", "update_sample_only_in_training and delay_sample_update: True or False")
        version = d.get("param_version", 2 if new else 0)
        if version == 2 and not d.get("masked_time", True):  # TF's fused batch norm: never updated outside training
            only_training = True
        if not only_training and not dyn:
            raise Refused(
                full,
                "batch_norm",
                "statistics updated outside training on [batch, feature] not supported (netc's RETURNN config has"
                " param version 2, whose fused batch norm updates them in training only)",
            )
        if not only_training and delay:  # the batch moves the statistics after use: a later batch's numbers
            raise Refused(
                full,
                "batch_norm",
                "update_sample_only_in_training False with delay_sample_update True not supported"
                " (netc's statistics updated outside training are used moved)",
            )
        if version not in (0, 1, 2):
            raise Refused(full, "batch_norm", f"param_version {version!r} (RETURNN's are 0, 1 and 2)")
        eps, momentum = d.get("epsilon", 1e-3), d.get("momentum", 0.1 if new else 0.99)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (eps, momentum)):
            raise Refused(full, "batch_norm", "epsilon and momentum: numbers")
        self.imports.add("BatchNorm")
        opts = {"eps": num(float(eps)), "momentum": num(float(momentum))}
        if not only_training:
            opts["update_in_inference"] = literal(True)
        value = call(call("BatchNorm", **opts), src.tensor())
        ref = ModuleRef("batch_norm", self._tf_prefix(layer, d, scope))
        if version < 2:  # `<layer>_<its output's name>_mean` (version 0) or `mean`, of [1, ..., feature]
            prefix = f"{layer}_{layer}_output_" if version == 0 else ""
            roles = ("mean", "variance", "gamma", "beta")
            ref.tf_names.update({f"batch_norm/v2_{r}": f"batch_norm/{prefix}{r}" for r in roles})
            ref.leading_ones.update({f"batch_norm/v2_{r}": len(src.dims) - 1 for r in roles})
        self._emit(scope, var, value, layer, ref)
        return Val(name(var), src.dims)

    def _l_gating(self, layer, d, scope, var, full) -> Val:
        """`act(a) * gate_act(b)` of the input's feature halves (or of two sources of one dim):
        `glu(x, half)` for RETURNN's GLU (`activation: identity`, sigmoid gate)."""
        vals = [self.get(s, scope) for s in sources(d)]
        two = len(vals) == 2 and all(v.sparse is None for v in vals) and not d.get("dropout")
        if two and self.dims.find(feature(vals[0], self.dims)) == self.dims.find(feature(vals[1], self.dims)):
            if {self.dims.find(x) for x in vals[0].dims} != {self.dims.find(x) for x in vals[1].dims}:
                raise Refused(full, "gating", "its two inputs differ in dims")
            a, b = vals
            half = feature(a, self.dims)
            src = None
        else:
            src = self._source(d, scope, full)
            feat = feature(src, self.dims)
            if src.sparse is not None or self.dims.size(feat) % 2:
                raise Refused(full, "gating", "a feature dim of even size is split in halves")
            half = self._gating_dim(layer, d, full, self.dims.size(feat) // 2)
        act, gate = d.get("activation"), d.get("gate_activation", "sigmoid")
        if "activation" not in d:
            raise Refused(full, "gating", "give `activation` (RETURNN requires it)")
        if src is not None and act in (None, "identity", "linear") and gate == "sigmoid":
            self.imports.add("glu")
            self._emit(scope, var, call("glu", src.tensor(), self.dim(half)), layer)
            return Val(name(var), tuple(half if x == feat else x for x in src.dims))
        if src is not None:
            dims = tuple(half if x == feat else x for x in src.dims)
            ha, hb = self.fresh(f"{var}_a"), self.fresh(f"{var}_b")
            self.imports.add("split")
            parts = call("split", src.tensor(), _list([self.dim(half), self.dim(half)]))
            scope.stmts.append(Assign([ha, hb], parts, comment=f"layer {layer!r}: its input's halves"))
            a, b = Val(name(ha), dims), Val(name(hb), dims)
        x = self._activation(a, act, full, "gating")
        g = self._activation(b, gate, full, "gating")
        self._emit(scope, var, binop("*", x.expr, g.expr), layer)
        return Val(name(var), a.dims)

    def _gating_dim(self, layer, d, full, size: int) -> str:
        if isinstance(d.get("out_dim"), dict):
            key = self.dims.tag(d["out_dim"]["__dim__"])
        else:
            key = self.dims.static(size, identifier(layer))
        n_out = d.get("n_out", size)
        if self.dims.size(key) != size or n_out != size:
            raise Refused(full, "gating", f"n_out/out_dim other than half the input's features ({size})")
        return key


def _list(items):
    import libcst as cst

    return cst.List([cst.Element(i) for i in items])
