"""RETURNN's LSTM cells that netc has no op for, written out step by step with netc's `Linear`,
`LayerNorm` and elementwise ops, with their variables' names: `LayerNormVariantsLSTM` and
`ZoneoutLSTM` (as a `rec` unit over a sequence: a loop over its frames, `reversed` for direction
-1, each sequence from its own last frame as RETURNN reverses it, appending the output; as a `rec`
or `rnn_cell` in a rec unit: one step, its states the loop's).

LayerNormVariantsLSTM (`LayerNormVariantsLSTMCell`; its epsilon 1e-12):

    ff = Linear(gates, with_bias=False)(x_t)            # W_ff (a bias `bias_ff` without any norm)
    ff = LayerNorm(eps=1e-12)(ff)                       # global_norm: gamma_/beta_input_below
    re = Linear(gates, with_bias=False)(h)              # W_re
    re = LayerNorm(eps=1e-12, with_bias=False)(re)      # global_norm: gamma_state_below
    i, j, f, o = split(ff + re, [out] * 4)              # (global_norm_joined: a norm of the sum)
    c = sigmoid(f) * c + sigmoid(i) * tanh(j)           # (per_gate_norm: each gate normed first)
    c = LayerNorm(eps=1e-12)(c)                         # cell_norm: gamma_/beta_new_c
    h = sigmoid(o) * tanh(c)                            # (hidden_norm: gamma_/beta_new_h)

ZoneoutLSTM (`ZoneoutLSTMCell`: TF's LSTMCell, `lstm_cell/kernel` and `lstm_cell/bias`, then each
state kept in part, by its factor z, as RETURNN computes it outside training):

    i, j, f, o = split(Linear(gates)(concat(x_t, h)), [out] * 4)
    c_new = sigmoid(f + 1.0) * c + sigmoid(i) * tanh(j)
    h_new = sigmoid(o) * tanh(c_new)
    c = (1 - z_c) * c_new + z_c * c
    h = (1 - z_h) * h_new + z_h * h                     # the output: h (behavior_version >= 17), else h_new
"""

from __future__ import annotations

import libcst as cst

from netc.importer.dims import BATCH
from netc.importer.masked import loop_scope
from netc.importer.syntax import Expr, binop, call, identifier, literal, name, num
from netc.importer.values import Refused, Scope, Val, feature, sources
from netc.importer.writer import Append, Assign, Loop, ModuleRef

LN_UNIT, ZONEOUT_UNIT = "layernormvariantslstm", "zoneoutlstm"
UNITS = (LN_UNIT, ZONEOUT_UNIT)
# LayerNormVariantsLSTM's options whose value changes what it computes, at its defaults
COMPUTES = {
    "with_concat": False,
    "global_norm": True,
    "global_norm_joined": False,
    "per_gate_norm": False,
    "cell_norm": True,
    "cell_norm_in_output": True,
    "hidden_norm": False,
    "variance_epsilon": 1e-12,
}
INIT = {"norm_gain", "norm_shift", "forget_bias"}  # the initial values of its parameters only
ZONEOUT = {"zoneout_factor_cell": 0.0, "zoneout_factor_output": 0.0}
TRAINING_ONLY = {  # applied by the cells in training only: dropped with a note
    "dropout": "dropout on the LSTM cell's input activation in training",
    "dropout_h": "dropout on the LSTM's previous hidden state in training",
    "dropout_seed": "the seed of that dropout",
}
TF_LSTM_FORGET_BIAS = 1.0  # TF's LSTMCell's, added to the forget gate (ZoneoutLSTM's cell)


class WrittenCells:
    """Mixed into `Importer` (netc.importer.layers)."""

    def _cell_opts(self, d: dict, full: str, cls: str, unit: str) -> dict:
        """The unit's options as the step reads them (RETURNN's defaults where not given)."""
        opts = d.get("unit_opts") or {}
        if not isinstance(opts, dict):
            raise Refused(full, cls, f"unit_opts {opts!r} (a dict of the unit's options)")
        if unit not in UNITS:  # TF's LSTMCell (an `rnn_cell`'s LSTMBlock): only its forget bias
            takes: dict = {"forget_bias": 1.0}
        elif unit == LN_UNIT:
            takes = dict(COMPUTES)
        else:
            takes = {**ZONEOUT, "use_zoneout_output": self.cfg.behavior_version >= 17}
        out = dict(takes)
        for k, v in opts.items():
            if unit == LN_UNIT and k in TRAINING_ONLY:
                if v not in (None, 0, 0.0) or k == "dropout_seed":
                    self.dropped.setdefault(f"unit_opts.{k}", []).append(full)
            elif unit == LN_UNIT and k in INIT:
                continue
            elif k in takes and (type(v) is type(takes[k]) or isinstance(takes[k], float) and isinstance(v, int)):
                out[k] = v
            else:
                raise Refused(full, cls, f"unit_opts {{{k}: {v!r}}} of unit {unit!r} not supported")
        if unit not in UNITS:  # no zoneout: the step is the LSTMCell's
            return {**ZONEOUT, "use_zoneout_output": False, "forget_bias": float(out["forget_bias"])}
        if unit == ZONEOUT_UNIT:
            if not all(0.0 <= out[k] <= 1.0 for k in ZONEOUT):  # RETURNN's ValueError
                raise Refused(full, cls, "zoneout factors outside [0, 1] (RETURNN rejects them too)")
            if any(out[k] for k in ZONEOUT):
                self.option_notes.setdefault("zoneout", []).append(full)
            return out
        if out["with_concat"] and out["global_norm"]:  # RETURNN asserts these apart
            raise Refused(full, cls, "unit_opts with_concat and global_norm together (RETURNN rejects them too)")
        if sum(bool(out[k]) for k in ("global_norm", "global_norm_joined", "per_gate_norm")) > 1:
            raise Refused(
                full, cls, "unit_opts: two of global_norm, global_norm_joined, per_gate_norm (RETURNN rejects them too)"
            )
        return out

    def _written_cell(self, layer: str, d: dict, scope: Scope, var: str, full: str, cls: str, unit: str) -> Val:
        """The unit over a sequence (a loop over its frames) or one step in a rec unit."""
        opts = self._cell_opts(d, full, cls, unit)
        if d.get("initial_state") not in (None, 0, 0.0, "zeros"):
            raise Refused(full, cls, f"initial_state of a {unit!r} unit")
        if getattr(self, "_masks", None):
            raise Refused(full, cls, f"a {unit!r} unit under masked_computation")
        src = self._source(d, scope, full)
        out = self._out_dim(layer, d, full)
        prefix = self._tf_prefix(layer, d, scope, "/rec")
        step = self._ln_lstm_step if unit == LN_UNIT else self._zoneout_step
        if scope.rec is not None:  # one step of the rec unit's loop
            if d.get("direction", 1) != 1 or src.sparse is not None or src.is_list:
                raise Refused(full, cls, "a step in a rec unit of direction 1 over a dense frame is supported")
            h, c = self._cell_state_vars(layer, scope)
            loop = loop_scope(scope)
            for state in dict.fromkeys((var, h, c)):
                loop.outer.stmts.append(
                    Assign([state], call("zeros", name("batch"), self.dim(out)), comment="initial state")
                )
            step(layer, scope, h, c, src, out, prefix, opts, var)
            scope.states.setdefault(layer, Val(name(var), (BATCH, out)))
            return Val(name(var), (BATCH, out))
        direction = d.get("direction", 1)
        dyn = [x for x in src.dims if self.dims.is_dynamic(x)]
        if direction not in (1, -1) or src.sparse is not None or len(dyn) != 1:
            raise Refused(full, cls, "direction 1 or -1 over one sequence of vectors is supported")
        time = dyn[0]
        own = identifier(sources(d)[0]) if len(sources(d)) == 1 and isinstance(src.expr, cst.Name) else var
        frame = Val(name(self.fresh(f"{own}_t")), tuple(x for x in src.dims if x != time))
        inner = Scope({layer: d}, {layer: var}, [], scope.prefix, outer=scope, rec=layer, frame=frame, time=time)
        h, c = self.fresh(f"{var}_h"), self.fresh(f"{var}_c")
        output = self.fresh(f"{var}_out") if unit == ZONEOUT_UNIT else h
        for state in (h, c):
            scope.stmts.append(Assign([state], call("zeros", name("batch"), self.dim(out)), comment="initial state"))
        scope.stmts.append(Assign([var], cst.List([])))
        step(layer, inner, h, c, frame, out, prefix, opts, output)
        inner.stmts.append(Append(var, name(output)))
        seq = src.expr if isinstance(src.expr, cst.Name) and not src.is_list else src.tensor()
        if direction == -1:
            seq = call("reversed", seq)
        comment = f"layer {layer!r}: a {unit} unit, step by step" + (" (backwards)" if direction == -1 else "")
        scope.stmts.append(Loop([frame.expr.value], seq, inner.stmts, comment=comment))
        return Val(name(var), (*(x for x in src.dims if x != feature(src, self.dims)), out), is_list=True)

    def _zoneout_step(
        self, layer: str, scope: Scope, h: str, c: str, src: Val, out: str, prefix: str, opts: dict, output: str
    ) -> None:
        """ZoneoutLSTM's step: TF's LSTMCell (forget bias 1.0), then each state mixed with its previous
        value by its zoneout factor; `output` gets h (with `use_zoneout_output`) or the cell's own h."""
        size = self.dims.size(out)
        gates = self.dims.static(4 * size, f"{identifier(layer)}_gates")
        self.imports |= {"Linear", "split", "sigmoid", "tanh", "zeros", "concat"}
        stem = output if output != h else h
        parts = [self.fresh(f"{stem}_{g}") for g in ("z", "i", "j", "f", "o")]
        z = parts[0]
        names = {"W": "lstm_cell/kernel", "b": "lstm_cell/bias"}
        bias = opts.get("forget_bias", TF_LSTM_FORGET_BIAS)
        what = f"LSTMCell step (forget bias {bias}" if "forget_bias" in opts else f"{ZONEOUT_UNIT} step (TF's LSTMCell"
        comment = f"layer {layer!r}: one {what}: gates i, j, f, o)"
        value = call(call("Linear", self.dim(gates)), call("concat", src.tensor(), name(h)))
        scope.stmts.append(Assign([z], value, comment=comment, module=ModuleRef("linear", prefix, names)))
        scope.stmts.append(Assign(parts[1:], call("split", name(z), cst.List([cst.Element(self.dim(out))] * 4))))
        i, j, f, o = (name(p) for p in parts[1:])
        forget = call("sigmoid", binop("+", f, num(bias)) if bias else f)
        plain = "forget_bias" in opts  # TF's LSTMCell itself: the new states are the states
        c_new, h_new = (c, h) if plain else (self.fresh(f"{stem}_c_new"), self.fresh(f"{stem}_h_new"))
        scope.stmts.append(
            Assign([c_new], binop("+", binop("*", forget, name(c)), binop("*", call("sigmoid", i), call("tanh", j))))
        )
        scope.stmts.append(Assign([h_new], binop("*", call("sigmoid", o), call("tanh", name(c_new)))))
        if plain:
            return

        def mix(new: str, old: str, factor: float):
            if not factor:
                return name(new)
            return binop("+", binop("*", num(1.0 - factor), name(new)), binop("*", num(float(factor)), name(old)))

        scope.stmts.append(Assign([c], mix(c_new, c, opts["zoneout_factor_cell"]), comment="zoneout"))
        scope.stmts.append(Assign([h], mix(h_new, h, opts["zoneout_factor_output"])))
        if output != h:
            scope.stmts.append(Assign([output], name(h if opts["use_zoneout_output"] else h_new)))

    def _ln_lstm_step(
        self, layer: str, scope: Scope, h: str, c: str, src: Val, out: str, prefix: str, opts: dict, output: str
    ) -> None:
        """The cell's step on the frame `src`: its states `h` and `c` (set before the loop)."""
        size = self.dims.size(out)
        gates = self.dims.static(4 * size, f"{identifier(layer)}_gates")
        eps = num(float(opts["variance_epsilon"]))
        self.imports |= {"Linear", "LayerNorm", "split", "sigmoid", "tanh", "zeros"}
        first = [f"layer {layer!r}: one {LN_UNIT} step (gates i, j, f, o)"]

        def emit(stem: str, value: Expr, module: ModuleRef | None = None) -> Expr:
            v = self.fresh(f"{h}_{stem}")
            scope.stmts.append(Assign([v], value, comment=first.pop() if first else None, module=module))
            return name(v)

        def linear(x: Expr, stem: str, w: str, bias: bool) -> Expr:
            lin = call("Linear", self.dim(gates), with_bias=literal(bias))
            return emit(stem, call(lin, x), ModuleRef("linear", prefix, {"W": f"W_{w}", "b": f"bias_{w}"}))

        def norm(x: Expr, what: str, bias: bool = True) -> Expr:
            ln = call("LayerNorm", eps=eps) if bias else call("LayerNorm", eps=eps, with_bias=literal(False))
            names = {"scale": f"gamma_{what}", "bias": f"beta_{what}"}
            return emit(f"{what}_norm", call(ln, x), ModuleRef("layer_norm", prefix, names))

        per_gate, joined = opts["per_gate_norm"], opts["global_norm_joined"]
        if opts["with_concat"]:
            self.imports.add("concat")
            z = linear(call("concat", src.tensor(), name(h)), "ff_re", "ff_re", not per_gate and not joined)
        else:
            ff = linear(src.tensor(), "ff", "ff", not opts["global_norm"] and not joined and not per_gate)
            if opts["global_norm"]:
                ff = norm(ff, "input_below")
            re = linear(name(h), "re", "re", False)
            if opts["global_norm"]:
                re = norm(re, "state_below", bias=False)
            z = emit("in", binop("+", ff, re))
        if joined:
            z = norm(z, "lstm_in")
        parts = [self.fresh(f"{h}_{g}") for g in ("i", "j", "f", "o")]
        scope.stmts.append(Assign(parts, call("split", z, cst.List([cst.Element(self.dim(out))] * 4))))
        i, j, f, o = (name(p) for p in parts)
        if per_gate:
            i, j, f, o = (norm(g, f"{k}_gate") for g, k in zip((i, j, f, o), "ijfo"))
        new_c = binop("+", binop("*", call("sigmoid", f), name(c)), binop("*", call("sigmoid", i), call("tanh", j)))
        if opts["cell_norm"]:
            raw = emit("c_raw", new_c)
            normed = norm(raw, "new_c")
            scope.stmts.append(Assign([c], normed))
            c_out = name(c) if opts["cell_norm_in_output"] else raw
        else:
            scope.stmts.append(Assign([c], new_c))
            c_out = name(c)
        new_h = binop("*", call("sigmoid", o), call("tanh", c_out))
        if opts["hidden_norm"]:
            new_h = norm(emit("h_raw", new_h), "new_h")
        scope.stmts.append(Assign([h], new_h))
