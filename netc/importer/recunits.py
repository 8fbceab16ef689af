"""RETURNN's recurrent layers: a `rec` layer with an LSTM unit (over a sequence: netc's `Lstm`, in a
rec unit: one step written out), with a subnetwork unit (a loop: `loops`, a decoder: `decoders`),
an `rnn_cell` (netc's `LstmCell`), and their units' options (`unit_opts`).

RETURNN maps a `rec` layer's units `lstm`, `lstmp`, `LSTMBlock(Fused)` (TensorFlow 2) to NativeLSTM2,
and an `rnn_cell`'s `LSTMBlock`, `BasicLSTM` and `StandardLSTM` to TF's `LSTMCell`
(`RecLayer.get_rnn_cell_class`); an `rnn_cell`'s `lstm` is NativeLSTM2's step, which netc's
`LstmCell` is not."""

from __future__ import annotations

from netc.importer import cells
from netc.importer.dims import BATCH
from netc.importer.masked import loop_scope
from netc.importer.syntax import call, name, num, tuple_
from netc.importer.values import Refused, Scope, Val, feature
from netc.importer.writer import Assign, ModuleRef

# a `rec` layer's units that are NativeLSTM2, and the NativeLSTM (v1) unit
LSTM_UNITS = {"nativelstm2", "lstm", "lstmp", "lstmblock", "lstmblockfused", "nativelstm"}
NATIVE2_UNITS = LSTM_UNITS - {"nativelstm"}  # take NativeLstm2's `unit_opts`
CELL_UNITS = {"lstmblock", "standardlstm", "basiclstm"}  # an `rnn_cell`'s units that are TF's LSTMCell
# `unit_opts` of NativeLSTM2 that RETURNN applies in training only: dropped with a note
NATIVE2_TRAINING_ONLY = {
    "rec_weight_dropout": "dropout on the LSTM's recurrent weights in training",
    "rec_weight_dropout_shape": "the shape of that dropout's mask",
}
UNIT_TRAINING_ONLY = {**NATIVE2_TRAINING_ONLY, **cells.TRAINING_ONLY}  # by unit_opts key, for the notes
# options of RETURNN's search only (training computes the same): dropped with a note
SEARCH_ONLY = {"cheating"}
# notes about options by key (`self.option_notes`): (verb, what it means)
OPTION_NOTES = {
    "cheating": (
        "dropped on",
        "RETURNN's search keeps the true label in the beam (a search that knows the labels; training computes the same)",
    ),
    "search": (
        "of",
        "False (its value as the config loads, for training): RETURNN's `choice` then takes the target, as netc's "
        "training does; netc's search searches it",
    ),
    "zoneout": (
        "of",
        "each state is (1 - z) * new + z * previous, RETURNN's form outside training, also in training (RETURNN keeps "
        "each unit's previous value at random there, with probability z)",
    ),
}
_REC_INIT = {"forward_weights_init", "recurrent_weights_init", "bias_init"}  # parameters' initialisers
KNOWN = {
    "choice": {"target", "beam_size", "length_normalization", "input_type", "cheating", "search", "prob_scale"},
    "rnn_cell": {"unit", "n_out", "out_dim", "unit_opts", "weights_init", "dropout"},  # dropout: of its input
    "rec": {
        "unit",
        "unit_opts",
        "n_out",
        "out_dim",
        "direction",
        "dropout",
        "axis",
        "max_seq_len",
        "target",
        "size_target",
        "optimize_move_layers_out",
        "include_eos",
        "initial_state",
        "cheating",
    }
    | _REC_INIT,
}


class RecUnits(cells.WrittenCells):
    """Mixed into `Importer` (netc.importer.layers)."""

    def _search_only(self, d: dict, full: str) -> None:
        for opt in SEARCH_ONLY:
            if d.get(opt) not in (None, False):
                self.option_notes.setdefault(opt, []).append(full)

    def _unit_opts(self, d: dict, full: str, cls: str, unit: str, takes: dict[str, object]) -> None:
        """`unit_opts` of `unit`: each at the value `takes` gives (RETURNN's default, what netc
        computes), or training-only (dropped with a note); others refused, naming them."""
        opts = d.get("unit_opts")
        if opts is None:
            return
        if not isinstance(opts, dict):
            raise Refused(full, cls, f"unit_opts {opts!r} (a dict of the unit's options)")
        bad = []
        for k, v in opts.items():
            if k in NATIVE2_TRAINING_ONLY and unit in NATIVE2_UNITS:
                self.dropped.setdefault(f"unit_opts.{k}", []).append(full)
            elif k not in takes or v != takes[k] or isinstance(v, bool) != isinstance(takes[k], bool):
                bad.append(f"{k}: {v!r}")
        if bad:
            raise Refused(full, cls, f"unit_opts {{{', '.join(bad)}}} of unit {unit!r} not supported")

    def _cell_state_vars(self, layer: str, scope: Scope) -> tuple[str, str]:
        """The variables of an LSTM cell's states h and c in a rec unit (h: the layer's own, or with
        zoneout one of its own), made once: `get_last_hidden_state` of `prev:<cell>` may name them first."""
        key = self._full(layer, scope)
        made = self.__dict__.setdefault("_cell_states", {})
        if key not in made:
            var, d = scope.names[layer], scope.layers[layer]
            zoned = str(d.get("unit", "")).lower() == cells.ZONEOUT_UNIT
            made[key] = (self.fresh(f"{var}_h") if zoned else var, self.fresh(f"{var}_c"))
        return made[key]

    def _is_cell(self, layer: str, scope: Scope) -> bool:
        """An LSTM cell whose states `_cell_state_vars` names: an `rnn_cell` or a written cell's step."""
        d = scope.layers.get(layer)
        if not isinstance(d, dict) or scope.rec is None:
            return False
        unit = str(d.get("unit", "")).lower()
        return (d.get("class") == "rnn_cell" and unit in CELL_UNITS | set(cells.UNITS)) or (
            d.get("class") == "rec" and unit in cells.UNITS
        )

    def _l_rnn_cell(self, layer, d, scope, var, full) -> Val:
        unit = str(d.get("unit", "")).lower()
        if unit in cells.UNITS and scope.rec is not None:
            return self._written_cell(layer, d, scope, var, full, "rnn_cell", unit)
        if scope.rec is None or unit not in CELL_UNITS:
            raise Refused(
                full,
                "rnn_cell",
                f"unit {d.get('unit')!r} (LSTMBlock, StandardLSTM, LayerNormVariantsLSTM, ZoneoutLSTM in a rec unit are supported)",
            )
        forget = (d.get("unit_opts") or {}).get("forget_bias", 1.0) if isinstance(d.get("unit_opts"), dict) else 1.0
        if isinstance(forget, (int, float)) and not isinstance(forget, bool) and forget != 1.0:
            # TF's LSTMCell with another forget bias (fused LMs set 0.0): its step written out
            return self._written_cell(layer, d, scope, var, full, "rnn_cell", unit)
        self._unit_opts(d, full, "rnn_cell", unit, {"forget_bias": 1.0})
        if getattr(self, "_masks", None):
            raise Refused(
                full,
                "rnn_cell",
                "an `rnn_cell` under masked_computation (its state is the cell's own; a `rec` LSTM unit's is the loop's)",
            )
        src = self._source(d, scope, full)
        out = self._out_dim(layer, d, full)
        h, c = self._cell_state_vars(layer, scope)
        for state in (h, c):  # before the loop (also for a cell in a subnetwork of the unit)
            loop_scope(scope).outer.stmts.append(
                Assign([state], call("zeros", name("batch"), self.dim(out)), comment="initial state")
            )
        self.imports |= {"LstmCell", "zeros"}
        value = call(call("LstmCell", self.dim(out)), src.tensor(), tuple_(name(h), name(c)))
        comment = f"layer {layer!r}" if layer != var else None
        scope.stmts.append(
            Assign(
                [h, c], value, comment=comment, module=ModuleRef("lstm_cell", self._tf_prefix(layer, d, scope, "/rec"))
            )
        )
        scope.states.setdefault(layer, Val(name(h), (BATCH, out)))
        return Val(name(h), (BATCH, out))

    def _l_rec(self, layer, d, scope, var, full) -> Val:
        unit = d.get("unit")
        self._search_only(d, full)
        if isinstance(unit, str) and unit.lower() in LSTM_UNITS:
            # NativeLSTM2 asserts forget_bias 0 (no forget bias); NativeLSTM (v1) takes no options
            self._unit_opts(d, full, "rec", unit.lower(), {"forget_bias": 0.0} if unit.lower() != "nativelstm" else {})
            if d.get("size_target") is not None:
                raise Refused(full, "rec", "size_target on an LSTM unit (its length is its input's)")
            return self._lstm(layer, d, scope, var, full)
        if isinstance(unit, str) and unit.lower() in cells.UNITS:
            if d.get("size_target") is not None:
                raise Refused(full, "rec", "size_target on an LSTM unit (its length is its input's)")
            return self._written_cell(layer, d, scope, var, full, "rec", unit.lower())
        if isinstance(unit, dict):
            if d.get("unit_opts"):
                raise Refused(full, "rec", "unit_opts of a subnetwork unit")
            return self._loop(layer, d, scope, var, full, unit)
        raise Refused(
            full, "rec", f"unit {unit!r} not supported (nativelstm2, lstm, layernormvariantslstm or a subnetwork are)"
        )

    def _lstm(self, layer, d, scope, var, full) -> Val:
        if scope.rec is not None:
            return self._lstm_step(layer, d, scope, var, full)
        src = self._source(d, scope, full)
        out = self._out_dim(layer, d, full)
        direction = d.get("direction", 1)
        if direction not in (1, -1) or src.sparse is not None:
            raise Refused(full, "rec", "direction other than 1/-1, or labels as input")
        if (init := d.get("initial_state")) not in (None, 0, 0.0, "zeros"):
            why = "of one in a rec unit it is supported"
            if init in ("keep_over_epoch", "keep_over_epoch_no_init"):  # a TF variable RETURNN assigns after each batch
                why = "the state the previous batch ended in: netc's models keep no state from one run to the next"
            raise Refused(full, "rec", f"initial_state {init!r} of an LSTM over a sequence ({why})")
        if self._reads_last_state(layer, scope):
            return self._lstm_loop(layer, d, scope, var, full, src, out)
        self.imports.add("Lstm")
        args = {"direction": num(-1)} if direction == -1 else {}
        feat = feature(src, self.dims)
        self._emit(
            scope,
            var,
            call(call("Lstm", self.dim(out), **args), src.tensor()),
            layer,
            ModuleRef("lstm", self._tf_prefix(layer, d, scope, "/rec")),
        )
        return Val(name(var), (*(x for x in src.dims if x != feat), out))

    def _loop(self, layer, d, scope: Scope, var, full, unit: dict) -> Val:
        from netc.importer.loops import import_loop

        if d.get("initial_state") is not None:
            raise Refused(full, "rec", "initial_state of a rec layer with a subnetwork unit (use `initial_output`)")
        return import_loop(self, layer, d, scope, var, full, unit)
