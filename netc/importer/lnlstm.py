"""RETURNN's `LayerNormVariantsLSTM` unit (`rec` over a sequence, `rec` or `rnn_cell` in a rec unit),
written out step by step with netc's `Linear` and `LayerNorm` (its epsilon, 1e-12 by default):

    ff = Linear(gates, with_bias=False)(x_t)            # W_ff (a bias `bias_ff` without any norm)
    ff = LayerNorm(eps=1e-12)(ff)                       # global_norm: gamma_/beta_input_below
    re = Linear(gates, with_bias=False)(h)              # W_re
    re = LayerNorm(eps=1e-12, with_bias=False)(re)      # global_norm: gamma_state_below
    i, j, f, o = split(ff + re, [out] * 4)              # (global_norm_joined: a norm of the sum)
    c = sigmoid(f) * c + sigmoid(i) * tanh(j)           # (per_gate_norm: each gate normed first)
    c = LayerNorm(eps=1e-12)(c)                         # cell_norm: gamma_/beta_new_c
    h = sigmoid(o) * tanh(c)                            # (hidden_norm: gamma_/beta_new_h)

as `LayerNormVariantsLSTMCell` computes it (returnn.tf.layers.rec), with its variables' names
(`<layer>/rec/W_ff`, ...). Over a sequence it is a loop over the frames (`reversed` for direction
-1: each sequence from its own last frame, as RETURNN reverses each sequence), appending `h`."""

from __future__ import annotations

import libcst as cst

from netc.importer.dims import BATCH
from netc.importer.masked import loop_scope
from netc.importer.syntax import Expr, binop, call, identifier, literal, name, num
from netc.importer.values import Refused, Scope, Val, feature, sources
from netc.importer.writer import Append, Assign, Loop, ModuleRef

UNIT = "layernormvariantslstm"
# the cell's options whose value changes what it computes, at its defaults
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
TRAINING_ONLY = {  # applied by the cell in training only: dropped with a note
    "dropout": "dropout on the LSTM cell's input activation in training",
    "dropout_h": "dropout on the LSTM's previous hidden state in training",
    "dropout_seed": "the seed of that dropout",
}


class LayerNormLstm:
    """Mixed into `Importer` (netc.importer.layers)."""

    def _ln_lstm_opts(self, d: dict, full: str, cls: str) -> dict:
        opts = d.get("unit_opts") or {}
        if not isinstance(opts, dict):
            raise Refused(full, cls, f"unit_opts {opts!r} (a dict of the unit's options)")
        out = dict(COMPUTES)
        for k, v in opts.items():
            if k in TRAINING_ONLY:
                if v not in (None, 0, 0.0) or k == "dropout_seed":
                    self.dropped.setdefault(f"unit_opts.{k}", []).append(full)
            elif k in INIT:
                continue
            elif k in COMPUTES and type(v) is type(COMPUTES[k]) or (k == "variance_epsilon" and isinstance(v, int)):
                out[k] = v
            else:
                raise Refused(full, cls, f"unit_opts {{{k}: {v!r}}} of unit {UNIT!r} not supported")
        if out["with_concat"] and out["global_norm"]:  # RETURNN asserts these apart
            raise Refused(full, cls, "unit_opts with_concat and global_norm together (RETURNN rejects them too)")
        if sum(bool(out[k]) for k in ("global_norm", "global_norm_joined", "per_gate_norm")) > 1:
            raise Refused(
                full, cls, "unit_opts: two of global_norm, global_norm_joined, per_gate_norm (RETURNN rejects them too)"
            )
        return out

    def _ln_lstm(self, layer: str, d: dict, scope: Scope, var: str, full: str, cls: str) -> Val:
        """The unit over a sequence (a loop over its frames) or one step in a rec unit."""
        opts = self._ln_lstm_opts(d, full, cls)
        if d.get("initial_state") not in (None, 0, 0.0, "zeros"):
            raise Refused(full, cls, f"initial_state of a {UNIT!r} unit")
        if getattr(self, "_masks", None):
            raise Refused(full, cls, f"a {UNIT!r} unit under masked_computation")
        src = self._source(d, scope, full)
        out = self._out_dim(layer, d, full)
        prefix = self._tf_prefix(layer, d, scope, "/rec")
        if scope.rec is not None:  # one step of the rec unit's loop
            if d.get("direction", 1) != 1 or src.sparse is not None or src.is_list:
                raise Refused(full, cls, "a step in a rec unit of direction 1 over a dense frame is supported")
            c = self.fresh(f"{var}_c")
            loop = loop_scope(scope)
            for state in (var, c):
                loop.outer.stmts.append(
                    Assign([state], call("zeros", name("batch"), self.dim(out)), comment="initial state")
                )
            self._ln_lstm_step(layer, scope, var, c, src, out, prefix, opts)
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
        for state in (h, c):
            scope.stmts.append(Assign([state], call("zeros", name("batch"), self.dim(out)), comment="initial state"))
        scope.stmts.append(Assign([var], cst.List([])))
        self._ln_lstm_step(layer, inner, h, c, frame, out, prefix, opts)
        inner.stmts.append(Append(var, name(h)))
        seq = src.expr if isinstance(src.expr, cst.Name) and not src.is_list else src.tensor()
        if direction == -1:
            seq = call("reversed", seq)
        comment = f"layer {layer!r}: a {UNIT} unit, step by step" + (" (backwards)" if direction == -1 else "")
        scope.stmts.append(Loop([frame.expr.value], seq, inner.stmts, comment=comment))
        return Val(name(var), (*(x for x in src.dims if x != feature(src, self.dims)), out), is_list=True)

    def _ln_lstm_step(
        self, layer: str, scope: Scope, h: str, c: str, src: Val, out: str, prefix: str, opts: dict
    ) -> None:
        """The cell's step on the frame `src`: its states `h` and `c` (set before the loop)."""
        size = self.dims.size(out)
        gates = self.dims.static(4 * size, f"{identifier(layer)}_gates")
        eps = num(float(opts["variance_epsilon"]))
        self.imports |= {"Linear", "LayerNorm", "split", "sigmoid", "tanh", "zeros"}
        first = [f"layer {layer!r}: one {UNIT} step (gates i, j, f, o)"]

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
