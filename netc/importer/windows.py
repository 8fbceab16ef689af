"""RETURNN's `window` layer (frame context: each frame with its neighbours, a new window dim; with
a stride, frame stacking) as a one-hot `dot`, the form `gather` takes too: window j, position w
is the input's frame j * stride - left + w, and zeros outside each sequence's own frames.

With padding "same" and stride 1 the windows are over the input's time dim, read through a second
view of it (`replace_dim`). A strided or "valid" window is over a time dim of its own, which the
ops with RETURNN's lengths make: `slice_frames` (n - size + 1 frames, "valid") and `max_pool`
(ceil(n / stride)); their values are not read."""

from __future__ import annotations

from netc.importer.attention import new_dim
from netc.importer.dims import BATCH
from netc.importer.syntax import binop, call, compare, identifier, literal, name, num
from netc.importer.values import Refused, Val
from netc.importer.writer import Assign

KNOWN = {
    "window": {"window_size", "window_dim", "window_left", "window_right", "axis", "padding", "stride", "dropout"},
}


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class WindowLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _l_window(self, layer, d, scope, var, full) -> Val:
        if scope.rec is not None:
            raise Refused(full, "window", "in a rec unit (RETURNN's window over the steps so far) not supported")
        padding = str(d.get("padding", "same")).lower()
        if padding not in ("same", "valid"):
            raise Refused(full, "window", f"padding {d['padding']!r} ('same' or 'valid' are supported)")
        stride = _int(d.get("stride", 1))
        if stride is None or stride < 1:
            raise Refused(full, "window", f"stride {d['stride']!r} (a positive int)")
        size = _int(d.get("window_size"))
        tag = d.get("window_dim")
        if size is None and isinstance(tag, dict):
            size = self.dims.tags[tag["__dim__"]].size
        if size is None or size < 1:
            raise Refused(full, "window", f"window_size {d.get('window_size')!r} (a positive int)")
        left, right = d.get("window_left"), d.get("window_right")
        if padding == "valid" and (left is not None or right is not None):
            raise Refused(full, "window", "window_left/window_right with padding 'valid' (RETURNN rejects them)")
        if (left is not None and _int(left) is None) or (right is not None and _int(right) is None):
            raise Refused(full, "window", "window_left and window_right: ints")
        if padding == "valid":
            left, right = 0, 0  # windows from each sequence's frame 0, within its frames
        else:  # RETURNN's defaults (`windowed_nd`): centred, the odd frame to the right
            if right is None:
                right = size - left - 1 if left is not None else size // 2
            if left is None:
                left = size - right - 1
            if left < 0 or right < 0 or left + right + 1 != size:
                raise Refused(full, "window", f"window_left {left} and window_right {right} for window_size {size}")
        src = self._source(d, scope, full)
        dyn = [x for x in src.dims if self.dims.is_dynamic(x)]
        if src.sparse is not None or BATCH not in src.dims or len(dyn) != 1:
            raise Refused(full, "window", "a window over the time dim of [batch, time, ...] (one dynamic dim)")
        time = dyn[0]
        if "axis" in d and self._axis(src, d["axis"]) != time:
            raise Refused(full, "window", f"axis {d['axis']!r} (the time dim is supported)")
        if isinstance(tag, dict):
            win = self.dims.tag(tag["__dim__"])
            if self.dims.find(win) in {self.dims.find(x) for x in src.dims}:
                raise Refused(full, "window", f"window_dim {tag!r}: a dim of the input")
        else:
            hint = identifier(layer) if "window" in layer else f"{identifier(layer)}_window"
            win = new_dim(self, size, hint, set(src.dims))
        self.imports |= {"dot", "cast", "expand", "range_over"}
        if stride == 1 and (padding == "same" or size == 1):  # over the input's time dim, through a second view
            kv = self.dims.fresh(f"{identifier(layer)}_src_time", None)
            out, frames = time, self.fresh(f"{var}_src")
            at = {"axis": self.dim(time), "out_axis": self.dim(kv)}
            self.imports.add("replace_dim")
            scope.stmts.append(Assign([frames], call("replace_dim", src.tensor(), **at)))
        else:  # over a time dim of the layer's own, made with RETURNN's lengths
            out, kv, frames = self._window_time(layer, var, scope, src, time, size, stride, padding), time, None
        # [batch, out, window]: the frame of the input each window position reads
        pos = call("range_over", self.dim(out))
        if stride != 1:
            pos = binop("*", pos, num(stride))
        pos = binop("+", call("expand", pos, self.dim(win)), call("range_over", self.dim(win)))
        if left:
            pos = binop("-", pos, num(left))
        pos_var = self.fresh(f"{var}_pos")
        scope.stmts.append(Assign([pos_var], pos))
        hit = compare("==", call("expand", name(pos_var), self.dim(kv)), call("range_over", self.dim(kv)))
        hit = call("cast", hit, literal("float32"))
        value = name(frames) if frames else src.tensor()
        self._emit(scope, var, call("dot", hit, value, reduce=self.dim(kv)), layer)
        if right and not self._zero_padded(d, scope):
            why = (
                "RETURNN's window reads the frames after a shorter sequence's end, where its input (not a raw "
                "input) may be nonzero; netc's reads zeros there, so the numbers at a shorter sequence's last "
                "frames may differ"
            )
            self.warnings.append(Refused(full, "window", why))
            scope.stmts[-1].note = f"warning: layer {layer!r}: {why}"
        i = src.dims.index(time)
        return Val(name(var), (*src.dims[:i], out, win, *src.dims[i + 1 :]))

    def _window_time(self, layer, var, scope, src: Val, time: str, size: int, stride: int, padding: str) -> str:
        """The time dim of a strided or "valid" window, made by the ops whose lengths are
        RETURNN's: n - size + 1 frames ("valid": `slice_frames`), then ceil(m / stride)
        (`max_pool`); their values are not read, the dim is."""
        x, base, n = src.tensor(), identifier(layer), "n"
        if padding == "valid" and size > 1:
            valid = self.dims.fresh(f"{base}_valid_time", None)
            self.imports.add("slice_frames")
            sliced = self.fresh(f"{var}_last")
            value = call("slice_frames", x, axis=self.dim(time), start=num(size - 1), out_axis=self.dim(valid))
            comment = f"window {layer!r}: n - {size - 1} frames per sequence of n (the windows' dim)"
            scope.stmts.append(Assign([sliced], value, comment=comment))
            x, time, n = name(sliced), valid, f"(n - {size - 1})"
        if stride == 1:
            return time
        out = self.dims.fresh(f"{base}_time", None)
        self.imports.add("max_pool")
        pooled = self.fresh(f"{var}_pooled")
        value = call("max_pool", x, axis=self.dim(time), size=num(stride), out_axis=self.dim(out))
        comment = f"window {layer!r}: ceil({n} / {stride}) frames per sequence of n (the windows' dim)"
        scope.stmts.append(Assign([pooled], value, comment=comment))
        return out
