"""`get_last_hidden_state` of an LSTM layer: each sequence's last state (h, c).

netc's `Lstm` gives only the outputs, so an LSTM layer whose last state a network reads is
written as a loop over its input, one NativeLSTM2 step per frame (the step a `rec` LSTM unit in
a rec unit gets, the same parameters `W`, `W_re`, `b`), its outputs stacked into the layer's
list; after the loop its states `h` and `c` are each sequence's last step's (netc's values
after a loop):

    input = []
    input_h = zeros(batch, input_dim)
    input_c = zeros(batch, input_dim)
    for data_t in data:
        ...  # the step: input_c, input_h
        input.append(input_h)
    input_last = concat(input_c, input_h)  # key "*": RETURNN's LSTMStateTuple (c, h) concatenated
"""

from __future__ import annotations

import libcst as cst

from netc.importer.dims import BATCH
from netc.importer.syntax import call, identifier, name
from netc.importer.values import PREV, Refused, Scope, Val, feature, sources
from netc.importer.writer import Append, Assign, Loop

KNOWN = {"get_last_hidden_state": {"n_out", "out_dim", "key", "combine"}}
KEYS = ("*", "c", "h")


class LastStateLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _reads_last_state(self, layer: str, scope: Scope) -> bool:
        """Whether a `get_last_hidden_state` of the same network reads `layer`."""
        return any(
            isinstance(ld, dict) and ld.get("class") == "get_last_hidden_state" and layer in sources(ld)
            for ld in scope.layers.values()
        )

    def _lstm_loop(self, layer: str, d: dict, scope: Scope, var: str, full: str, src: Val, out: str) -> Val:
        """The LSTM layer as a loop of NativeLSTM2 steps (its last states are read)."""
        if d.get("direction", 1) != 1:
            raise Refused(full, "rec", "get_last_hidden_state of an LSTM of direction -1 is not supported")
        dyn = [x for x in src.dims if self.dims.is_dynamic(x)]
        if src.sparse is not None or len(dyn) != 1:
            raise Refused(full, "rec", "an LSTM whose last state is read needs one sequence of vectors as input")
        time = dyn[0]
        own = identifier(sources(d)[0]) if len(sources(d)) == 1 and isinstance(src.expr, cst.Name) else var
        frame = Val(name(self.fresh(f"{own}_t")), tuple(x for x in src.dims if x != time))
        inner = Scope({layer: d}, {layer: var}, [], scope.prefix, outer=scope, rec=layer, frame=frame, time=time)
        h, c = self.fresh(f"{var}_h"), self.fresh(f"{var}_c")
        scope.stmts.append(Assign([var], cst.List([])))
        self._lstm_cell_step(layer, inner, h, c, frame, out, self._tf_prefix(layer, d, scope, "/rec"), {}, var)
        inner.stmts.append(Append(var, name(h)))
        seq = src.expr if isinstance(src.expr, cst.Name) and not src.is_list else src.tensor()
        comment = f"layer {layer!r}: an LSTM, step by step (its last state is read)"
        scope.stmts.append(Loop([frame.expr.value], seq, inner.stmts, comment=comment))
        self.last_states[self._full(layer, scope)] = (h, c, out)
        return Val(name(var), (*(x for x in src.dims if x != feature(src, self.dims)), out), is_list=True)

    def _cell_last_state(self, layer: str, d: dict, scope: Scope, var: str, full: str) -> Val:
        """In a rec unit: the state of an LSTM cell of the unit, after this step (`x`) or the previous
        one (`prev:x`): its states' variables (`prev:` of them)."""
        srcs = sources(d)
        src = srcs[0] if len(srcs) == 1 and isinstance(srcs[0], str) else None
        cell = src[5:] if src and src.startswith("prev:") else src
        if cell is None or not self._is_cell(cell, scope):
            raise Refused(
                full, "get_last_hidden_state", "in a rec unit: only of an LSTM cell of the unit (`x`, `prev:x`)"
            )
        key = d.get("key", "*")
        if key not in KEYS:
            raise Refused(full, "get_last_hidden_state", f"key {key!r} not supported (`*`, `c`, `h` are)")
        h_val = self.get(src, scope)  # the cell (a state where `prev:`)
        h, c = self._cell_state_vars(cell, scope)
        dim = feature(h_val, self.dims)
        if src.startswith("prev:"):
            h, c = PREV + h, PREV + c
        return self._state_of(layer, d, scope, var, full, (h, c, dim), "the cell's state", size_given=False)

    def _l_get_last_hidden_state(self, layer, d, scope, var, full) -> Val:
        """The LSTM's last state: `c`, `h`, or `*` both concatenated as RETURNN's state tuple
        (c, h) is; one source (`combine` joins several)."""
        srcs = sources(d)
        if scope.rec is not None:
            return self._cell_last_state(layer, d, scope, var, full)
        if len(srcs) != 1:
            raise Refused(full, "get_last_hidden_state", "of several layers (`combine`) not supported, of one is")
        src_d = scope.layers.get(srcs[0])
        unit = src_d.get("unit") if isinstance(src_d, dict) and src_d.get("class") == "rec" else None
        if not isinstance(unit, str) or unit.lower() not in ("nativelstm2", "lstm"):
            raise Refused(full, "get_last_hidden_state", f"of `{srcs[0]}`: only of a `rec` LSTM layer (nativelstm2)")
        key = d.get("key", "*")
        if key not in KEYS:
            raise Refused(full, "get_last_hidden_state", f"key {key!r} not supported (`*`, `c`, `h` are)")
        self.get(srcs[0], scope)
        state = self.last_states[self._full(srcs[0], scope)]
        return self._state_of(layer, d, scope, var, full, state, "the last state", size_given=True)

    def _state_of(
        self, layer: str, d: dict, scope: Scope, var: str, full: str, state: tuple, what: str, size_given: bool
    ) -> Val:
        """`var` = the state `key` picks of `state` (h, c, their dim): `c`, `h`, or `*` both
        concatenated as RETURNN's state tuple (c, h) is; checked against the layer's `n_out` /
        `out_dim` (`size_given`: the layer must give one)."""
        h, c, dim = state
        key = d.get("key", "*")
        if key == "*":
            self.imports.add("concat")
            value, out = call("concat", name(c), name(h)), self.dims.derived([dim, dim])
        else:
            value, out = name(h if key == "h" else c), dim
        want = d["out_dim"]["__dim__"] if isinstance(d.get("out_dim"), dict) else None
        size = self.dims.size(self.dims.tag(want)) if want is not None else d.get("n_out")
        if (size_given or size is not None) and size != self.dims.size(out):
            raise Refused(full, "get_last_hidden_state", f"n_out {size!r}: the state {key!r} has {self.dims.size(out)}")
        comment = f"layer {layer!r}: {what}" + (" (c, h)" if key == "*" else f" {key}")
        scope.stmts.append(Assign([var], value, comment=comment))
        return Val(name(var), (BATCH, out))
