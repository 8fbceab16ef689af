"""Layers that cut, pad or drop axes, and parameters as layers: `squeeze` (a dim of size 1 summed
away), `slice` (of a sequence's frames: `slice_frames`; of a static axis: `split` of the feature
dim, else a one-hot `dot`), `pad`/`postfix_in_time`/`prefix_in_time` (frames of a value before or
after each sequence's own frames: `pad_frames`), `variable` (`Bias(dims)(zeros(dims))`: the
parameter itself)."""

from __future__ import annotations

from netc.importer.attention import new_dim
from netc.importer.dims import BATCH
from netc.importer.syntax import binop, call, compare, identifier, literal, name, num
from netc.importer.values import DIM, Refused, Val, feature

KNOWN = {
    "squeeze": {"axis", "allow_no_op"},
    "slice": {"axis", "slice_start", "slice_end", "slice_step"},
    "pad": {"axes", "padding", "value", "mode", "handle_dynamic_dims"},
    "postfix_in_time": {"postfix", "repeat", "axis"},
    "prefix_in_time": {"prefix", "repeat", "axis"},
    "scatter_nd": {"position", "position_axis", "output_dim_via_time_from", "filter_invalid_indices"},
    "swap_axes": {"axis1", "axis2"},
    "slice_nd": {"start", "size", "axis", "min_size"},
    "variable": {"shape", "init", "dtype", "add_batch_axis", "add_time_axis", "param_name"},
}


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


class AxesLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _l_squeeze(self, layer, d, scope, var, full) -> Val:
        """A static dim of size 1 summed away (the one value it holds); a time dim of one frame per
        sequence (RETURNN squeezes the padded axis: its longest sequence has one frame; a value per
        utterance, a speaker's label) summed over its frames (labels: the one-hot labels summed, their
        argmax)."""
        src = self._source(d, scope, full)
        axis = self._axis(src, d.get("axis"))
        if axis is None or axis not in src.dims or axis == BATCH:
            raise Refused(full, "squeeze", f"axis {d.get('axis')!r} (F, T or a dim tag of the input is supported)")
        if self.dims.is_dynamic(axis) and scope.rec is None:
            value = src.tensor()
            if src.sparse is not None:
                self.imports |= {"one_hot", "argmax"}
                value = call("one_hot", value)
            self.imports.add("reduce_sum")
            value = call("reduce_sum", value, axis=self.dim(axis))
            if src.sparse is not None:
                value = call("argmax", value, axis=self.dim(src.sparse))
            self._emit(scope, var, value, layer)
            return Val(name(var), tuple(x for x in src.dims if x != axis), src.sparse)
        if src.sparse is not None:
            raise Refused(full, "squeeze", f"axis {d.get('axis')!r} of labels (their time axis is supported)")
        if not self.dims.is_static(axis) or self.dims.size(axis) != 1:
            raise Refused(full, "squeeze", f"axis {d.get('axis')!r}: a static dim of size 1 is supported")
        sd = scope.layers.get(d.get("from")) if isinstance(d.get("from"), str) else None
        if isinstance(sd, dict) and sd.get("class") == "compare":
            raise Refused(full, "squeeze", "of a `compare` (bools) not supported")
        self.imports.add("reduce_sum")
        self._emit(scope, var, call("reduce_sum", src.tensor(), axis=self.dim(axis)), layer)
        return Val(name(var), tuple(x for x in src.dims if x != axis))

    def _l_slice(self, layer, d, scope, var, full) -> Val:
        src = self._source(d, scope, full)
        axis = self._axis(src, d.get("axis"))
        start, end, step = (d.get(k) for k in ("slice_start", "slice_end", "slice_step"))
        if (
            axis is None
            or axis not in src.dims
            or axis == BATCH
            or (src.sparse is not None and not self.dims.is_dynamic(axis))
        ):
            raise Refused(full, "slice", f"axis {d.get('axis')!r} (T, F, s:i or a dim tag; of labels: T)")
        if any(v is not None and _int(v) is None for v in (start, end, step)):
            raise Refused(full, "slice", "slice_start, slice_end, slice_step: ints")
        if self.dims.is_dynamic(axis):
            return self._slice_frames(layer, d, scope, var, full, src, axis, start, end, step)
        size = self.dims.size(axis)
        idx = list(range(size))[slice(start, end, step)]
        if not idx:
            raise Refused(full, "slice", f"[{start}:{end}:{step}] of a dim of {size} leaves nothing")
        out = new_dim(self, len(idx), f"{identifier(layer)}_dim", set(src.dims))
        first, stride = idx[0], (step or 1)
        if stride == 1 and axis == _feature_or_none(src, self.dims):  # a part of the feature dim: `split`
            parts: list[str] = []
            for i, s in enumerate((first, len(idx), size - first - len(idx))):
                if s:
                    parts.append(
                        out if i == 1 else new_dim(self, s, f"{identifier(layer)}_{i}", {*src.dims, out, *parts})
                    )
            value = src.tensor()
            if len(parts) > 1:
                self.imports.add("split")
                value = _subscript(call("split", value, _list(self, parts)), parts.index(out))
        else:  # [.., out]: a one-hot dot picking position first + i * stride for each i
            self.imports |= {"dot", "cast", "expand", "range_over"}
            pos = call("range_over", self.dim(out))
            if stride != 1:
                pos = binop("*", pos, num(stride))
            if first:
                pos = binop("+", pos, num(first))
            hit = compare("==", call("expand", pos, self.dim(axis)), call("range_over", self.dim(axis)))
            value = call("dot", call("cast", hit, literal("float32")), src.tensor(), reduce=self.dim(axis))
        self._emit(scope, var, value, layer)
        return Val(name(var), tuple(out if x == axis else x for x in src.dims))

    def _slice_frames(self, layer, d, scope, var, full, src: Val, axis: str, start, end, step) -> Val:
        """Each sequence's frames [start:end] (end < 0: from its own end, as RETURNN's lengths n - e
        and frames t + start are)."""
        if scope.rec is not None:
            raise Refused(full, "slice", "of the time dim in a rec unit not supported")
        if step not in (None, 1) or (start is not None and start < 0) or (end is not None and end >= 0):
            raise Refused(
                full,
                "slice",
                f"[{start}:{end}:{step}] of a dynamic dim (slice_start >= 0 and slice_end < 0 or None, no step)",
            )
        if not start and end is None:
            self._emit(scope, var, src.tensor(), layer)
            return Val(name(var), src.dims, src.sparse)
        out = self.dims.fresh(f"{identifier(layer)}_time", None)
        kwargs = {"axis": self.dim(axis)}
        if start:
            kwargs["start"] = num(start)
        if end is not None:
            kwargs["stop"] = num(end)
        kwargs["out_axis"] = self.dim(out)
        self.imports.add("slice_frames")
        self._emit(scope, var, call("slice_frames", src.tensor(), **kwargs), layer)
        return Val(name(var), tuple(out if x == axis else x for x in src.dims), src.sparse)

    def _frames(self, layer, d, scope, var, full, src: Val, axis: str, left: int, right: int, value) -> Val:
        """`pad_frames`: `left` frames of `value` before each sequence's frames, `right` after."""
        cls = d.get("class", "?")
        if scope.rec is not None:
            raise Refused(full, cls, "in a rec unit not supported")
        if not _number(value):
            raise Refused(full, cls, f"value {value!r} (a number is supported)")
        if not left and not right:
            self._emit(scope, var, src.tensor(), layer)
            return Val(name(var), src.dims, src.sparse)
        out = self.dims.fresh(f"{identifier(layer)}_time", None)
        kwargs = {"axis": self.dim(axis)}
        if left:
            kwargs["left"] = num(left)
        if right:
            kwargs["right"] = num(right)
        if value or src.sparse is not None:  # labels: an integer (pad_frames' default 0.0 is a float's)
            kwargs["value"] = num(int(value) if src.sparse is not None else float(value))
        kwargs["out_axis"] = self.dim(out)
        self.imports.add("pad_frames")
        self._emit(scope, var, call("pad_frames", src.tensor(), **kwargs), layer)
        return Val(name(var), tuple(out if x == axis else x for x in src.dims), src.sparse)

    def _l_postfix_in_time(self, layer, d, scope, var, full) -> Val:
        return self._in_time(layer, d, scope, var, full, "postfix")

    def _l_prefix_in_time(self, layer, d, scope, var, full) -> Val:
        return self._in_time(layer, d, scope, var, full, "prefix")

    def _in_time(self, layer, d, scope, var, full, which: str) -> Val:
        src = self._source(d, scope, full)
        axis = self._axis(src, d.get("axis", "T"))
        repeat = _int(d.get("repeat", 1))
        if axis is None or not self.dims.is_dynamic(axis):
            raise Refused(full, d["class"], f"axis {d.get('axis')!r} (a dynamic dim is supported)")
        if repeat is None or repeat < 0:
            raise Refused(full, d["class"], f"repeat {d.get('repeat')!r} (a number of frames is supported)")
        left, right = (repeat, 0) if which == "prefix" else (0, repeat)
        return self._frames(layer, d, scope, var, full, src, axis, left, right, d.get(which, 0.0))

    def _l_pad(self, layer, d, scope, var, full) -> Val:
        """Padding of one dynamic axis: `pad_frames`. Right padding without `handle_dynamic_dims`
        (RETURNN's default before behavior version 21) puts the value after the batch's longest
        sequence; a shorter one then reads its own padded frames there: the same where those are
        zeros (a raw input) and the value 0."""
        if str(d.get("mode", "constant")).lower() != "constant":
            raise Refused(full, "pad", f"mode {d.get('mode')!r} (constant is supported)")
        src = self._source(d, scope, full)
        axes = d.get("axes")
        axes = list(axes) if isinstance(axes, list | tuple) else [axes]
        padding = d.get("padding")
        if _int(padding) is not None:
            padding = [(padding, padding)] * len(axes)
        elif isinstance(padding, list | tuple) and len(padding) == 2 and all(_int(p) is not None for p in padding):
            padding = [tuple(padding)] * len(axes)
        keys = [self._axis(src, a) for a in axes]
        if len(keys) != 1 or keys[0] is None or not self.dims.is_dynamic(keys[0]) or len(padding) != 1:
            raise Refused(full, "pad", f"axes {d.get('axes')!r} (one dynamic axis is supported)")
        left, right = padding[0]
        if _int(left) is None or _int(right) is None or left < 0 or right < 0:
            raise Refused(full, "pad", f"padding {d.get('padding')!r} (frames before and after)")
        dynamic = d.get("handle_dynamic_dims")
        if dynamic is None:
            dynamic = self.cfg.behavior_version >= 21
        value = d.get("value", 0)
        if right and not dynamic and not (value == 0 and self._zero_padded(d, scope)):
            raise Refused(
                full,
                "pad",
                "right padding without handle_dynamic_dims (RETURNN pads after the batch's longest sequence; a "
                "shorter one reads its padded frames there)",
            )
        return self._frames(layer, d, scope, var, full, src, keys[0], left, right, value)

    def _l_scatter_nd(self, layer, d, scope, var, full) -> Val:
        """The input's values put at the positions of `position` along a new axis (the time dim of
        `output_dim_via_time_from`), summed where positions meet (`tf.scatter_nd`): a one-hot of the
        positions times the input, summed over `position_axis`; positions outside the axis give nothing."""
        src = self._source(d, scope, full)
        pos_name, via = d.get("position"), d.get("output_dim_via_time_from")
        if not isinstance(pos_name, str) or not isinstance(via, str) or src.sparse is not None:
            raise Refused(full, "scatter_nd", "a `position` layer and `output_dim_via_time_from` of a float input")
        pos = self.get(pos_name, scope)
        axis = self._axis(pos, d.get("position_axis"))
        out = next((x for x in self.get(via, scope).dims if self.dims.is_dynamic(x)), None)
        if axis is None or axis not in pos.dims or out is None or self.dims.find(out) in map(self.dims.find, pos.dims):
            raise Refused(
                full, "scatter_nd", f"position_axis {d.get('position_axis')!r} (a dim of the positions) over a time dim"
            )
        self.imports |= {"cast", "expand", "range_over"}
        hit = compare("==", call("expand", pos.tensor(), self.dim(out)), call("range_over", self.dim(out)))
        onehot = call("cast", hit, literal("float32"))
        if axis in src.dims:  # each position's own value
            self.imports.add("dot")
            value = call("dot", onehot, src.tensor(), reduce=self.dim(axis))
        else:  # one value for all positions along the axis: times how many of them hit
            self.imports.add("reduce_sum")
            value = binop(
                "*", call("expand", src.tensor(), self.dim(out)), call("reduce_sum", onehot, axis=self.dim(axis))
            )
        self._emit(scope, var, value, layer)
        find = self.dims.find
        dims = [x for x in (*pos.dims, out) if x != axis]
        dims += [x for x in src.dims if find(x) not in {find(y) for y in dims} and x != axis]
        return Val(name(var), tuple(dims))

    def _l_slice_nd(self, layer, d, scope, var, full) -> Val:
        """`size` frames from each sequence's `start` on (a layer of one position per sequence, or per
        frame of the query): a one-hot `dot` over the time dim, zeros outside the input's frames."""
        src = self._source(d, scope, full)
        size, start = d.get("size"), d.get("start")
        time = self._axis(src, d.get("axis", "T"))
        if _int(start) == 0 and isinstance(size, dict) and DIM in size and time is not None:
            # the first frames, as many as a time dim's (an upsampled encoder's cut to the alignment's)
            other = self.dims.tag(size[DIM])
            if not self.dims.is_dynamic(other) or not self.dims.is_dynamic(time) or src.sparse is not None:
                raise Refused(full, "slice_nd", f"size {size!r}: a time dim (of a float input's time) is supported")
            value, dims = self._frames_over(src, time, other, full, "slice_nd", "size")
            self._emit(scope, var, value, layer)
            return Val(name(var), dims)
        if _int(size) is None or size < 1 or not isinstance(start, str) or time is None:
            raise Refused(full, "slice_nd", "a `start` layer and a number `size` over the time dim are supported")
        if not self.dims.is_dynamic(time) or src.sparse is not None:
            raise Refused(full, "slice_nd", "of the time dim of a float input is supported")
        pos = self.get(start, scope)
        if pos.sparse is not None or any(self.dims.is_static(x) for x in pos.dims) or time in pos.dims:
            raise Refused(full, "slice_nd", f"start `{start}`: one int per sequence (or per query frame)")
        win = new_dim(self, size, f"{identifier(layer)}_window", set(src.dims) | set(pos.dims))
        self.imports |= {"dot", "cast", "expand", "range_over"}
        at = binop("+", call("expand", pos.tensor(), self.dim(win)), call("range_over", self.dim(win)))
        hit = compare("==", call("expand", at, self.dim(time)), call("range_over", self.dim(time)))
        self._emit(
            scope, var, call("dot", call("cast", hit, literal("float32")), src.tensor(), reduce=self.dim(time)), layer
        )
        if not self._zero_padded(d, scope):
            why = (
                "RETURNN's slice_nd reads the frames after a shorter sequence's end (up to the batch's longest), "
                "where its input (not a raw input) may be nonzero; netc's reads zeros there, so the numbers of "
                "windows reaching past a sequence's end may differ"
            )
            self.warnings.append(Refused(full, "slice_nd", why))
            scope.stmts[-1].note = f"warning: layer {layer!r}: {why}"
        i = src.dims.index(time)
        dims = [*src.dims[:i], win, *src.dims[i + 1 :]]
        return Val(name(var), tuple(dict.fromkeys([*pos.dims, *dims])))

    def _l_swap_axes(self, layer, d, scope, var, full) -> Val:
        """Two static axes swapped: the same values (netc's dims are named); which is RETURNN's
        feature axis (the last) changes."""
        src = self._source(d, scope, full)
        a, b = self._axis(src, d.get("axis1")), self._axis(src, d.get("axis2"))
        if a is None or b is None or a == b or not (self.dims.is_static(a) and self.dims.is_static(b)):
            raise Refused(full, "swap_axes", "two static axes of the input are supported")
        self._emit(scope, var, src.tensor(), layer)
        swapped = {a: b, b: a}
        return Val(name(var), tuple(swapped.get(x, x) for x in src.dims))

    def _l_variable(self, layer, d, scope, var, full) -> Val:
        """The parameter itself: `Bias(dims)(zeros(dims))` (RETURNN's `<layer>/<layer>`)."""
        if d.get("from") not in (None, []):
            raise Refused(full, "variable", "`from` (a variable reads no input)")
        if d.get("add_time_axis") or d.get("dtype", "float32") != "float32" or d.get("init_by_layer"):
            raise Refused(full, "variable", "add_time_axis, init_by_layer or a dtype other than float32")
        shape = d.get("shape")
        if not isinstance(shape, list | tuple) or not shape:
            raise Refused(full, "variable", f"shape {shape!r} (static dims are supported)")
        keys = []
        for i, s in enumerate(shape):
            if isinstance(s, dict):
                key = self.dims.tag(s["__dim__"])
            elif _int(s) is not None and s > 0:
                key = new_dim(self, s, f"{identifier(layer)}_{i}" if len(shape) > 1 else identifier(layer), set(keys))
            else:
                key = None
            if key is None or not self.dims.is_static(key) or key in keys:
                raise Refused(full, "variable", f"shape {shape!r} (distinct static dims are supported)")
            keys.append(key)
        param = d.get("param_name") or layer
        param = param if isinstance(param, str) else layer
        return self._parameter(layer, d, scope, var, keys, param, batch=bool(d.get("add_batch_axis")))


def _feature_or_none(val: Val, dims) -> str | None:
    try:
        return feature(val, dims)
    except Refused:
        return None


def _list(imp, keys: list[str]):
    import libcst as cst

    return cst.List([cst.Element(imp.dim(k)) for k in keys])


def _subscript(value, i: int):
    import libcst as cst

    return cst.Subscript(value, [cst.SubscriptElement(cst.Index(num(i)))])
