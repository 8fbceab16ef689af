"""Transformer layers built from netc's ops where the result is RETURNN's exactly:
`positional_encoding` (Tensor2Tensor's sinusoids over each sequence's positions) and
`self_attention` (multi-head, the heads a dim, with RETURNN's `QKV` matrix as the parameter; its
`key_shift` of a `relative_positional_encoding`, the learned table of clipped distances)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import libcst as cst

from netc.importer.attention import new_dim
from netc.importer.dims import BATCH
from netc.importer.syntax import binop, call, compare, identifier, literal, name, num
from netc.importer.values import Refused, Val, feature
from netc.importer.writer import Assign, ModuleRef

KNOWN = {
    "positional_encoding": {"axis", "add_to_input", "constant", "offset", "n_out", "out_dim", "dropout"},
    "self_attention": {
        "num_heads",
        "total_key_dim",
        "n_out",
        "out_dim",
        "attention_left_only",
        "attention_dropout",
        "forward_weights_init",
        "dropout",
        "key_shift",
    },
}
# a `relative_positional_encoding` read as `key_shift`: the options it is imported with
_REL_POS = {"class", "from", "n_out", "out_dim", "clipping", "fixed", "forward_weights_init", "trainable", "L2"}


@dataclass(frozen=True)
class _Heads:
    """A `self_attention`'s heads: H, the key dim K over all heads, the layer's dim; the dims of
    the `QKV` projection, of a head's key and value, of the heads and of a head's part of `QKV`."""

    heads: int
    total_key: int
    out: str
    qkv: str
    key: str
    val_dim: str
    heads_dim: str
    per_head: str

    def merged(self, imp) -> cst.Tuple:
        """(heads, value): the heads' values in RETURNN's order, head by head."""
        return cst.Tuple([cst.Element(imp.dim(self.heads_dim)), cst.Element(imp.dim(self.val_dim))])


class TransformerLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _l_positional_encoding(self, layer, d, scope, var, full) -> Val:
        """RETURNN's `get_positional_encoding` over the time dim: for D channels and h = D // 2
        timescales, angles `pos * exp(i * -log(1e4) / (h - 1))` [batch, time, h], then `sin` of
        them in the first h channels and `cos` in the last h (`concat`, laid into the layer's dim
        by `split_dims`/`merge_dims` as two halves); `add_to_input` adds the input. In a rec unit
        the position is the step's (a loop state from 0, one more each step, as RETURNN's)."""
        src = self._source(d, scope, full)
        dyn = [x for x in src.dims if self.dims.is_dynamic(x)]
        step = scope.rec is not None and not dyn
        if src.sparse or BATCH not in src.dims or len(src.dims) != (2 if step else 3) or (not step and len(dyn) != 1):
            raise Refused(full, "positional_encoding", "of [batch, time, feature] (in a rec unit: [batch, feature])")
        if scope.rec is not None and not step:
            raise Refused(full, "positional_encoding", "over a time dim in a rec unit not supported")
        if d.get("constant", -1) != -1 or d.get("offset") is not None:
            raise Refused(full, "positional_encoding", "`constant` and `offset` not supported")
        if "axis" in d and not step and self._axis(src, d["axis"]) != dyn[0]:
            raise Refused(full, "positional_encoding", f"axis {d['axis']!r} (the time dim is supported)")
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
        if step:  # the step's position: a state of the loop
            position = self.fresh(f"{var}_position")
            self.imports.add("zeros")
            scope.outer.stmts.append(Assign([position], call("zeros", name("batch")), comment="initial state"))
            positions = call("expand", name(position), self.dim(half))
        else:
            positions = call("expand", call("range_over", self.dim(dyn[0]), dtype=literal("float32")), self.dim(half))
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
        if step:
            scope.stmts.append(Assign([position], binop("+", name(position), num(1.0)), comment="the next step's"))
        if d.get("add_to_input"):
            return Val(name(var), src.dims)
        return Val(name(var), (BATCH, out) if step else (BATCH, dyn[0], out))

    def _l_self_attention(self, layer, d, scope, var, full) -> Val:
        """RETURNN's multi-head self-attention over the time dim, the heads a dim: one `QKV` matrix
        [in, 2·K + V] (a `Linear` without bias whose `W` is the TF variable `QKV`), each head's
        columns `q, k, v` in turn (RETURNN's per-head layout), the keys and values over a view of
        time (`replace_dim`); for each head `softmax(dot(q · (K/H)^-0.5, k), axis=kv_time)` (padded
        keys get no weight, as RETURNN's mask; `attention_left_only`: later keys neither), its
        weighted values, the heads merged in RETURNN's order into the layer's dim."""
        if scope.rec is not None:
            return self._self_attention_step(layer, d, scope, var, full)
        src = self._source(d, scope, full)
        dyn = [x for x in src.dims if self.dims.is_dynamic(x)]
        if len(dyn) != 1 or BATCH not in src.dims or len(src.dims) != 3 or src.sparse:
            raise Refused(full, "self_attention", "of [batch, time, feature] outside rec units")
        hd = self._heads(layer, d, full)
        time = dyn[0]
        kv_time = self.dims.fresh(f"{identifier(layer)}_kv_time", None)
        self.imports |= {"Linear", "split", "split_dims", "merge_dims", "replace_dim", "softmax", "dot"}

        def emit(targets: list[str], value, comment=None, module=None):
            scope.stmts.append(Assign(targets, value, comment=comment, module=module))

        n = self._qkv(emit, layer, d, scope, var, hd, src)
        q = self.fresh(f"{var}_q")
        emit([q, "_", "_"], self._split_qkv(name(n), hd))
        kv = self.fresh(f"{var}_kv")
        emit([kv], call("replace_dim", name(n), axis=self.dim(time), out_axis=self.dim(kv_time)))
        k, v = self.fresh(f"{var}_k"), self.fresh(f"{var}_v")
        emit(["_", k, v], self._split_qkv(name(kv), hd))
        causal = None
        if d.get("attention_left_only"):
            self.imports |= {"expand", "range_over", "where"}
            causal = self.fresh(f"{var}_causal")
            keys = call("expand", call("range_over", self.dim(kv_time)), self.dim(time))
            less = compare("<=", keys, call("range_over", self.dim(time)))
            emit([causal], less, "no key after the query")
        shift = None
        if d.get("key_shift") is not None:
            shift = self._key_shift(emit, d["key_shift"], scope, full, src, time, kv_time, hd.key)
        o = self._attend(emit, var, d, hd, q, k, v, kv_time, causal, shift)
        self._emit(scope, var, call("merge_dims", name(o), dims=hd.merged(self), out_dim=self.dim(hd.out)), layer)
        return Val(name(var), (BATCH, time, hd.out))

    def _heads(self, layer: str, d: dict, full: str) -> _Heads:
        """`num_heads`, `total_key_dim`, the layer's dim and the dims of its `QKV` projection."""
        heads, total_key = d.get("num_heads"), d.get("total_key_dim")
        out = self._out_dim(layer, d, full)
        value = self.dims.size(out)
        ints = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (heads, total_key))
        if not ints or total_key % heads or value % heads:
            raise Refused(full, "self_attention", "num_heads dividing total_key_dim and n_out")
        base = identifier(layer)
        qkv = self.dims.static(2 * total_key + value, f"{base}_qkv")
        key = self.dims.static(total_key // heads, f"{base}_key")
        val_dim = self.dims.static(value // heads, f"{base}_value")
        heads_dim = new_dim(self, heads, f"{base}_heads", {key, val_dim})
        per_head = new_dim(self, (2 * total_key + value) // heads, f"{base}_qkv_head", {qkv, key, val_dim, heads_dim})
        return _Heads(heads, total_key, out, qkv, key, val_dim, heads_dim, per_head)

    def _qkv(self, emit, layer: str, d: dict, scope, var: str, hd: _Heads, src: Val) -> str:
        """The one `Linear` without bias whose `W` is RETURNN's `QKV`, split into the heads: its
        result's name ([..., heads, qkv_head])."""
        n = self.fresh(f"{var}_qkv")
        ref = ModuleRef("linear", self._tf_prefix(layer, d, scope), {"W": "QKV"})
        comment = f"layer {layer!r} (self_attention): each head's query, key and value, RETURNN's `QKV`"
        linear = call(call("Linear", self.dim(hd.qkv), with_bias=literal(False)), src.tensor())
        pair = cst.Tuple([cst.Element(self.dim(hd.heads_dim)), cst.Element(self.dim(hd.per_head))])
        emit([n], call("split_dims", linear, axis=self.dim(hd.qkv), dims=pair), comment, ref)
        return n

    def _split_qkv(self, x, hd: _Heads):
        """A head's query, key and value, RETURNN's layout of `QKV` within each head."""
        parts = cst.List([cst.Element(self.dim(k)) for k in (hd.key, hd.key, hd.val_dim)])
        return call("split", x, parts, axis=self.dim(hd.per_head))

    def _key_shift(self, emit, rel: str, scope, full: str, src: Val, time: str, kv_time: str, key: str) -> str:
        """RETURNN's `relative_positional_encoding` read as `key_shift` (Shaw et al.): for query i
        and key j the row `clip(j - i, -c, c) + c` of its learned table `encoding_matrix` [2c + 1,
        key]; here the table is the `W` of a `Linear` without bias over a one-hot of the clipped
        distance. Returns the name of that [batch, time, kv_time, key] value."""
        rd = scope.layers.get(rel) if isinstance(rel, str) else None
        if not isinstance(rd, dict) or rd.get("class") != "relative_positional_encoding":
            raise Refused(full, "self_attention", f"key_shift {rel!r} (a relative_positional_encoding layer is)")
        rel_full = self._full(rel, scope)
        done = getattr(self, "_rel_pos_read", None)
        if done is None:
            done = self._rel_pos_read = set()
        if rel_full in done:
            raise Refused(full, "self_attention", f"key_shift {rel!r}, which another self_attention reads too")
        done.add(rel_full)
        extra = set(rd) - _REL_POS
        if extra or rd.get("fixed"):
            opts = ", ".join(sorted(extra | ({"fixed"} if rd.get("fixed") else set())))
            raise Refused(rel_full, "relative_positional_encoding", f"option {opts} not supported")
        c = rd.get("clipping", 16)
        if not isinstance(c, int) or isinstance(c, bool) or c < 0:
            raise Refused(rel_full, "relative_positional_encoding", f"clipping {c!r} (an int >= 0)")
        own = self._source(rd, scope, rel_full)
        if [x for x in own.dims if self.dims.is_dynamic(x)] != [time]:
            raise Refused(rel_full, "relative_positional_encoding", "of an input over the attention's time dim")
        if self.dims.find(self._out_dim(rel, rd, rel_full)) != self.dims.find(key):
            raise Refused(full, "self_attention", f"key_shift {rel!r}: n_out not the heads' key dim")
        rel_var = scope.names[rel]
        positions = new_dim(self, 2 * c + 1, f"{identifier(rel)}_positions", {key, time, kv_time})
        self.imports |= {"Linear", "cast", "expand", "maximum", "minimum", "range_over"}
        dist = self.fresh(f"{rel_var}_dist")
        diff = binop(
            "-",
            call("expand", call("range_over", self.dim(kv_time)), self.dim(time)),
            call("range_over", self.dim(time)),
        )
        comment = f"layer {rel!r} (relative_positional_encoding): key position - query position, clipped"
        emit([dist], call("minimum", call("maximum", diff, num(-c)), num(c)), comment)
        row = (
            binop("-", call("range_over", self.dim(positions)), num(c))
            if c
            else call("range_over", self.dim(positions))
        )
        hit = compare("==", call("expand", name(dist), self.dim(positions)), row)
        table = call("Linear", self.dim(key), with_bias=literal(False))
        ref = ModuleRef("linear", self._tf_prefix(rel, rd, scope), {"W": "encoding_matrix"})
        self.used.add(rel_var)
        emit(
            [rel_var], call(table, call("cast", hit, literal("float32"))), "its table: RETURNN's `encoding_matrix`", ref
        )
        return rel_var

    def _attend(
        self, emit, var: str, d: dict, hd: _Heads, q: str, k: str, v: str, over, causal=None, shift=None
    ) -> str:
        """All heads at once: `softmax(dot(q · (K/H)^-0.5, k), axis=over)` (`causal`: where it
        holds, else no weight; `shift`: RETURNN's `key_shift`, plus `dot(q · (K/H)^-0.5, shift)`),
        its dropout, the values weighted by it: the name of that [..., heads, value]."""
        scale = num((hd.total_key // hd.heads) ** -0.5)
        energy = call("dot", binop("*", name(q), scale), name(k), reduce=self.dim(hd.key))
        if shift is not None:
            energy = binop("+", energy, call("dot", binop("*", name(q), scale), name(shift), reduce=self.dim(hd.key)))
        if causal is not None:
            energy = call("where", name(causal), energy, num(-1e30))  # exp gives 0, as of RETURNN's -inf
        w = call("softmax", energy, axis=self.dim(over))
        p = d.get("attention_dropout", 0.0)
        if p:
            self.imports.add("dropout")
            w = call("dropout", w, num(float(p)))
        weights = self.fresh(f"{var}_w")
        emit([weights], w)
        out = self.fresh(f"{var}_o")
        emit([out], call("dot", name(weights), name(v), reduce=self.dim(over)))
        return out

    def _self_attention_step(self, layer, d, scope, var, full) -> Val:
        """In a rec unit (RETURNN requires `attention_left_only` there): this step's query over the
        keys and values of the steps so far, this one's last. Per head the keys and values are
        states grown by `cum_concat` along a dim of the layer's own (`<layer>_hist`, RETURNN's
        `k_left`/`v_left`), from `empty` before the loop; the rest as outside a loop."""
        from netc.importer.masked import loop_scope

        if not d.get("attention_left_only"):
            raise Refused(full, "self_attention", "in a rec unit RETURNN requires attention_left_only")
        if d.get("key_shift") is not None:
            raise Refused(full, "self_attention", "key_shift in a rec unit not supported")
        if getattr(self, "_masks", None):
            raise Refused(full, "self_attention", "under a masked_computation not supported")
        src = self._source(d, scope, full)
        if tuple(src.dims) != (BATCH, feature(src, self.dims)) or src.is_list:
            raise Refused(full, "self_attention", "of a [batch, feature] frame in a rec unit")
        hd = self._heads(layer, d, full)
        hist = self.dims.fresh(f"{identifier(layer)}_hist", None)
        self.imports |= {"Linear", "split", "split_dims", "merge_dims", "softmax", "dot", "empty", "cum_concat"}
        loop = loop_scope(scope)

        def emit(targets: list[str], value, comment=None, module=None):
            scope.stmts.append(Assign(targets, value, comment=comment, module=module))

        k, v = self.fresh(f"{var}_k"), self.fresh(f"{var}_v")
        for state, dim in ((k, hd.key), (v, hd.val_dim)):
            empty = call("empty", name("batch"), self.dim(hist), self.dim(hd.heads_dim), self.dim(dim))
            loop.outer.stmts.append(Assign([state], empty, comment="no steps yet"))
        n = self._qkv(emit, layer, d, scope, var, hd, src)
        q, k_new, v_new = self.fresh(f"{var}_q"), self.fresh(f"{var}_k_t"), self.fresh(f"{var}_v_t")
        emit([q, k_new, v_new], self._split_qkv(name(n), hd))
        emit([k], call("cum_concat", name(k), name(k_new), axis=self.dim(hist)), "the steps so far, this one last")
        emit([v], call("cum_concat", name(v), name(v_new), axis=self.dim(hist)))
        o = self._attend(emit, var, d, hd, q, k, v, hist)
        self._emit(scope, var, call("merge_dims", name(o), dims=hd.merged(self), out_dim=self.dim(hd.out)), layer)
        return Val(name(var), (BATCH, hd.out))
