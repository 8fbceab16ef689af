"""A transducer's `rec` unit trained full-sum: RETURNN's loop optimisation computes it on the
(frame, label) lattice, and the config's own loss function (the RNN-T loss of
warp-transducer, `extern.HawkAaronWarpTransducer.rnnt_loss`, or of the setups' own
`rnnt_tf_impl.tf_forward_shifted`) reads it.

In training RETURNN's `rec` over the frames of `from`, with the label-side network under a
`masked_computation` with `masked_from` (the labels with the begin label before them), moves
every layer out of the loop: `data:source` is the encoder over its frames, the masked
computation's unit runs over `masked_from` (its own frames: the labels + 1), a `linear` of both
sees their broadcast (`out_type` [T, U+1, B, F]), and the layers after it are over
[B, T, U+1, ...]. The `choice` (`output`) is the target itself (teacher forcing), and the layers
that count positions, strings and the `end` for the search are not computed for the loss. netc
writes that lattice as it is: the unit's layers outside any loop, the masked computation's unit
over `masked_from`, the `linear` of sources over other frames as one of their expanded
concatenation, and the loss as `rnnt_loss(log_probs, labels, axis=..., time_axis=...,
blank_index=...)` (its softmax leaves log-probabilities as they are). The rec layer's value is
the target."""

from __future__ import annotations

import ast

import libcst as cst

from netc.importer.config_eval import _OBJECT_FUNCTION, _parsed
from netc.importer.syntax import call, name, num
from netc.importer.values import Refused, Scope, Val, sources
from netc.importer.writer import MarkLoss

# the losses recognised: (module, function) -> the sign of the function's result as a cost (-1: a log-likelihood)
RNNT_FUNCTIONS = {("HawkAaronWarpTransducer", "rnnt_loss"): 1, ("rnnt_tf_impl", "tf_forward_shifted"): -1}


def lattice_unit(unit: dict) -> bool:
    """Whether RETURNN trains `unit` on the lattice: a `masked_computation` with `masked_from`."""
    return any(
        isinstance(ld, dict) and ld.get("class") == "masked_computation" and ld.get("masked_from")
        for ld in unit.values()
    )


def _redirect(ref):
    if isinstance(ref, str):
        return "data" if ref == "data:source" else ref
    if isinstance(ref, list | tuple):
        return [_redirect(r) for r in ref]
    return ref


def _rewritten(unit: dict, full: str, frames_of: list[str]) -> dict:
    """The unit's layers as RETURNN computes them outside the loop; `frames_of` gets the layers that
    were a `gather_nd` at the step (`:i`), each frame's value on the lattice."""
    out = {}
    for n, ld in unit.items():
        if not isinstance(ld, dict):
            out[n] = ld
            continue
        ld = dict(ld)
        if "from" in ld:
            ld["from"] = _redirect(ld["from"])
        if ld.get("class") == "masked_computation" and ld.get("masked_from"):
            inner = ld.get("unit")
            if not isinstance(inner, dict) or sources(inner) != ["data"]:
                raise Refused(f"{full}/{n}", "masked_computation", "a unit that does not read its `data`")
            ld = {**inner, "from": ld["masked_from"]}
            if ld.get("class") == "subnetwork" and isinstance(ld.get("subnetwork"), dict):
                # its `rnn_cell`s run over `masked_from`'s frames: RETURNN's cell over a sequence, a `rec`
                ld["subnetwork"] = {
                    k: {**v, "class": "rec"} if isinstance(v, dict) and v.get("class") == "rnn_cell" else v
                    for k, v in ld["subnetwork"].items()
                }
        if ld.get("class") == "gather_nd" and ld.get("position") == ":i":
            # the step's frame of a value over the encoder's frames: on the lattice, each frame's own
            ld = {"class": "copy", "from": ld.get("from")}
            frames_of.append(n)
        if ld.get("class") == "linear" and "out_type" in ld:
            ld.pop("out_type")  # the broadcast layout of its sources (RETURNN needs it said; netc's dims are named)
        out[n] = ld
    return out


def import_lattice(imp, layer: str, d: dict, scope: Scope, var: str, full: str, unit: dict, target: Val) -> Val:
    """The unit's loss on the lattice (see the module); the rec layer's value is `target`."""
    losses = [n for n, ld in unit.items() if isinstance(ld, dict) and ld.get("loss")]
    if len(losses) != 1:
        raise Refused(full, "rec", f"a unit trained on the lattice with {len(losses)} losses (one is supported)")
    (loss_layer,) = losses
    ld = unit[loss_layer]
    lfull = f"{full}/{loss_layer}"
    if (
        ld.get("class") != "eval"
        or ld.get("loss") != "as_is"
        or ld.get("loss_opts")
        or ld.get("loss_scale", 1.0) != 1.0
    ):
        raise Refused(
            lfull,
            str(ld.get("class")),
            f"loss {ld.get('loss')!r} on the lattice (the config's RNN-T loss function is supported)",
        )
    srcs = sources(ld)
    if len(srcs) != 3:
        raise Refused(
            lfull, "eval", "a loss function of three sources (log-probabilities, labels, encoder) is supported"
        )
    found = _rnnt_function(imp, ld.get("eval"), lfull)
    encoder = imp._source(d, scope, full)
    frames_of: list[str] = []
    layers = _rewritten(unit, full, frames_of)
    child = imp._child(scope, layers, full, f"{imp._tf_prefix(layer, d, scope)}/rec/", encoder)
    child.lattice = True
    time = [x for x in encoder.dims if imp.dims.is_dynamic(x)]
    for n in frames_of:  # a value of the encoder's frames read at the step: on the lattice, each frame's
        v = imp.get(n, child)
        if [x for x in v.dims if imp.dims.is_dynamic(x)] != time:
            raise Refused(
                f"{full}/{n}", "gather_nd", "position `:i` of a value not over the frames of the rec layer's `from`"
            )
    log_probs = imp.get(_redirect(srcs[0]), child)
    labels = imp.get(_redirect(srcs[1]), child)
    enc = imp.get(_redirect(srcs[2]), child)
    if [x for x in enc.dims if imp.dims.is_dynamic(x)] != time or len(time) != 1:
        raise Refused(lfull, "eval", f"its third source `{srcs[2]}` is not over the frames of the rec layer's `from`")
    if labels.sparse is None or imp.dims.find(labels.sparse) != imp.dims.find(target.sparse):
        raise Refused(lfull, "eval", f"its labels `{srcs[1]}` are not the `choice`'s target")
    classes = [x for x in log_probs.dims if imp.dims.is_static(x)]
    if log_probs.sparse is not None or len(classes) != 1:
        raise Refused(lfull, "eval", f"its log-probabilities `{srcs[0]}` need one class dim")
    n = imp.dims.size(labels.sparse)
    if imp.dims.size(classes[0]) != n + 1:
        raise Refused(
            lfull,
            "eval",
            f"its log-probabilities have {imp.dims.size(classes[0])} classes, not the labels' {n} + blank",
        )
    if imp.dims.find(time[0]) not in {imp.dims.find(x) for x in log_probs.dims}:
        raise Refused(lfull, "eval", "its log-probabilities are not over the encoder's frames")
    fn, blank, why = found
    if why is None and blank != n:
        # warp-transducer reads label k as class k: netc's `rnnt_loss` does so only with the blank last
        why = (
            f"the RNN-T loss with the blank at class {blank} and label k read as class k (label {blank} as the "
            f"blank too), which netc's `rnnt_loss` computes only with the blank last ({n})"
        )
    if why is not None:  # the loss left out, as any loss netc cannot compute (the forward numbers the same)
        # the lattice's log-probabilities an output of the model (RETURNN's layer `<rec>/<source>`): the
        # unit's parameters are the model's, and a loss of the user's own reads them
        if isinstance(log_probs.expr, cst.Name):
            out = log_probs.expr.value
        else:
            out = imp.fresh(f"{layer}_{srcs[0]}")
            imp._emit(scope, out, log_probs.tensor(), f"{layer}/{srcs[0]}")
        imp.outputs[f"{layer}/{srcs[0]}"] = out
        imp.out_vals[out] = Val(name(out), log_probs.dims, log_probs.sparse)
        imp.notes.append(
            f"loss of layer `{lfull}` left out: the config's function `{fn}` computes {why}; the unit is imported as RETURNN trains it on the (frame, label) lattice (the rec layer's "
            f"value, its target, the same forward numbers; the lattice's log-probabilities `{srcs[0]}` an output of "
            "the model): train the model with a loss of your own"
        )
    else:
        imp.imports |= {"rnnt_loss", "mark_as_loss"}
        loss = call(
            "rnnt_loss",
            log_probs.tensor(),
            labels.tensor(),
            axis=imp.dim(classes[0]),
            time_axis=imp.dim(time[0]),
            blank_index=num(blank),
        )
        loss_name = imp._loss_name(loss_layer, "as_is", False)
        comment = f"loss of layer {lfull!r}: the config's RNN-T loss function on the lattice"
        scope.stmts.append(MarkLoss(loss, loss_name, comment=comment))
        imp.loss_names[f"{layer}/{loss_layer}"] = loss_name
        imp.notes.append(
            f"layer `{full}`: a transducer trained full-sum, written as RETURNN's training computes it (the unit's "
            f"layers on the (frame, label) lattice, the loss of its function `{fn}` as netc's `rnnt_loss`); the rec layer's value is its "
            "target (the search's positions, strings and `end` are not computed)"
        )
    imp._emit(scope, var, target.expr, layer)
    return Val(name(var), target.dims, target.sparse)


def _rnnt_function(imp, code, full: str) -> tuple[str, int | None, str | None]:
    """The config's loss function `code`: its name, its blank, and None where it is the RNN-T loss
    of the lattice, else what it computes instead (another loss: left out)."""
    what = code.get("__object__") if isinstance(code, dict) else None
    m = _OBJECT_FUNCTION.match(what) if isinstance(what, str) else None
    tree = _parsed(imp.cfg.path) if m else None
    fn = next((n for n in (tree.body if tree else []) if isinstance(n, ast.FunctionDef) and n.name == m.group(1)), None)
    if fn is None:
        raise Refused(
            full, "eval", f"loss on the lattice computed by {what or repr(code)}: a function of the config is needed"
        )
    imported = {}  # local name -> (module, function)
    for node in ast.walk(fn):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                imported[a.asname or a.name] = (node.module.rsplit(".", 1)[-1], a.name)
    calls = [
        (node, RNNT_FUNCTIONS[imported[node.func.id]])
        for node in ast.walk(fn)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and imported.get(node.func.id) in RNNT_FUNCTIONS
    ]
    if len(calls) != 1:
        used = {c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
        called = sorted({f"{m}.{f}" for k, (m, f) in imported.items() if k in used})
        return (
            fn.name,
            None,
            f"the loss of {', '.join(called) or 'its own code'} (not the RNN-T loss), which netc has no op for",
        )
    node, sign = calls[0]
    # the cost −log p(labels | frames), as `rnnt_loss`'s: warp-transducer's as it is, the log-likelihood
    # of `tf_forward_shifted` negated where it is called
    negated = any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and n.operand is node for n in ast.walk(fn))
    if negated != (sign < 0):
        why = f"`{'-' if negated else ''}{node.func.id}(...)`: the RNN-T log-likelihood, not its cost"
        return fn.name, None, f"{why}, which netc has no op for"
    kw = {k.arg: k.value for k in node.keywords}
    b = kw.get("blank_label", kw.get("blank_index"))
    if isinstance(b, ast.Constant) and isinstance(b.value, int):
        blank = b.value
    elif isinstance(b, ast.Name) and isinstance(imp.cfg.values.get(b.id), int):
        blank = imp.cfg.values[b.id]
    else:
        raise Refused(full, "eval", f"loss function `{fn.name}`: its blank is not a number of the config")
    _check_args(fn, node, full)
    return fn.name, blank, None


def _check_args(fn: ast.FunctionDef, node: ast.Call, full: str) -> None:
    """The call's arguments: source 0's and 1's values, source 2's and 1's lengths (the frames', the labels')."""
    names: dict[str, int] = {}
    for st in ast.walk(fn):
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            v = st.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "source" and v.args:
                if isinstance(v.args[0], ast.Constant):
                    names[st.targets[0].id] = v.args[0].value
            elif isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and isinstance(v.func.value, ast.Name):
                if v.func.attr == "get_sequence_lengths" and v.func.value.id in names:
                    names[st.targets[0].id] = 10 + names[v.func.value.id]

    def root(e):
        while isinstance(e, ast.Call | ast.Attribute):
            e = e.func if isinstance(e, ast.Call) else e.value
        return names.get(e.id) if isinstance(e, ast.Name) else None

    if [root(a) for a in node.args[:4]] != [0, 1, 12, 11]:
        raise Refused(
            full,
            "eval",
            f"loss function `{fn.name}`: its call reads other values than (source 0, source 1, source 2's lengths, "
            "source 1's lengths)",
        )
