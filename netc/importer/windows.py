"""RETURNN's `window` layer (frame context: each frame with its neighbours, a new window dim) as a
one-hot `dot` over a second view of the time dim, the form `gather` takes too: frame t, window
position w is x's frame t - left + w, and zeros outside each sequence's own frames.

Only the form whose frames netc can name is imported: padding "same" with stride 1 (the result is
over the input's time dim). A strided or "valid" window makes a time dim of other lengths, which
no netc op makes from a one-hot selection; those are refused, naming the option."""

from __future__ import annotations

from netc.importer.attention import new_dim
from netc.importer.dims import BATCH
from netc.importer.sharing import _eq
from netc.importer.syntax import binop, call, identifier, literal, name, num
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
        if str(d.get("padding", "same")).lower() != "same":
            raise Refused(
                full, "window", f"padding {d['padding']!r} (a 'valid' window makes a time dim of its own lengths)"
            )
        if d.get("stride", 1) != 1:
            raise Refused(full, "window", f"stride {d['stride']!r} (stride 1 is supported: netc subsamples no frames)")
        size = _int(d.get("window_size"))
        tag = d.get("window_dim")
        if size is None and isinstance(tag, dict):
            size = self.dims.tags[tag["__dim__"]].size
        if size is None or size < 1:
            raise Refused(full, "window", f"window_size {d.get('window_size')!r} (a positive int)")
        left, right = d.get("window_left"), d.get("window_right")
        if (left is not None and _int(left) is None) or (right is not None and _int(right) is None):
            raise Refused(full, "window", "window_left and window_right: ints")
        # RETURNN's defaults (`windowed_nd`): centred, the odd frame to the right
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
        kv = self.dims._new(self.dims._fresh_name(f"{identifier(layer)}_src_time"), None)
        self.imports |= {"dot", "cast", "expand", "range_over", "replace_dim"}
        frames = self.fresh(f"{var}_src")  # the input over a second view of its time dim
        at = {"axis": self.dim(time), "out_axis": self.dim(kv)}
        scope.stmts.append(Assign([frames], call("replace_dim", src.tensor(), **at)))
        # [batch, time, window]: the frame each window position reads
        pos = call("expand", call("range_over", self.dim(time)), self.dim(win))
        pos = binop("+", pos, call("range_over", self.dim(win)))
        if left:
            pos = binop("-", pos, num(left))
        pos_var = self.fresh(f"{var}_pos")
        scope.stmts.append(Assign([pos_var], pos))
        hit = _eq(call("expand", name(pos_var), self.dim(kv)), call("range_over", self.dim(kv)))
        hit = call("cast", hit, literal("float32"))
        self._emit(scope, var, call("dot", hit, name(frames), reduce=self.dim(kv)), layer)
        if right and not self._zero_padded(d, scope):
            why = (
                "RETURNN's window reads the frames after a shorter sequence's end, where its input (not a raw "
                "input) may be nonzero; netc's reads zeros there, so the numbers at a shorter sequence's last "
                "frames may differ"
            )
            self.warnings.append(Refused(full, "window", why))
            scope.stmts[-1].note = f"warning: layer {layer!r}: {why}"
        i = src.dims.index(time) + 1
        return Val(name(var), (*src.dims[:i], win, *src.dims[i:]))
