"""Layers of arithmetic over their inputs: `activation` (and every layer's `activation` option),
`combine`, `eval` (the restricted language of `evals.py`; calling the config's functions:
`config_eval.py`), `reduce`, `dot`."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import libcst as cst

from netc.importer import legacy
from netc.importer.dims import BATCH
from netc.importer.syntax import Expr, binop, call, identifier, literal, name, num
from netc.importer.values import DIM, Refused, Val, feature, sources, step_read_refused
from netc.importer.writer import Assign

# RETURNN `activation` names -> netc functions (None: the identity)
ACTIVATIONS = {
    None: None,
    "identity": None,
    "linear": None,
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "relu": "relu",
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "sin": "sin",
    "cos": "cos",
    "abs": "abs",
    "swish": "silu",
    "silu": "silu",
    "softmax": "softmax",
    "log_softmax": "log_softmax",
    "gelu": "gelu",  # TF's `tf.nn.gelu` (RETURNN looks there first): exact (erf), as netc's
}


def _p(e: Expr) -> Expr:
    """`e` in parentheses where an operator next to it would bind otherwise."""
    if isinstance(e, cst.BinaryOperation | cst.UnaryOperation | cst.Comparison) and not e.lpar:
        return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return e


def _neg(e: Expr) -> Expr:
    return cst.UnaryOperation(cst.Minus(), _p(e))


def _number(text: str) -> float | int | None:
    try:
        return int(text.strip())
    except ValueError:
        try:
            return float(text.strip())
        except ValueError:
            return None


# activations netc has no function of its own for, as expressions of x (TF's `tf.nn.<name>` and
# `tf.math.<name>`), and the netc functions they use
_ACTIVATION_FORMS = {
    # softplus without overflow: max(x, 0) + log(1 + exp(-|x|))
    "softplus": (
        lambda x: binop(
            "+", call("maximum", x, num(0.0)), call("log", binop("+", num(1.0), call("exp", _neg(call("abs", x)))))
        ),
        {"maximum", "log", "exp", "abs"},
    ),
    "log_sigmoid": (
        lambda x: _neg(
            _p(
                binop(
                    "+",
                    call("maximum", _neg(x), num(0.0)),
                    call("log", binop("+", num(1.0), call("exp", _neg(call("abs", x))))),
                )
            )
        ),
        {"maximum", "log", "exp", "abs"},
    ),
    "square": (lambda x: cst.BinaryOperation(x, cst.Power(), num(2)), set()),
    "negative": (_neg, set()),
    "neg": (_neg, set()),
    "relu6": (lambda x: call("minimum", call("relu", x), num(6.0)), {"minimum", "relu"}),
    "elu": (
        lambda x: call(
            "where",
            cst.Comparison(x, [cst.ComparisonTarget(cst.GreaterThan(), num(0.0))]),
            x,
            binop("-", call("exp", call("minimum", x, num(0.0))), num(1.0)),
        ),
        {"where", "exp", "minimum"},
    ),
    "leaky_relu": (lambda x: call("maximum", x, binop("*", num(0.2), x)), {"maximum"}),  # TF's alpha 0.2
    "softsign": (lambda x: binop("/", x, _p(binop("+", num(1.0), call("abs", x)))), {"abs"}),
    "reciprocal": (lambda x: binop("/", num(1.0), x), set()),
    "rsqrt": (lambda x: binop("/", num(1.0), call("sqrt", x)), {"sqrt"}),
}
_ONCE = {"square", "negative", "neg", "relu6", "reciprocal", "rsqrt"}  # forms reading x once
# RETURNN `reduce` modes -> netc functions (`min`/`argmin`: of the negated input)
_REDUCE = {
    "sum": "reduce_sum",
    "mean": "reduce_mean",
    "max": "reduce_max",
    "min": "reduce_max",
    "logsumexp": "logsumexp",
    "argmax": "argmax",
    "argmin": "argmax",
}
COMBINE = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}


def _is_log_softmax(e: Expr) -> bool:
    return isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value == "log_softmax"


def _with_locals(code, local: dict, full: str, cls: str) -> str:
    """The eval string with its `eval_locals` (numbers) in place of their names."""
    import ast

    bad = [k for k, v in local.items() if not isinstance(v, int | float) or isinstance(v, bool)]
    if bad or not isinstance(code, str):
        what = repr(local[bad[0]])[:60] if bad else repr(code)
        raise Refused(full, cls, f"eval_locals {bad[0] if bad else ''}: {what} (numbers are supported)")

    class Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.Constant(local[node.id]) if node.id in local else node

    try:
        return ast.unparse(Put().visit(ast.parse(code.strip(), mode="eval")))
    except SyntaxError:
        return code  # the mapper says why


class ArithLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _activation(self, val: Val, act, full: str, cls: str) -> Val:
        """`act` (RETURNN's activation string) applied; None where it is the identity."""
        if act in ACTIVATIONS and ACTIVATIONS[act] is None:
            return val
        expr = self._act(val, val.tensor(), act) if isinstance(act, str) else None
        if expr is None:
            raise Refused(full, cls, f"activation {act!r} not supported")
        return Val(expr, val.dims)

    def _safe_log(self, src: Val, d: dict, scope, opts, full: str) -> Val:
        """RETURNN's `safe_log(x, eps=1e-20)`: log(max(x, eps)); of a softmax its log-softmax. Of a
        layer whose TF op is an exp, a sigmoid or another softmax it would take their input: refused."""
        if not isinstance(opts, dict) or set(opts) - {"eps", "use_fake_grad"}:
            raise Refused(full, "activation", f"opts {opts!r} of safe_log (eps and use_fake_grad are supported)")
        eps = opts.get("eps", 1e-20)
        if not isinstance(eps, int | float) or isinstance(eps, bool):
            raise Refused(full, "activation", f"opts eps {eps!r} of safe_log (a number is supported)")
        if src.logits is not None and not d.get("dropout"):
            self.imports.add("log_softmax")
            return Val(call("log_softmax", src.logits.tensor(), axis=self.dim(feature(src, self.dims))), src.dims)
        froms = sources(d)
        if len(froms) == 1 and isinstance(scope.layers.get(froms[0]), dict) and not d.get("dropout"):
            inner = scope.layers[froms[0]]
            if inner.get("activation") in ("exp", "sigmoid", "softmax") and inner.get("class") in (
                "activation",
                "linear",
            ):
                raise Refused(full, "activation", f"safe_log of the {inner['activation']} of layer `{froms[0]}`")
        # `use_fake_grad` changes the gradient only (max with the identity's gradient)
        self.imports |= {"log", "maximum"}
        return Val(call("log", call("maximum", src.tensor(), num(float(eps)))), src.dims)

    def _act(self, val: Val, x: Expr, act: str) -> Expr | None:
        """RETURNN's `get_activation_function(act)` of x: a name (TF's `tf.nn.<name>` first), or
        two of them or numbers joined by one of `+ - * /` ("2 * sigmoid"); None: not known."""
        act = act.strip()
        if act in ACTIVATIONS:
            fn = ACTIVATIONS[act]
            if fn is None:
                return x
            self.imports.add(fn)
            if fn in ("softmax", "log_softmax"):
                return call(fn, x, axis=self.dim(feature(val, self.dims)))
            return call(fn, x)
        if act in _ACTIVATION_FORMS:
            form, uses = _ACTIVATION_FORMS[act]
            self.imports |= uses
            if not isinstance(x, cst.Name) and act not in _ONCE:  # x read twice: bound to a variable first
                x = self._bind(x)
            return form(_p(x))
        for op in "+-*/":  # RETURNN's `_get_act_func_with_op`: the first operator it finds, once
            if op in act:
                parts = act.split(op)
                if len(parts) != 2:
                    return None
                numbers = [_number(p) for p in parts]
                if None not in numbers:
                    return None
                if numbers.count(None) == 2 and not isinstance(x, cst.Name):  # x read twice: bound first
                    x = self._bind(x)
                sides = [num(v) if v is not None else self._act(val, x, p) for v, p in zip(numbers, parts)]
                if any(side is None for side in sides):
                    return None
                return binop(op, _p(sides[0]), _p(sides[1]))
        return None

    def _bind(self, x: Expr) -> cst.Name:
        """x as a variable, assigned (with the layer's module) before the layer's statement."""
        for pre, value in self._pre_activation:
            if value is x:
                return name(pre)
        pre = self.fresh("pre_activation")
        self._pre_activation.append((pre, x))
        return name(pre)

    def _l_activation(self, layer, d, scope, var, full) -> Val:
        src, act, opts = self._source(d, scope, full), d.get("activation"), d.get("opts")
        if act == "safe_log":  # RETURNN passes `opts` to the function: `eps`, `use_fake_grad`
            val = self._safe_log(src, d, scope, opts or {}, full)
        elif opts:
            raise Refused(full, "activation", f"opts {opts!r} of activation {act!r} (eps of safe_log is supported)")
        else:
            val = self._activation(src, act, full, "activation")
        self._emit(scope, var, val.expr, layer)
        return Val(name(var), val.dims, val.sparse, False, log_probs=_is_log_softmax(val.expr))

    def _l_combine(self, layer, d, scope, var, full) -> Val:
        kind = d.get("kind", "add")
        if kind == "eval":  # RETURNN's `eval` layer is this `combine`
            if d.get("eval_for_output_loss") and d.get("loss"):
                raise Refused(full, "combine", "eval_for_output_loss with a loss not supported")
            return self._l_eval(layer, d, scope, var, full)
        vals = [self.get(s, scope) for s in sources(d)]
        if not vals:
            raise Refused(full, "combine", "it has no input")
        vals = self._broadcast_ones(vals)
        dims = max((v.dims for v in vals), key=len)
        if kind in COMBINE:
            expr = vals[0].tensor()
            for v in vals[1:]:
                expr = binop(COMBINE[kind], expr, v.tensor())
        elif kind in ("maximum", "minimum"):
            self.imports.add(kind)
            expr = vals[0].tensor()
            for v in vals[1:]:
                expr = call(kind, expr, v.tensor())
        else:
            raise Refused(full, "combine", f"kind {kind!r} not supported")
        val = self._activation(Val(expr, dims), d.get("activation"), full, "combine")
        self._emit(scope, var, val.expr, layer)
        return Val(name(var), dims)

    def _positions(self, layer, d, scope, var, full) -> Val | None:
        """An `eval` whose config function computes positions from its sources' lengths (the
        latent attention configs' linear alignment, `positions.py`); None for another `eval`."""
        from netc.importer.positions import positions_eval

        found = positions_eval(self, d, full, lambda: [self.get(s, scope) for s in sources(d)])
        if found is None:
            return None
        expr, dims, cls = found
        if cls is not None:  # positions in a source's frames: labels over its time dim
            self.imports.add("cast")
            expr = call("cast", expr, literal("int32"), class_dim=self.dim(cls))
        if "size_target" in d:  # the result's frames are the target's: its time dim
            target = self._input(str(d["size_target"]).removeprefix("data:"))
            if not any(x in dims for x in target.dims if self.dims.is_dynamic(x)):
                raise Refused(full, "eval", f"size_target {d['size_target']!r}: another time dim than the result's")
        self._emit(scope, var, expr, layer)
        return Val(name(var), dims, cls)

    def _l_eval(self, layer, d, scope, var, full) -> Val:
        """The `eval` string parsed (never run) into netc ops over its sources (`evals.py`); one
        calling the config's functions, as what it computes outside training (`config_eval.py`)."""
        from netc.importer.config_eval import config_eval, reads_config
        from netc.importer.evals import EvalMapper, rejected_conversion

        if (pos := self._positions(layer, d, scope, var, full)) is not None:
            return pos
        if "size_target" in d:
            raise Refused(full, "eval", "size_target (of an `eval` computing positions from lengths only)")
        code, shown, old = d.get("eval"), None, False
        if d.get("eval_locals"):
            code = _with_locals(code, d["eval_locals"], full, d.get("class", "eval"))
        vals = self._broadcast_ones([self.get(s, scope) for s in sources(d)])
        # positions a `choice` made (labels over a time dim) are numbers to an `eval` (clipped,
        # compared, shifted by the latent attention configs), not classes
        vals = [
            Val(v.expr, v.dims) if v.sparse is not None and self.dims.is_dynamic(v.sparse) and chosen else v
            for v, chosen in zip(vals, (scope.rec is not None and self._from_choice(s, scope, 0) for s in sources(d)))
        ]
        vals = self._same_size_features(vals)
        other = _without_step_frame(code, vals, full)  # the source a search computes it as, if any
        if (why := rejected_conversion(d.get("eval"), vals, d.get("out_type"))) is not None:
            if len(set(sources(d))) != 1 or not isinstance(code, str):
                raise Refused(full, "eval", why)
            code = legacy.as_is_sources(code)  # an older RETURNN's meaning: its sources' common layout
            old = True
            self.old_notes.setdefault(legacy.OLD_EVAL_NOTE, []).append(full)
        if reads_config(code):
            ce = config_eval(code, self.cfg.path, self.cfg.values)
            what = code["__object__"].split(" at ")[0] + ">" if isinstance(code, dict) else repr(code)
            if ce.code is None:
                raise Refused(full, "eval", f"eval {what}: {ce.why} not understood (outside training)")
            shown, code = f"{what} (outside training: {ce.code!r})", ce.code
            self._note_config_eval(full, ce, labels=len(vals) == 1 and vals[0].sparse is not None)
        if not isinstance(code, str):
            raise Refused(full, "eval", f"eval {code!r} is not a string (an expression over `source(i)` is)")
        if code.strip() == "source(0)" and len(vals) == 1 and not d.get("activation"):  # the identity
            self._emit(scope, var, vals[0].expr, layer)
            return Val(name(var), vals[0].dims, vals[0].sparse, vals[0].is_list and isinstance(vals[0].expr, cst.Name))
        last = frozenset(i for i, s in enumerate(sources(d)) if self._feature_last(s, scope))
        layouts = {i: self._layout(s, v, scope, old) for i, (s, v) in enumerate(zip(sources(d), vals, strict=True))}
        # a lone source read `auto_convert` (without `out_type`) keeps its own layout: where it is an
        # `expand_dims`, its axis numbers are that layout's
        one = len(vals) == 1 and not d.get("out_type") and self._class_of(sources(d)[0], scope) == "expand_dims"
        weights = frozenset(i for i, s in enumerate(sources(d)) if self._spatial_weights(s, scope))
        ot = d.get("out_type")
        int_labels = isinstance(ot, dict) and (ot.get("sparse") is True or "sparse_dim" in ot)
        mapper = EvalMapper(
            self,
            full,
            code,
            vals,
            shown,
            feature_last=last,
            layouts=layouts,
            own_layout=one,
            weights=weights,
            in_loop=bool(scope.rec),
            int_labels=int_labels,
        )
        expr, _ = mapper.run()
        if mapper.loop_axes:
            why = (
                f"`{mapper.loop_axes[0]}` in a rec unit is read over a step's layout (its last axis, as RETURNN "
                "computes the layer in the loop: in search, under a `choice`); where RETURNN's training graph "
                "computes the layer over all frames at once, the axis number names another axis and the layer's "
                "values differ (a `choice` reading them takes its target in training)"
            )
            self.warnings.append(Refused(full, "eval", why))
        dims, sparse = mapper.result(expr)
        if id(expr) in mapper.ints:  # labels' numbers: labels of `out_type`'s class dim (the values kept)
            sparse = self._out_classes(layer, ot, full)
            self.imports.add("cast")
            expr = call("cast", expr, cst.SimpleString('"int32"'), class_dim=self.dim(sparse))
        if (set(mapper.full_dims) - set(dims) or sparse is not None) and not d.get("out_type"):
            # RETURNN's output of an `eval` is its sources' (common) dims, unless `out_type` says
            raise Refused(
                full,
                "eval",
                f"eval {mapper.shown}: a value of fewer dims than its sources' (or labels) without `out_type` (RETURNN rejects it too)",
            )
        if sparse is not None and d.get("activation"):
            raise Refused(full, "eval", "an activation of labels (an `argmax`)")
        val = self._activation(Val(expr, dims), d.get("activation"), full, "eval")
        if id(val.expr) in mapper.whole:  # a float of labels: its values are whole numbers
            self.whole_floats.add(var)
        if other is not None:  # training's reads the target's frame, a search computes without it
            if (vals[other].dims, vals[other].sparse) != (dims, sparse):
                raise Refused(full, "eval", step_read_refused(f"eval {mapper.shown}"))
            note = f"layer {layer!r}: a search has no target frame; its `{sources(d)[other]}` there"
            scope.stmts.append(Assign([var], val.expr, note=note, search=vals[other].expr))
        else:
            self._emit(scope, var, val.expr, layer)
        return Val(name(var), dims, sparse, log_probs=_is_log_softmax(val.expr))

    def _out_classes(self, layer: str, ot: dict, full: str) -> str:
        """The class dim of an `eval`'s `out_type` of labels (`dim`: a number of classes, or
        `sparse_dim`: a dim tag): a static dim."""
        n = ot.get("sparse_dim", ot.get("dim"))
        if isinstance(n, dict) and DIM in n:
            tag = self.dims.tag(n[DIM])
        elif isinstance(n, int) and not isinstance(n, bool) and n >= 1:
            tag = self.dims.static(n, identifier(f"{layer}_classes"))
        else:
            raise Refused(full, "eval", f"out_type {ot!r}: labels of a number of classes or a dim tag are supported")
        if not self.dims.is_static(tag) or ot.get("dtype", "int32") not in ("int32", "int64"):
            raise Refused(full, "eval", f"out_type {ot!r}: int32 labels of a static class dim are supported")
        return tag

    def _broadcast_ones(self, vals: list[Val]) -> list[Val]:
        """RETURNN's `eval` broadcasts a static dim of size 1 (a `variable` of shape [1]: a scale)
        against its other sources' static dims, leaving it out: netc sums it away (its one value)."""
        out = []
        wider = {x for w in vals for x in w.dims if self.dims.is_static(x) and self.dims.size(x) > 1}
        for v in vals:
            ones = [x for x in v.dims if self.dims.is_static(x) and self.dims.size(x) == 1]
            if ones and v.sparse is None and wider - set(v.dims):
                self.imports.add("reduce_sum")
                axis = self.dim(ones[0]) if len(ones) == 1 else cst.List([cst.Element(self.dim(k)) for k in ones])
                v = Val(call("reduce_sum", v.tensor(), axis=axis), tuple(x for x in v.dims if x not in ones))
            out.append(v)
        return out

    def _same_size_features(self, vals: list[Val]) -> list[Val]:
        """Sources of one static (feature) dim each, of one size but other dims (a `merge_dims`'s and
        a `reduce`'s): RETURNN's common data matches them (`get_common_data`: its auto-generated dims
        of one size are one), so the eval reads them elementwise; netc's dims become one."""
        feats = []
        for v in vals:
            static = [x for x in v.dims if self.dims.is_static(x)]
            if v.sparse is not None or len(static) != 1:
                return vals
            feats.append(static[0])
        if len({self.dims.find(f) for f in feats}) < 2 or len({self.dims.size(f) for f in feats}) > 1:
            return vals
        if self.dims.size(feats[0]) == 1:  # `_broadcast_ones`' case
            return vals
        for f in feats[1:]:
            self.dims.join(feats[0], f)
        one = self.dims.find(feats[0])
        return [replace(v, dims=tuple(one if x == f else x for x in v.dims)) for v, f in zip(vals, feats, strict=True)]

    @staticmethod
    def _class_of(ref, scope) -> str | None:
        """The class of layer `ref` of `scope` (None for an input or a `base:` layer)."""
        d = scope.layers.get(ref.removeprefix("prev:")) if isinstance(ref, str) else None
        return d.get("class") if isinstance(d, dict) else None

    def _feature_last(self, ref, scope, depth: int = 0) -> bool:
        """Whether RETURNN's layout of layer `ref` has its feature axis last: an input, a frame, a
        `linear`/`softmax`/`rnn_cell`/LSTM output, a `variable` (its last `shape` dim), and what keeps its first source's layout (an
        elementwise `eval`, `combine`, `activation`, `copy`, `dropout` without `out_type`)."""
        if not isinstance(ref, str) or depth > 20:
            return False
        if ref == "data" or ref.startswith("data:"):
            return True
        if ref.startswith("base:"):
            return scope.outer is not None and self._feature_last(ref[5:], scope.outer, depth + 1)
        d = scope.layers.get(ref.removeprefix("prev:"))
        if not isinstance(d, dict) or d.get("out_type"):
            return False
        cls = d.get("class")
        if cls in ("linear", "softmax", "rnn_cell") or (cls == "rec" and isinstance(d.get("unit"), str)):
            return True
        if cls == "variable":  # its `shape` in order, a batch axis (`add_batch_axis`) first
            return not d.get("add_time_axis")
        if cls in ("eval", "combine", "activation", "copy", "dropout", "slice", "pool") and sources(d):
            # (a `slice` keeps its input's layout; a `pool` gives its channels last)
            return self._feature_last(sources(d)[0], scope, depth + 1)
        if cls == "subnetwork" and isinstance(d.get("subnetwork"), dict):  # its `output` layer's layout
            inner = SimpleNamespace(layers=d["subnetwork"], outer=scope)
            return self._feature_last("output", inner, depth + 1)
        return False

    def _layout(self, ref, val: Val, scope, old: bool, depth: int = 0) -> tuple[str, ...] | None:
        """RETURNN's layout of layer `ref` (value `val`) as its dims in axis order, where netc knows it
        (what an axis number in an `eval` reading it `auto_convert=False` names): a batch-major
        `reinterpret_data` of [B, T] and at most one static dim is netc's order; a
        `softmax_over_spatial` keeps its input's (`old`: RETURNN before 2019-08, whose `eval` the layer
        is read as) or moves the softmax axis last (the installed RETURNN); else None."""
        if not isinstance(ref, str) or depth > 20:
            return None
        if ref.startswith("base:"):
            return None if scope.outer is None else self._layout(ref[5:], val, scope.outer, old, depth + 1)
        d = scope.layers.get(ref.removeprefix("prev:"))
        if not isinstance(d, dict) or val.sparse is not None:
            return None
        dims = val.dims
        cls = d.get("class")
        if (
            cls == "reinterpret_data"
            and d.get("enforce_batch_major") is True
            and set(d) <= {"class", "from", "enforce_batch_major", "trainable", "set_axes"}
        ):
            dynamic = [x for x in dims if self.dims.is_dynamic(x)]
            static = [x for x in dims if self.dims.is_static(x)]
            if d.get("set_axes") not in (None, {}, {"T": 1, "F": 2}, {"F": 2, "T": 1}, {"T": 1}):
                return None  # `set_axes` restating [B, T, F] only
            return dims if dims[:1] == (BATCH,) and len(dynamic) == 1 and len(static) <= 1 else None
        axis = d.get("axis")
        if cls == "expand_dims" and isinstance(axis, int) and not isinstance(axis, bool) and len(sources(d)) == 1:
            # RETURNN's input batch-major, the new dim inserted at `axis` (netc's value: it last)
            src, inner_dims = sources(d)[0], dims[:-1]
            inner = self._layout(src, replace(val, dims=inner_dims), scope, old, depth + 1)
            if inner is None and self._feature_last(src, scope) and len(inner_dims) == 2 and BATCH in inner_dims:
                inner = (BATCH, *(x for x in inner_dims if x != BATCH))  # [B, F]
            if inner is None or not 0 <= axis <= len(inner):
                return None
            inner = (BATCH, *(x for x in inner if x != BATCH)) if BATCH in inner else inner
            return (*inner[:axis], dims[-1], *inner[axis:])
        if cls == "softmax_over_spatial" and len(sources(d)) == 1:
            inner = self._layout(sources(d)[0], val, scope, old, depth + 1)
            axis = self._axis(val, d.get("axis", "T"))
            if inner is None or old or axis not in inner:
                return inner
            return (*(x for x in inner if x != axis), axis)
        return None

    def _spatial_weights(self, ref, scope, depth: int = 0) -> bool:
        """Whether layer `ref` is the weights of a `softmax_over_spatial` (not `log_space`): none below
        0, its padded frames 0 (its value before the first frame, as `prev:`, 0 too)."""
        if not isinstance(ref, str) or depth > 20:
            return False
        if ref.startswith("base:"):
            return scope.outer is not None and self._spatial_weights(ref[5:], scope.outer, depth + 1)
        d = scope.layers.get(ref.removeprefix("prev:"))
        if not isinstance(d, dict) or d.get("class") != "softmax_over_spatial" or d.get("log_space"):
            return False
        return not ref.startswith("prev:") or d.get("initial_output", 0) in (0, "zeros")

    def _note_config_eval(self, full: str, ce, labels: bool = False) -> None:
        fns = ", ".join(f"`{n}` (line {line})" for n, line in ce.functions) or "values"
        if ce.train_only:
            what = "its input" if ce.code.strip() == "source(0)" else f"`{ce.code}`"
            one = len(ce.functions) == 1
            # of labels (a decoder's fed-back label): SwitchOut-style random replacement of labels
            kind, own = (
                ("random replacement of the labels", "replacement")
                if labels
                else ("SpecAugment-style masking", "masking")
            )
            self.notes.append(
                f"layer `{full}` (eval): the config's {fns} compute{'s' if one else ''} {what} outside training; "
                f"what {'it does' if one else 'they do'} in training only (`network.cond_on_train`: {kind}) is left "
                f"out: the same numbers outside training (add {own} of your own for training)"
            )

    def _l_reduce(self, layer, d, scope, var, full) -> Val:
        """`reduce_sum`/`reduce_mean`/`reduce_max`/`logsumexp`/`argmax` over the axes (padded frames
        never count, as RETURNN's time mask); `min`/`argmin` of the negated input; `keep_dims`: a
        dim of size 1 in each reduced axis' place (RETURNN's: static, also for a time axis)."""
        mode = str(d.get("mode")).lower()
        mode = {"avg": "mean"}.get(mode, mode)  # RETURNN's alias
        if mode not in _REDUCE:
            raise Refused(full, "reduce", f"mode {d.get('mode')!r} not supported ({', '.join(_REDUCE)} are)")
        src = self._source(d, scope, full)
        if src.sparse is not None:
            raise Refused(full, "reduce", "labels (sparse) as the input")
        axes = d.get("axes", d.get("axis"))
        axes = list(axes) if isinstance(axes, list | tuple) else [axes]
        if any(isinstance(a, str) and a.lower() in ("b", "bt", "tb", "batch", "bf", "fb", "btf") for a in axes):
            raise Refused(
                full,
                "reduce",
                f"axes {axes!r}: over the batch axis (a value of the whole batch, e.g. a label prior over all its "
                "frames; netc computes each sequence on its own, a batch-wide statistic is not in the language)",
            )
        keys = [self._axis(src, a) for a in axes]
        if None in keys or not keys or any(k not in src.dims for k in keys):
            raise Refused(full, "reduce", f"axes {axes!r} not supported (T, F or dim tags of the input are)")
        fn = _REDUCE[mode]
        if fn == "argmax" and len(keys) != 1:
            raise Refused(full, "reduce", f"mode {mode!r} over {len(keys)} axes (RETURNN takes one)")
        self.imports.add(fn)
        x = src.tensor()
        if mode in ("min", "argmin"):
            x = cst.UnaryOperation(cst.Minus(), x)
        axis = self.dim(keys[0]) if len(keys) == 1 else cst.List([cst.Element(self.dim(k)) for k in keys])
        expr = call(fn, x, axis=axis)
        if mode == "min":
            expr = cst.UnaryOperation(cst.Minus(), expr)
        dims = tuple(x for x in src.dims if x not in keys)
        if fn == "argmax":  # labels over the reduced axis
            self._emit(scope, var, expr, layer)
            return Val(name(var), dims, keys[0])
        if d.get("keep_dims"):
            from netc.importer.attention import new_dim

            kept = list(src.dims)
            for k in keys:
                # in a time axis' place: a dim of its own (the feature axis stays RETURNN's)
                one = self.dims.kept_time() if self.dims.is_dynamic(k) else None
                if one is None or one in kept:
                    one = new_dim(self, 1, f"{identifier(layer)}_kept", set(kept))
                self.imports.add("expand")
                expr = call("expand", expr, self.dim(one))
                kept[kept.index(k)] = one
            dims = tuple(kept)
        self._emit(scope, var, expr, layer)
        return Val(name(var), dims)

    def _kept_squeezed(self, src: Val) -> tuple[Val, int | None]:
        """`src` without the size-1 axis a `reduce` with `keep_dims` left in a time axis' place (its
        one value: a layer over the feature axis of [B, 1, F], netc's over one static dim), and
        where it was (None: it has none)."""
        kept = [x for x in src.dims if self.dims.find(x) in self.dims.not_feature]
        if len(kept) != 1 or src.sparse is not None:
            return src, None
        self.imports.add("reduce_sum")
        at = src.dims.index(kept[0])
        return Val(call("reduce_sum", src.tensor(), axis=self.dim(kept[0])), src.dims[:at] + src.dims[at + 1 :]), at

    def _kept_back(self, expr: Expr, dims: tuple, at: int | None) -> tuple[Expr, tuple]:
        """The kept axis `_kept_squeezed` took out, back in its place."""
        if at is None:
            return expr, dims
        self.imports.add("expand")
        kept = self.dims.kept_time()
        return call("expand", expr, self.dim(kept)), (*dims[:at], kept, *dims[at:])

    def _l_dot(self, layer, d, scope, var, full) -> Val:
        """`dot(a, b, reduce=...)`: every other dim is kept. RETURNN's forms: `reduce` (dim tags, `T`,
        `F`) with automatic `var1`/`var2`, or `red1`/`red2` (the reduced axes of each) with
        `var1`/`var2` (each source's own axes; the others are the dims both have); before behavior
        version 3, an empty `var2` adds a dim of size 1 (`add_var2_if_empty`)."""
        srcs = sources(d)
        if len(srcs) != 2:
            raise Refused(full, "dot", "two sources are supported")
        a, b = (self.get(x, scope) for x in srcs)
        if a.sparse is not None or b.sparse is not None:
            raise Refused(full, "dot", "labels (sparse) as a source not supported")
        find = self.dims.find
        old_form, legacy = "reduce" not in d, False
        if not old_form:
            if any(d.get(v, "auto") != "auto" for v in ("var1", "var2")):
                raise Refused(full, "dot", "`reduce` with `var1`/`var2` other than auto not supported")
            axes = d["reduce"] if isinstance(d["reduce"], list) else [d["reduce"]]
            keys = [self._axis(a, ax) for ax in axes]
            if None in keys or any(find(k) not in {find(x) for x in b.dims} for k in keys):
                raise Refused(full, "dot", f"reduce {d['reduce']!r}: a dim of both sources (tags, T or F)")
        else:
            legacy = self.cfg.behavior_version < 3 and d.get("var1") != "auto" and d.get("var2") != "auto"
            red1, red2 = (d.get(k, default if legacy else None) for k, default in (("red1", -1), ("red2", -2)))
            var1, var2 = (d.get(k, default if legacy else "auto") for k, default in (("var1", -2), ("var2", -1)))
            from netc.importer.layouts import batch_major_order

            la, lb = (batch_major_order(self, s, v, scope) for s, v in ((srcs[0], a), (srcs[1], b)))
            keys, keys2 = self._dot_axes(a, red1, full, "red1", la), self._dot_axes(b, red2, full, "red2", lb)
            own1, own2 = self._dot_axes(a, var1, full, "var1", la), self._dot_axes(b, var2, full, "var2", lb)
            if var1 == "auto" or var2 == "auto":  # RETURNN's automatic: each source's dims the other has not
                own1 = [x for x in a.dims if x not in keys and find(x) not in {find(y) for y in b.dims}]
                own2 = [x for x in b.dims if x not in keys2 and find(x) not in {find(y) for y in a.dims}]
            for k1, k2 in zip(keys, keys2):  # RETURNN reduces dims of one size: they are one dim
                in_a, in_b = {find(x) for x in a.dims}, {find(x) for x in b.dims}
                same_size = self.dims.size(k1) == self.dims.size(k2) and self.dims.is_static(k1)
                if find(k1) != find(k2) and same_size and find(k2) not in in_a and find(k1) not in in_b:
                    self.dims.join(k1, k2)
            rest1 = [x for x in a.dims if x not in keys + own1]
            rest2 = [x for x in b.dims if x not in keys2 + own2]
            if not keys or [find(k) for k in keys] != [find(k) for k in keys2]:
                raise Refused(full, "dot", f"red1 {red1!r} and red2 {red2!r}: the same dims of both sources")
            if {find(x) for x in rest1} != {find(x) for x in rest2}:
                raise Refused(full, "dot", "the sources' other dims (not red/var) differ")
            if {find(x) for x in own1} & {find(x) for x in b.dims} or {find(x) for x in own2} & {
                find(x) for x in a.dims
            }:
                raise Refused(
                    full, "dot", "var1 and var2: dims of one source only (the same dim in both not supported)"
                )
        self.imports.add("dot")
        reduce = self.dim(keys[0]) if len(keys) == 1 else cst.List([cst.Element(self.dim(k)) for k in keys])
        expr = call("dot", a.tensor(), b.tensor(), reduce=reduce)
        found = {find(k) for k in keys}
        dims = list(a.dims) + [x for x in b.dims if find(x) not in {find(y) for y in a.dims}]
        dims = [x for x in dims if find(x) not in found]
        if old_form and legacy and not own2 and d.get("add_var2_if_empty", True):
            from netc.importer.attention import new_dim

            one = new_dim(self, 1, f"{identifier(layer)}_var2", set(dims))
            self.imports.add("expand")
            expr, dims = call("expand", expr, self.dim(one)), [*dims, one]
        self._emit(scope, var, expr, layer)
        return Val(name(var), tuple(dims))

    def _dot_axes(self, val: Val, desc, full: str, opt: str, order: tuple[str, ...] | None) -> list[str]:
        """`red1`/`red2`/`var1`/`var2` of a `dot` as dims of `val`: None, an axis description, `T?`
        (the time dim, if any), -1 (RETURNN's feature axis: the last static dim), another axis
        number where RETURNN's layout of the source is known (`order`, `layouts.py`) or a list of them."""
        if desc is None or desc == "auto":
            return []
        out = []
        for ax in desc if isinstance(desc, list | tuple) else [desc]:
            if ax == "T?":
                out += [x for x in val.dims if self.dims.is_dynamic(x)][:1]
                continue
            if ax == -1 and not isinstance(ax, bool):
                static = [x for x in val.dims if self.dims.is_static(x)]
                key = static[-1] if static else None
            elif isinstance(ax, int) and not isinstance(ax, bool):  # RETURNN's axis of its layout, batch counted
                key = order[ax] if order is not None and -len(order) <= ax < len(order) and order[ax] != BATCH else None
                if key is None:
                    raise Refused(
                        full,
                        "dot",
                        f"{opt} {desc!r}: an axis number of a source whose layout in RETURNN netc does not know "
                        "(T, T?, F, static:i, -1 or dim tags are supported; axis numbers of batch-major layers "
                        "from the inputs or a conv)",
                    )
            else:
                key = self._axis(val, ax) if isinstance(ax, str | dict) else None
            if key is None or key not in val.dims:
                raise Refused(full, "dot", f"{opt} {desc!r} (T, T?, F, static:i, -1 or dim tags of the source)")
            out.append(key)
        return out


_STEP_FRAME_OPS = ("tf.minimum(source(0),source(1))", "tf.maximum(source(0),source(1))")


def _without_step_frame(code, vals: list[Val], full: str) -> int | None:
    """An `eval` reading the step's frame of a `choice`'s target (`data:<target>` in its unit,
    training's only): the minimum or maximum of it and another source is that source in a search
    (as the latent attention configs build their search network without the target: `t_start`
    the previous position, training's `tf.minimum(prev:t, data:t_target)`): its index. None: no
    such read."""
    frames = [i for i, v in enumerate(vals) if v.training]
    if not frames:
        return None
    if not isinstance(code, str) or "".join(code.split()) not in _STEP_FRAME_OPS or len(vals) != 2 or len(frames) != 1:
        raise Refused(full, "eval", step_read_refused(f"eval {code!r}"))
    return 1 - frames[0]
