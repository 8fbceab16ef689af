"""Layers with losses: `softmax` (logits, then their softmax), its `ce` and `ctc` losses,
`mse` losses, `as_is` losses on any layer, and `sparse_softmax_cross_entropy_with_logits`. A loss of a rec unit
layer stacks its logits in the loop and is marked after it."""

from __future__ import annotations

import math

import libcst as cst

from netc.importer import legacy
from netc.importer.dims import BATCH
from netc.importer.syntax import call, identifier, name, num
from netc.importer.values import Refused, Scope, Val, feature, sources
from netc.importer.writer import Append, Assign, MarkLoss


class LossLayers:
    """Mixed into `Importer` (netc.importer.layers)."""

    def _l_softmax(self, layer, d, scope, var, full) -> Val:
        """Logits (a `linear`), then their softmax; a loss reads the logits."""
        src = self._source(d, scope, full)
        if d.get("loss") == "ctc" and "n_out" not in d and "out_dim" not in d:
            out = self._ctc_dim(d, full)
        elif d.get("loss") == "ctc":
            out = self._out_dim(layer, d, full)
            target = self._target(d, full)
            if self.dims.size(out) != self.dims.size(target.sparse) + 1:
                raise Refused(full, "softmax", "a CTC layer has one class more than its target")
            out = self._ctc_dim(d, full)
        elif "n_out" not in d and "out_dim" not in d and d.get("target"):  # RETURNN: the target's classes
            out = self._target(d, full).sparse
        elif "n_out" not in d and "out_dim" not in d and d.get("loss") in RASR_LOSSES:
            out = self._target({**d, "target": self.cfg.default_target}, full).sparse
            self.old_notes.setdefault(legacy.THEANO_OUTPUT_DIM.format(target=self.cfg.default_target), []).append(full)
        else:
            out = self._out_dim(layer, d, full)
        expr, dims, ref = self._linear_expr(layer, d, scope, full, out, src)
        logits = self.fresh(f"{var}_logits")
        comment = f"layer {layer!r}: logits" if layer != var else None
        scope.stmts.append(Assign([logits], expr, comment=comment, module=ref))
        self.imports.add("softmax")
        self._emit(scope, var, call("softmax", name(logits), axis=self.dim(out)), layer)
        return Val(name(var), dims, logits=Val(name(logits), dims))

    def _ctc_log_probs(self, val: Val, d: dict, full: str, scope) -> Val:
        """Log-probabilities over a dim of the target's classes plus one: that dim is the CTC's
        (`vocab + blank`, the blank last)."""
        feat = feature(val, self.dims)
        ctc = self._ctc_dim(d, full)
        if self.dims.size(feat) != self.dims.size(ctc):
            raise Refused(full, d.get("class", "?"), "a CTC loss needs one class more than its target")
        return self._as_classes(val, ctc, scope, full, classes_root=True)

    def _as_classes(self, val: Val, classes: str, scope, full: str, classes_root: bool = False) -> Val:
        """`val` over `classes`, a dim of its feature dim's size: the two joined into one dim (a
        concatenation's dim its root: its parts fix its name; else the feature dim, or `classes`
        with `classes_root`), or, both concatenations of other
        parts (netc's `concat` makes its own dim), its values read over `classes` (`onto_classes`)."""
        from netc.importer.decoders import onto_classes

        feat = feature(val, self.dims)
        a, b = self.dims.find(feat), self.dims.find(classes)
        if a == b:
            return val
        if self.dims.dims[a].parts and self.dims.dims[b].parts:
            return onto_classes(self, val, classes, scope, f"{identifier(full.rsplit('/', 1)[-1])}_classes")
        if self.dims.dims[b].parts or (classes_root and not self.dims.dims[a].parts):
            a, b = b, a
        self.dims.join(a, b)
        return val

    def _ctc_dim(self, d: dict, full: str) -> str:
        target = self._target(d, full)
        # CTC's blank is a dim of its own, not the dim of size 1 of the model's features (heads)
        if getattr(self, "_blank", None) is None:
            self._blank = self.dims.fresh("blank", 1)
        blank = self._blank
        return self.dims.derived([target.sparse, blank])

    def _target(self, d: dict, full: str) -> Val:
        target = d.get("target")
        if not isinstance(target, str):
            raise Refused(full, d.get("class", "?"), "a loss needs a `target` (an extern_data key)")
        over = getattr(self, "unit_target", None)  # a decoder's: the labels its `choice` reads
        if over is not None and over[0] == target:
            return over[1]
        val = self._input(target[5:] if target.startswith("data:") else target)
        if val.sparse is None:
            raise Refused(full, d.get("class", "?"), f"target `{target}` is not sparse (labels)")
        return val

    def _loss(self, layer: str, d: dict, scope: Scope, val: Val, full: str) -> None:
        kind = d["loss"]
        logits = val.logits
        if kind in ("edit_distance", "bleu") and d.get("class") == "decide":
            return  # an error measure only: RETURNN's `get_value` is None, nothing is trained on it
        if kind == "sampling_loss":  # RETURNN's sampled softmax / NCE loss of a softmax layer
            opts = dict(d.get("loss_opts") or {})
            if opts.get("use_full_softmax"):  # the full softmax's cross entropy, in training too
                kept = {"label_smoothing"} & set(opts)
                d = {**d, "loss": "ce", "loss_opts": {k: opts[k] for k in kept}}
                kind = "ce"
            else:
                self.notes.append(
                    f"loss 'sampling_loss' of layer `{full}` left out: a random estimate of the cross entropy from "
                    "sampled classes (sampled softmax or NCE), which netc does not draw; the layer itself is imported "
                    "(its full softmax: the same forward numbers): train the model with a loss of your own"
                )
                return
        if kind in RASR_LOSSES:
            how = RASR_LOSSES[kind]
            align = (d.get("loss_opts") or {}).get("align_layer")
            if align:
                how += f" (`{align}`)"
            self.notes.append(
                f"loss {kind!r} of layer `{full}` left out: {how}, which netc cannot run; the layer itself is "
                "imported (the same forward numbers): train the model with a loss of your own"
            )
            return
        if kind == "as_is" and scope.rec is None and not d.get("loss_opts") and d.get("loss_scale", 1.0) == 1.0:
            loss_name = self._loss_name(layer, kind, self.is_output(layer, d, scope.rec is None))
            self.imports.add("mark_as_loss")
            comment = f"loss 'as_is' of layer {layer!r}"
            scope.stmts.append(MarkLoss(val.tensor(), loss_name, comment=comment))
            self.loss_names[layer] = loss_name
            return
        if kind == "mse":
            self._mse_loss(layer, d, scope, val, full)
            return
        opts = dict(d.get("loss_opts") or {})
        if kind == "ctc" and logits is None and val.log_probs and opts.get("output_in_log_space"):
            # RETURNN's CTC of log-probabilities (`output_in_log_space`): netc's CTC normalises them
            # again, which leaves log-probabilities as they are
            logits = self._ctc_log_probs(val, d, full, scope)
            d = {**d, "loss_opts": {k: v for k, v in opts.items() if k != "output_in_log_space"}}
        if kind == "ce" and logits is None and d.get("class") != "softmax":
            logits = self._ce_probs(val, d, full, scope)  # probabilities: RETURNN's `input_type: "prob"`
            opts.pop("input_type", None)
        if kind not in ("ce", "ctc") or logits is None:
            what = f"loss {kind!r}" if kind not in ("ce", "ctc") else f"a {kind} loss on a `{d.get('class')}` layer"
            raise Refused(full, d.get("class", "?"), f"{what} not supported (ce and ctc on `softmax` layers are)")
        opts = dict(d.get("loss_opts") or {})
        smoothing = opts.pop("label_smoothing", 0.0)
        focal = opts.pop("focal_loss_factor", 0.0) if kind == "ce" else 0.0
        if not isinstance(focal, int | float) or isinstance(focal, bool) or focal < 0:
            raise Refused(full, d.get("class", "?"), f"focal_loss_factor {focal!r} (a number >= 0 is supported)")
        if focal:
            self._focal = {**getattr(self, "_focal", {}), full: float(focal)}
        bound = opts.pop("fake_upper_bound", None) if kind == "ce" else None
        if bound is not None:  # the loss of each frame at most this, its gradient the loss's own
            if not isinstance(bound, int | float) or isinstance(bound, bool):
                raise Refused(full, d.get("class", "?"), f"fake_upper_bound {bound!r} (a number is supported)")
            self._upper = {**getattr(self, "_upper", {}), full: float(bound)}
        if kind == "ctc":
            opts.pop("beam_width", None)  # decoding only
            opts.pop("use_native", None)  # RETURNN's own implementation of the same loss
            _check_ctc_opts(opts.pop("ctc_opts", None) or {}, full, d.get("class", "?"), normalized=val.log_probs)
        scale = opts.pop("scale", 1.0)  # RETURNN's `loss_scale` is this option (`LayerBase.transform_config_dict`)
        if opts:
            raise Refused(full, d.get("class", "?"), f"loss options {sorted(opts)} not supported")
        if d.get("loss_scale", 1.0) != 1.0 or scale != 1.0:  # the loss's weight in training: its value the same
            self.dropped.setdefault("loss_scale", []).append(full)
        target = self._target(d, full)
        positions = self.dims.is_dynamic(target.sparse) and target.sparse in logits.dims
        out = target.sparse if positions else feature(logits, self.dims)
        if scope.rec is not None:  # stacked in the loop, the loss after it
            what = "probs" if full in getattr(self, "_prob_ce", ()) else "logits"
            lst = self.fresh(f"{scope.names[layer]}_{what}_seq")
            scope.outer.stmts.append(Assign([lst], cst.List([])))
            scope.stmts.append(Append(lst, logits.expr))
            logits = Val(call("stack", name(lst)), (BATCH, scope.time, out))
            self.imports.add("stack")
            scope.losses.append((layer, kind, logits, target, out, smoothing, full))
            return
        is_output = self.is_output(layer, d, scope.rec is None)
        self._mark_loss(layer, kind, logits, target, out, smoothing, full, self.top, is_output)

    def _ce_probs(self, val: Val, d: dict, full: str, scope) -> Val:
        """A `ce` loss on a layer that is not a `softmax` (an `eval` of log-probabilities'
        `tf.exp`, a fused model's distribution): RETURNN reads its values as probabilities
        (`input_type: "prob"`, its default) and takes -log(max(p(target), 1e-20)) of them, not
        renormalised. Marked for `_mark_loss`; the probabilities stand where logits would."""
        opts = d.get("loss_opts") or {}
        cls = d.get("class", "?")
        if opts.get("input_type", "prob") != "prob":
            raise Refused(full, cls, f"a ce loss on a layer of probabilities with input_type {opts['input_type']!r}")
        ls = opts.get("label_smoothing", 0.0)
        if not isinstance(ls, int | float) or isinstance(ls, bool) or not 0 <= ls < 1:
            raise Refused(full, cls, f"label_smoothing {ls!r} (a number in [0, 1) is supported)")
        if val.sparse is not None or val.is_list:
            raise Refused(full, cls, "a ce loss on labels (probabilities over the target's classes are supported)")
        target = self._target(d, full)
        if self.dims.is_dynamic(target.sparse) and val.dims == (BATCH, target.sparse):
            # probabilities of positions (`softmax_over_spatial` over the frames a position choice
            # takes its target's classes from: the latent attention configs' `t_weights1`)
            self._prob_ce = {*getattr(self, "_prob_ce", set()), full}
            return val
        feat = feature(val, self.dims)
        if feat is None or self.dims.size(feat) != self.dims.size(target.sparse):
            raise Refused(full, cls, "a ce loss on values whose feature dim is not the target's classes")
        val = self._as_classes(val, target.sparse, scope, full)
        self._prob_ce = {*getattr(self, "_prob_ce", set()), full}
        return val

    def _smoothed_prob_ce(self, probs: Val, target: Val, out: str, ls: float):
        """RETURNN's label-smoothed cross entropy of probabilities (`smoothing_cross_entropy` with
        `logits_are_normalized`): -sum(q * log(max(p, 1e-20))) over the classes, q the target's
        1 - ls and ls / (V - 1) elsewhere, minus its constant best value (as RETURNN subtracts it)."""
        v = self.dims.size(out)
        conf, low = 1.0 - ls, ls / max(v - 1, 1)
        best = -(conf * math.log(conf) + (v - 1) * low * math.log(low + 1e-20))
        q = cst.BinaryOperation(
            cst.BinaryOperation(call("one_hot", target.expr), cst.Multiply(), num(conf - low)),
            cst.Add(),
            num(low),
            lpar=[cst.LeftParen()],
            rpar=[cst.RightParen()],
        )
        logp = call("log", call("maximum", probs.expr, num(1e-20)))
        summed = call("reduce_sum", cst.BinaryOperation(q, cst.Multiply(), logp), axis=self.dim(out))
        return cst.BinaryOperation(cst.UnaryOperation(cst.Minus(), summed), cst.Subtract(), num(best))

    def _mse_loss(self, layer: str, d: dict, scope: Scope, val: Val, full: str) -> None:
        """RETURNN's `mse`: per frame the mean over the features of (output - target)^2 (a sparse
        target as its one-hot); the layer's output its value (a softmax's as it is)."""
        cls = d.get("class", "?")
        if scope.rec is not None or d.get("loss_opts"):
            raise Refused(full, cls, "loss 'mse' in a rec unit or with loss_opts not supported")
        target = d.get("target")
        if not isinstance(target, str):
            raise Refused(full, cls, "a loss needs a `target` (an extern_data key)")
        tgt = self._input(target[5:] if target.startswith("data:") else target)
        out = feature(val, self.dims)
        if tgt.sparse is not None:
            if self.dims.size(tgt.sparse) != self.dims.size(out):
                raise Refused(full, cls, "loss 'mse' on labels of another number of classes than its features")
            self.imports.add("one_hot")
            y, tdims = call("one_hot", tgt.tensor()), (*tgt.dims, tgt.sparse)
        else:
            y, tdims = tgt.tensor(), tgt.dims
        time = [x for x in val.dims if self.dims.is_dynamic(x)]
        ttime = [x for x in tdims if self.dims.is_dynamic(x)]
        tfeat = [x for x in tdims if self.dims.is_static(x)]
        feats = [x for x in val.dims if self.dims.is_static(x)]
        if len(time) != len(ttime) or len(time) > 1 or len(feats) != 1 or len(tfeat) != 1:
            raise Refused(full, cls, "loss 'mse' needs one feature dim and one time dim (or none) in output and target")
        if self.dims.size(tfeat[0]) != self.dims.size(out):
            raise Refused(full, cls, "loss 'mse' on a target of another feature size")
        if time:
            self.dims.join(time[0], ttime[0])  # RETURNN needs the same lengths
        self.dims.join(out, tfeat[0])  # the same features, under one name
        if d.get("loss_scale", 1.0) != 1.0:  # the loss's weight in training: its value the same
            self.dropped.setdefault("loss_scale", []).append(full)
        diff = cst.BinaryOperation(val.tensor(), cst.Subtract(), y, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        self.imports |= {"reduce_mean", "mark_as_loss"}
        value = call("reduce_mean", cst.BinaryOperation(diff, cst.Power(), num(2)), axis=self.dim(out))
        loss_name = self._loss_name(layer, "mse", self.is_output(layer, d, True))
        scope.stmts.append(MarkLoss(value, loss_name, comment=f"loss 'mse' of layer {layer!r}"))
        self.loss_names[layer] = loss_name

    def _loss_name(self, layer: str, kind: str, is_output) -> str:
        """The layer's name (`<layer>_<kind>` where it is an output too)."""
        base = identifier(layer.replace("/", "_")) + (f"_{kind}" if is_output else "")
        loss_name, i = base, 2
        outputs = {self.top.names[n] for n, ld in self.cfg.network.items() if self.is_output(n, ld)}
        while loss_name in self.loss_names.values() or loss_name in outputs:
            loss_name, i = f"{base}_{i}", i + 1
        return loss_name

    def _l_sparse_softmax_cross_entropy_with_logits(self, layer, d, scope, var, full) -> Val:
        logits, target = self.get(d.get("logits"), scope), self.get(d.get("targets"), scope)
        axis = d.get("axis")
        if not isinstance(axis, dict) or target.sparse is None:
            raise Refused(full, d["class"], "needs `axis` as a dim tag and labels as `targets`")
        out = self.dims.tag(axis["__dim__"])
        self.imports.add("cross_entropy")
        self._emit(scope, var, call("cross_entropy", logits.tensor(), target.tensor(), axis=self.dim(out)), layer)
        return Val(name(var), tuple(x for x in logits.dims if self.dims.find(x) != self.dims.find(out)))

    def _mark_loss(self, layer, kind, logits: Val, target: Val, out: str, smoothing, full, scope, is_output) -> None:
        """`mark_as_loss` of the loss of `kind` on the logits."""
        loss_name = self._loss_name(layer, kind, is_output)
        if kind == "ce":
            time = [x for x in logits.dims if self.dims.is_dynamic(x) and x != out]  # (not positions' class dim)
            ttime = [x for x in target.dims if self.dims.is_dynamic(x)]
            if len(time) != len(ttime) or len(time) > 1:  # none: a loss per sequence (a speaker's label)
                raise Refused(full, "softmax", "a ce loss needs one time dim in its output and target, or none")
            if time:
                self.dims.join(time[0], ttime[0])  # RETURNN needs the same lengths
            p = None
            if full in getattr(self, "_prob_ce", ()):  # probabilities: -log(max(p(target), 1e-20))
                self.imports |= {"log", "maximum", "one_hot", "reduce_sum"}
                picked = cst.BinaryOperation(logits.expr, cst.Multiply(), call("one_hot", target.expr))
                p = call("reduce_sum", picked, axis=self.dim(out))
                value = cst.UnaryOperation(cst.Minus(), call("log", call("maximum", p, num(1e-20))))
                if smoothing:
                    value = self._smoothed_prob_ce(logits, target, out, float(smoothing))
            else:
                self.imports.add("cross_entropy")
                kw = {"axis": self.dim(out)}
                if smoothing:
                    kw["label_smoothing"] = num(float(smoothing))
                value = call("cross_entropy", logits.expr, target.expr, **kw)
            if focal := getattr(self, "_focal", {}).get(full):  # RETURNN: times (1 - p(target)) ** factor
                if p is None:  # p(target): of the logits themselves (without label smoothing)
                    self.imports.add("exp")
                    ce = call("cross_entropy", logits.expr, target.expr, axis=self.dim(out))
                    p = call("exp", cst.UnaryOperation(cst.Minus(), ce))
                weight = cst.BinaryOperation(
                    cst.BinaryOperation(num(1.0), cst.Subtract(), p, lpar=[cst.LeftParen()], rpar=[cst.RightParen()]),
                    cst.Power(),
                    num(focal),
                )
                value = cst.BinaryOperation(value, cst.Multiply(), weight)
            if (bound := getattr(self, "_upper", {}).get(full)) is not None:
                # RETURNN's `minimum_with_identity_grad`: min(loss, bound) forward, the loss's gradient
                self.imports |= {"minimum", "stop_gradient"}
                over = cst.BinaryOperation(value, cst.Subtract(), call("minimum", value, num(bound)))
                value = cst.BinaryOperation(value, cst.Subtract(), call("stop_gradient", over))
        else:
            self.imports.add("ctc_loss")
            value = call("ctc_loss", logits.expr, target.expr, axis=self.dim(out))
        self.imports.add("mark_as_loss")
        scope.stmts.append(MarkLoss(value, loss_name, comment=f"loss {kind!r} of layer {layer!r}"))
        self.loss_names[layer] = loss_name


# losses computed by RASR (through Sprint) from an alignment netc cannot make, or from a search's
# hypotheses in training: left out, with a note
RASR_LOSSES = {
    "via_layer": "its gradient is that of another layer's alignment, RASR's through Sprint (`fast_bw`)",
    "fast_bw": "its alignment is RASR's full-sum Baum-Welch through Sprint",
    "sprint": "it is computed by RASR through Sprint",
}
# losses of a search's hypotheses in training (minimum-WER training on `extra.search:output`): the
# layer, built only for its loss, is left out with it (its search is RETURNN's training schedule)
SEARCH_LOSSES = {
    "expected_loss": "the expected error of a search's n-best hypotheses in training (minimum-WER training)"
}


def reads_search(net: dict, layer: str) -> str | None:
    """The `extra.search:` layer that `layer` reads through its `from`s (a search in training), or None."""
    seen, todo = set(), [layer]
    while todo:
        n = todo.pop()
        if n in seen or not isinstance(net.get(n), dict):
            continue
        seen.add(n)
        for src in sources(net[n]):
            if isinstance(src, str) and src.startswith("extra.search:"):
                return src
            if isinstance(src, str):
                todo.append(src)
    return None


# `tf.nn.ctc_loss` options of RETURNN's `ctc_opts` that give netc's loss: TF's defaults, and
# `ignore_longer_outputs_than_inputs` (it only changes sequences whose labels do not fit).
_CTC_OPTS = {"preprocess_collapse_repeated": False, "ctc_merge_repeated": True}


def _check_ctc_opts(ctc_opts: dict, full: str, cls: str, normalized: bool = False) -> None:
    """`normalized`: of log-probabilities, whether the loss normalises them again changes nothing,
    nor does where its gradient is taken."""
    for key, value in ctc_opts.items():
        if key == "ignore_longer_outputs_than_inputs" or (key in _CTC_OPTS and value == _CTC_OPTS[key]):
            continue
        if normalized and key in ("logits_normalize", "grad_wrt_softmax_in"):
            continue
        raise Refused(full, cls, f"ctc_opts {key}={value!r} not supported (netc's CTC loss is TF's default)")
