"""Transformer layers built from netc's ops where the result is RETURNN's exactly:
`positional_encoding` (Tensor2Tensor's sinusoids over each sequence's positions)."""

from __future__ import annotations

import math

import libcst as cst

from netc.importer.attention import new_dim
from netc.importer.dims import BATCH
from netc.importer.syntax import binop, call, identifier, literal, name, num
from netc.importer.values import Refused, Val, feature
from netc.importer.writer import Assign

KNOWN = {"positional_encoding": {"axis", "add_to_input", "constant", "offset", "n_out", "out_dim", "dropout"}}


class TransformerLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _l_positional_encoding(self, layer, d, scope, var, full) -> Val:
        """RETURNN's `get_positional_encoding` over the time dim: for D channels and h = D // 2
        timescales, angles `pos * exp(i * -log(1e4) / (h - 1))` [batch, time, h], then `sin` of
        them in the first h channels and `cos` in the last h (`concat`, laid into the layer's dim
        by `split_dims`/`merge_dims` as two halves); `add_to_input` adds the input."""
        src = self._source(d, scope, full)
        dyn = [x for x in src.dims if self.dims.is_dynamic(x)]
        if scope.rec is not None or len(dyn) != 1 or BATCH not in src.dims or len(src.dims) != 3 or src.sparse:
            raise Refused(full, "positional_encoding", "of [batch, time, feature] outside rec units")
        if d.get("constant", -1) != -1 or d.get("offset") is not None:
            raise Refused(full, "positional_encoding", "`constant` and `offset` not supported")
        if "axis" in d and self._axis(src, d["axis"]) != dyn[0]:
            raise Refused(full, "positional_encoding", f"axis {d['axis']!r} (the time dim is supported)")
        time = dyn[0]
        if d.get("add_to_input"):
            out = feature(src, self.dims)
        else:
            out = self._out_dim(layer, d, full)
        size = self.dims.size(out)
        if size % 2 or size < 4:
            raise Refused(full, "positional_encoding", f"{size} channels (an even number, at least 4, is supported)")
        base = identifier(layer)
        half = new_dim(self, size // 2, f"{base}_half", {out})
        two = new_dim(self, 2, f"{base}_two", {out, half})
        increment = math.log(1.0e4) / float(size // 2 - 1)
        self.imports |= {"range_over", "exp", "expand", "sin", "cos", "concat", "split_dims", "merge_dims"}
        angles = self.fresh(f"{var}_angles")
        positions = call("expand", call("range_over", self.dim(time), dtype=literal("float32")), self.dim(half))
        inv = call("exp", binop("*", call("range_over", self.dim(half), dtype=literal("float32")), num(-increment)))
        comment = f"layer {layer!r}: position / 10000 ** (i / {size // 2 - 1})"
        scope.stmts.append(Assign([angles], binop("*", positions, inv), comment=comment))
        both = call("concat", call("sin", name(angles)), call("cos", name(angles)))
        halves = cst.Tuple([cst.Element(self.dim(two)), cst.Element(self.dim(half))])
        split = call("split_dims", both, axis=binop("+", self.dim(half), self.dim(half)), dims=halves)
        value = call("merge_dims", split, dims=halves, out_dim=self.dim(out))
        if d.get("add_to_input"):
            value = binop("+", src.tensor(), value)
        self._emit(scope, var, value, layer)
        return Val(name(var), src.dims if d.get("add_to_input") else (BATCH, time, out))
