"""A `rec` unit with a `choice` layer (a decoder) as a netc decoder loop:

    for _ in range(<bound>):
        ...
        output = choice(output_prob_logits, target=classes, beam=12)
        ...
        if end(output == 0):
            break

`choice` is the target's label in training (teacher forcing: the loop runs over the target's
frames) and a beam search's when searching, as RETURNN's `choice`; the bound is the rec layer's
`max_seq_len` (`max_len_from('base:x')` with integer arithmetic, TF's int32 of its float times a factor
(`n * p // q`), or a number).

A rec layer over a sequence's frames (`from` an encoder, no `end` layer) whose `output` is a
`choice` is an RNA-style transducer: one class per frame. It becomes netc's form of that decoder
(docs/language.md, Transducers): a step reads its frame as a one-hot `dot` at its position and
the loop ends after each sequence's last frame,

    positions = range_over(time, dtype="float32")
    frames = reduce_max(positions, axis=time) + 1.0
    pos = zeros(batch)
    for _ in range(encoder.max_seq_len):
        encoder_t = dot(cast(positions == pos, "float32"), encoder, reduce=time)
        ...
        pos = pos + 1.0
        if end(pos >= frames):
            break
"""

from __future__ import annotations

import ast
import math
import struct
from fractions import Fraction

import libcst as cst

from netc.importer.dims import BATCH
from netc.importer.lattice import import_lattice, lattice_unit
from netc.importer.syntax import Expr, binop, call, compare, literal, name, num
from netc.importer.values import Refused, Scope, Val, registered_layer, sources
from netc.importer.writer import Assign, EndIf, Loop


def import_decoder(imp, layer, d, scope: Scope, var, full, unit: dict, inner: Scope, choices: list[str]) -> Val:
    from netc.importer.loops import mark_unit_losses, unit_body

    if "output" not in choices:
        raise Refused(full, "rec", f"a unit whose `choice` is not its `output` ({choices[0]})")
    if imp.searched is not None:  # a decoder searched over another's result (a triangle model)
        raise Refused(
            full,
            "rec",
            f"a decoder with `choice` besides `{imp.searched}`: a netc network searches in one loop",
        )
    imp.searched = layer
    ch = unit["output"]
    # several choices (hard attention: a position, then the label): each its own target, all over
    # the loop's dim, one beam (docs/language.md, "Several choices in one step")
    targets = [unit[c].get("target") for c in choices]
    if len(set(targets)) < len(targets):
        raise Refused(
            full,
            "rec",
            f"{len(choices)} `choice`s ({', '.join(choices)}) of one target: netc's choices each take their own",
        )
    beams = {unit[c].get("beam_size", 1) for c in choices}
    if len(beams) > 1:
        raise Refused(
            full,
            "rec",
            f"choices with other beam sizes ({', '.join(choices)}): netc's choices of a step share one beam",
        )
    rec_targets = d.get("target")
    if isinstance(rec_targets, list | tuple) and len(choices) > 1 and set(rec_targets) <= set(targets):
        rec_targets = None  # each choice's own target: the loop's length is any of theirs (one dim)
    if rec_targets not in (None, ch.get("target")):
        raise Refused(full, "rec", f"its target {d.get('target')!r} is not its choice's {ch.get('target')!r}")
    if d.get("size_target") not in (None, *targets):  # a choice's own: the length it has anyway
        raise Refused(full, "rec", f"size_target {d['size_target']!r}: another length than its choice's target's")
    if len(choices) > 1 and sources(d):
        raise Refused(full, "rec", f"a decoder over the frames of `from` with {len(choices)} `choice`s")
    end = unit.get("end")
    if not isinstance(ch.get("target"), str):
        raise Refused(f"{full}/output", "choice", "`choice` needs a `target` (an extern_data key)")
    key, reframed = _input_labels(imp, ch["target"], f"{full}/output")
    target = imp._target(ch, f"{layer}/output")
    if reframed is not None:  # the alignment itself, over its own frames (as many as the base's)
        labels = imp._input(key)
        if labels.sparse is None or imp.dims.size(labels.sparse) != imp.dims.size(target.sparse):
            raise Refused(
                f"{full}/output",
                "choice",
                f"target {ch['target']!r}: the classes of input `{key}` renamed to another number of classes",
            )
        target = labels
    dyn = [x for x in target.dims if imp.dims.is_dynamic(x)]
    inner.time = dyn[0]
    inner.step_targets = frozenset(t for t in targets if isinstance(t, str))  # `data:<target>` by the step
    if (
        sources(d)
        and lattice_unit(unit)
        and (end is not None or reframed is None and not _over_frames(imp, d, scope, full, target))
    ):
        # trained full-sum: RETURNN's loop optimisation computes the unit on the (frame, label) lattice
        return import_lattice(imp, layer, d, scope, var, full, unit, target)
    if sources(d):  # one class per frame of `from`
        if end is not None:
            raise Refused(
                full,
                "rec",
                "a decoder over the frames of `from` with an `end` layer (it ends with the frames; RNN-T's unit, "
                "a step per label or blank until the `end` on its frame position, as RETURNN searches it: netc's "
                "decoder over frames takes one class per frame; trained full-sum, a unit whose label side is a "
                "`masked_computation` with `masked_from` is imported on the (frame, label) lattice)",
            )
        bound, step, tail = _frames(imp, d, scope, var, full, inner, reframed)
        comment = f"layer {layer!r}: a decoder, one class per frame"
    else:
        if not isinstance(end, dict):
            raise Refused(full, "rec", "a decoder without an `end` layer")
        if d.get("include_eos"):
            raise Refused(full, "rec", "include_eos on a decoder with an `end` layer (its last label is the end's)")
        bound, step = _bound(imp, d, scope, full), []
        tail = [EndIf(_end(imp, end, inner, f"{layer}/end"))]
        comment = f"layer {layer!r}: a decoder, one step per label"
    imp.loops[layer] = inner
    scope.stmts.append(Assign([var], cst.List([])))
    imp.unit_target = (ch["target"], target)  # the unit's losses on it read the labels the choice does
    try:
        out, body = unit_body(imp, layer, scope, inner, unit, var)
    finally:
        imp.unit_target = None
    # (`inner.step_var`: the step, where a layer reads a target's frame by it)
    body = step + imp.count_steps(layer, body) + tail
    scope.stmts.append(Loop([inner.step_var or "_"], call("range", bound), body, comment=comment))
    mark_unit_losses(imp, layer, inner, scope)
    return Val(name(var), (*target.dims[:1], inner.time), out.sparse, is_list=True)


def choice(imp, layer: str, d: dict, scope: Scope, var: str, full: str) -> Val:
    # (`import_decoder` checked that the unit's `output` is one of its choices)
    if scope.rec is None:
        raise Refused(full, "choice", "`choice` only in a rec unit")
    imp._search_only(d, full)
    if d.get("search") not in (None, False):  # a search in training (`extra.search:`)
        raise Refused(full, "choice", f"search {d['search']!r}: a search in training")
    if d.get("search") is False:  # the config's value for its task `train` (`task != "train"`)
        imp.option_notes.setdefault("search", []).append(full)
    srcs = sources(d)
    if len(srcs) != 1:
        raise Refused(full, "choice", "`choice` of one `softmax` layer")
    probs = imp.get(srcs[0], scope)
    input_type = d.get("input_type", "prob")
    if input_type not in ("prob", "log_prob"):
        raise Refused(full, "choice", f"input_type {input_type!r} (prob and log_prob are supported)")
    target = imp._target(d, full)  # an input's labels (`import_decoder`), or computed ones
    # a position: probabilities over the frames its target's classes are (a `softmax_over_spatial`,
    # the latent attention configs' `t0`), chosen as they are (netc's `input_type="prob"`)
    position = imp.dims.is_dynamic(target.sparse) and probs.sparse is None and probs.dims == (BATCH, target.sparse)
    if input_type == "prob" and probs.logits is None and not position:
        raise Refused(full, "choice", f"`choice` of `{srcs[0]}`, not a `softmax` layer")
    feat = probs.dims[-1] if probs.dims else None
    if input_type == "log_prob" and probs.sparse is None and feat is not None and imp.dims.is_static(feat):
        if imp.dims.size(feat) == imp.dims.size(target.sparse):  # the target's classes (a concatenation's)
            probs = imp._as_classes(probs, target.sparse, scope, full)
    same = bool(probs.dims) and imp.dims.find(probs.dims[-1]) == imp.dims.find(target.sparse)
    if input_type == "log_prob" and (probs.sparse is not None or not same):
        raise Refused(full, "choice", f"`choice` of `{srcs[0]}`, not log-probabilities over the target's classes")
    if d.get("length_normalization", True) is not True and d.get("length_normalization") is not False:
        raise Refused(full, "choice", "length_normalization other than True/False")
    beam = d.get("beam_size", 1)
    if not isinstance(beam, int) or beam < 1:
        raise Refused(full, "choice", f"beam_size {beam!r}")
    kwargs: dict[str, Expr] = {"target": target.expr, "beam": num(beam)}
    if d.get("length_normalization", True) is False:
        kwargs["length_normalization"] = literal(False)
    if input_type == "log_prob":  # scores the config normalised itself (a fused LM): summed as they are
        kwargs["input_type"] = literal("log_prob")
    if position and input_type == "prob":
        kwargs["input_type"] = literal("prob")
    scores = probs.logits.tensor() if input_type == "prob" and not position else probs.tensor()
    scale = d.get("prob_scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, int | float) or scale <= 0:
        raise Refused(full, "choice", f"prob_scale {scale!r} (a positive number)")
    if scale != 1.0:  # RETURNN's search scores the labels' log-probabilities times it: scaled log-probabilities
        if input_type == "prob" and not position:
            imp.imports.add("log_softmax")
            scores = call("log_softmax", scores, axis=imp.dim(target.sparse))
        elif input_type == "prob":
            imp.imports.add("log")
            scores = call("log", scores)
        scores = binop("*", scores, num(float(scale)))
        kwargs["input_type"] = literal("log_prob")
    imp.imports.add("choice")
    imp._emit(scope, var, call("choice", scores, **kwargs), layer)
    return Val(name(var), probs.dims[:1], target.sparse)


def _input_labels(imp, key: str, full: str) -> tuple[str, dict | None]:
    """Target `key` as an input's labels: the input's key and the `reinterpret_data` with
    `size_base` on the way (the alignment read over the encoder's frames: its labels as they are,
    one per frame of the base), None where there is none. The way is an `extern_data` input, or a
    layer registered as one (`register_as_extern_data`) that copies such: a `copy`, an identity
    `eval`, a `reinterpret_data` that only renames (`set_sparse`, `set_sparse_dim` with as many
    classes, `size_base`, `enforce_batch_major`), through `data:` keys. Anything else changes the
    labels: refused, naming the layer."""
    net, reframed, seen = imp.cfg.network, None, set()
    while (key := key.removeprefix("data:")) not in imp.cfg.inputs:
        layer = registered_layer(net, key)
        if layer is None or key in seen:
            raise Refused(full, "choice", f"target {key!r}: neither an input nor a layer's registered value")
        seen.add(key)
        while not layer.startswith("data:"):
            ld = net.get(layer)
            srcs = sources(ld) if isinstance(ld, dict) else []
            cls = ld.get("class") if isinstance(ld, dict) else None
            why = _changes_labels(imp, ld) if len(srcs) == 1 and isinstance(srcs[0], str) else "not one input"
            if why:
                raise Refused(
                    full,
                    "choice",
                    f"target {key!r}: layer `{layer}` ({cls}) on its way from an input {why} (netc's `choice` "
                    "trains on an input's labels as they are)",
                )
            if cls == "reinterpret_data" and "size_base" in ld:
                if reframed is not None:
                    raise Refused(full, "choice", f"target {key!r}: `size_base` twice on its way from an input")
                reframed = ld
            layer = srcs[0]
        key = layer
    return key, reframed


_RENAMES = {"class", "from", "set_sparse", "set_sparse_dim", "size_base", "enforce_batch_major"}


def _changes_labels(imp, ld: dict) -> str | None:
    """How layer `ld` on a target's way changes its labels, None where it keeps them."""
    cls = ld.get("class")
    if cls == "copy" or (cls == "eval" and str(ld.get("eval")).strip() == "source(0)"):
        return None
    if cls != "reinterpret_data":
        return "computes other labels"
    if set(ld) - _RENAMES - {"register_as_extern_data", "trainable", "is_output_layer"}:
        return f"reinterprets them by {sorted(set(ld) - _RENAMES)}"
    if ld.get("set_sparse", True) is not True:
        return "makes them dense (set_sparse False)"
    return None


def onto_classes(imp, val: Val, classes: str, scope: Scope, var: str) -> Val:
    """Scores over a concatenation's dim (`label_log_prob` and `blank_log_prob` side by side: the
    transducer setups' `output_log_prob`) read as scores over the target's classes of the same
    size, in order, as RETURNN reads them: `reduce_sum(split_dims(x, axis=a+b, dims=(one,
    classes)), axis=one)`, each value kept (the one of a size-1 dim). `val` itself otherwise."""
    last = val.dims[-1] if val.dims else None
    if last is None or not imp.dims.is_static(last) or not imp.dims.dims[imp.dims.find(last)].parts:
        return val
    if imp.dims.size(last) != imp.dims.size(classes) or classes in val.dims:
        return val
    one = imp.dims.static(1, "one")
    split = call(
        "split_dims",
        val.tensor(),
        axis=imp.dim(last),
        dims=cst.Tuple([cst.Element(imp.dim(one)), cst.Element(imp.dim(classes))]),
    )
    imp.imports |= {"split_dims", "reduce_sum"}
    var = imp.fresh(var)
    comment = "the concatenated scores as the target's classes"
    scope.stmts.append(Assign([var], call("reduce_sum", split, axis=imp.dim(one)), comment=comment))
    return Val(name(var), (*val.dims[:-1], classes), None, log_probs=val.log_probs)


def _frames(
    imp, d: dict, scope: Scope, var: str, full: str, inner: Scope, reframed: dict | None
) -> tuple[Expr, list, list]:
    """A decoder over the frames of the rec layer's `from`: the loop's bound, the statement that
    reads the step's frame (`data:source`), and the position's count with the `end` after the last
    frame; the positions and frame counts are written before the loop. The target an alignment of
    its own time dim read over `from`'s frames (`reframed`, its `size_base` of `from`'s time dim):
    training's loop runs over the alignment's frames, one per frame of `from`, as RETURNN's."""
    src = imp._source(d, scope, full)
    axes = [x for x in src.dims if imp.dims.is_dynamic(x)]
    if src.sparse is not None or len(axes) != 1:
        raise Refused(full, "rec", "a decoder over a `from` that is not one sequence of vectors")
    axis = axes[0]
    base = imp.get(reframed["size_base"], imp.top) if reframed and isinstance(reframed["size_base"], str) else None
    based = base is not None and any(imp.dims.find(x) == imp.dims.find(axis) for x in base.dims)
    if imp.dims.find(axis) != imp.dims.find(inner.time) and not based:
        raise Refused(
            full,
            "rec",
            "a decoder over the frames of `from` whose `choice` target is over another time dim (full-sum "
            "training: the target the label sequence, not one label per frame; RETURNN's loop optimisation "
            "computes the (frame, label) lattice for the config's loss function, netc's decoder over frames "
            "trains on a frame-level alignment)",
        )
    # `max_seq_len` is left out: without an `end` layer RETURNN's loop runs over the frames (or the
    # target's) and reads the bound only to unroll
    if isinstance(src.expr, cst.Name) and not src.is_list:
        seq = src.expr
    else:
        seq = name(imp.fresh(f"{var}_frames_of"))
        scope.stmts.append(Assign([seq.value], src.tensor()))
    positions, frames, pos = (imp.fresh(f"{var}_{n}") for n in ("positions", "frames", "pos"))
    imp.imports |= {"range_over", "reduce_max", "zeros", "dot", "cast", "end"}
    first = Assign(
        [positions], call("range_over", imp.dim(axis), dtype=literal("float32")), comment="each frame's position"
    )
    if d.get("include_eos") is not True:
        why = (
            "without include_eos: True, RETURNN's search also scores the step after a shorter sequence's "
            "last frame (its padding); netc's decoder ends with the frames, as RETURNN's with include_eos"
        )
        imp.warnings.append(Refused(full, "rec", why))
        first.note = f"warning: layer {full!r}: {why}"
    scope.stmts += [
        first,
        Assign([frames], binop("+", call("reduce_max", name(positions), axis=imp.dim(axis)), num(1.0))),
        Assign([pos], call("zeros", imp.dim(BATCH)), comment="the step's frame"),
    ]
    frame = imp.fresh(f"{seq.value}_t")
    hit = compare("==", name(positions), name(pos))
    read = call("dot", call("cast", hit, literal("float32")), seq, reduce=imp.dim(axis))
    inner.frame = Val(name(frame), tuple(x for x in src.dims if x != axis))
    count = Assign([pos], binop("+", name(pos), num(1.0)))
    done = compare(">=", name(pos), name(frames))
    return cst.Attribute(seq, name("max_seq_len")), [Assign([frame], read, comment="data:source")], [count, EndIf(done)]


def _end(imp, d: dict, inner: Scope, full: str) -> Expr:
    srcs = sources(d)
    ok = d.get("class") == "compare" and d.get("kind", "equal") == "equal" and len(srcs) == 1
    value = d.get("value")
    known = {"class", "from", "kind", "value", "trainable", "is_output_layer"}  # (nothing to train, an output)
    if not ok or not isinstance(value, int) or isinstance(value, bool) or set(d) - known:
        raise Refused(full, str(d.get("class")), "`end` other than `compare` of one layer with an integer `value`")
    val = imp.get(srcs[0], inner)
    return compare("==", val.expr, num(value))


_EXACT_BELOW = 1 << 16  # the lengths for which a factor's integer form is checked


def _exact_factor(f: float) -> Fraction | None:
    """p / q (q at most 1000) where TF's `int32(float32(n) * float32(f))` is `n * p // q` for every
    length n below `_EXACT_BELOW` (checked for all of them); None if there is none."""
    if not f > 0 or not math.isfinite(f):
        return None
    frac = Fraction(f).limit_denominator(1000)
    p, q, f32 = frac.numerator, frac.denominator, _float32(f)
    # float32 products as TF computes them: the double product of two float32s is exact, rounded once
    exact = all(int(_float32(_float32(n) * f32)) == n * p // q for n in range(_EXACT_BELOW))
    return frac if exact else None


def _float32(x: float) -> float:
    """`x` rounded to float32 (round to nearest even, as numpy's and TF's casts)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def _float_scaled(node: ast.AST) -> tuple[ast.AST, float] | None:
    """`tf.to_int32(tf.to_float(n) * f)` (or `tf.cast(..., tf.int32)`, `tf.cast(n, tf.float32)`, f on
    either side): (n, f)."""

    def cast_of(n: ast.AST, to: tuple[str, ...], dtype: str) -> ast.AST | None:
        if not isinstance(n, ast.Call):
            return None
        fn = ast.unparse(n.func)
        if fn in to and len(n.args) == 1 and not n.keywords:
            return n.args[0]
        if fn == "tf.cast":
            dt = n.args[1] if len(n.args) == 2 else {k.arg: k.value for k in n.keywords}.get("dtype")
            if len(n.args) in (1, 2) and dt is not None and ast.unparse(dt) in (f"tf.{dtype}", repr(dtype)):
                return n.args[0]
        return None

    arg = cast_of(node, ("tf.to_int32",), "int32")
    if not isinstance(arg, ast.BinOp) or not isinstance(arg.op, ast.Mult):
        return None
    for a, b in ((arg.left, arg.right), (arg.right, arg.left)):
        inner = cast_of(a, ("tf.to_float",), "float32")
        if inner is not None and isinstance(b, ast.Constant) and type(b.value) in (int, float):
            return inner, b.value
    return None


def _bound(imp, d: dict, scope: Scope, full: str) -> Expr:
    """The rec layer's `max_seq_len` as a loop bound."""
    spec = d.get("max_seq_len")
    if isinstance(spec, int) and not isinstance(spec, bool) and spec > 0:
        return num(spec)
    if not isinstance(spec, str):
        raise Refused(full, "rec", f"max_seq_len {spec!r} (a decoder needs `max_len_from('base:x')` or a number)")
    try:
        tree = ast.parse(spec, mode="eval").body
    except SyntaxError:
        tree = None

    def conv(node) -> Expr:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return num(node.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mult):
            op = cst.Add() if isinstance(node.op, ast.Add) else cst.Multiply()
            return cst.BinaryOperation(conv(node.left), op, conv(node.right))
        scaled = _float_scaled(node)
        if scaled is not None:  # TF's int32 of float32(n) * f: n * p // q where f is p / q exactly
            inner, f = scaled
            frac = _exact_factor(f)
            if frac is not None:
                inner_expr = conv(inner)
                if isinstance(inner_expr, cst.BinaryOperation):
                    inner_expr = inner_expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                out = cst.BinaryOperation(inner_expr, cst.Multiply(), num(frac.numerator))
                return (
                    out if frac.denominator == 1 else cst.BinaryOperation(out, cst.FloorDivide(), num(frac.denominator))
                )
            raise Refused(
                full,
                "rec",
                f"max_seq_len {spec!r}: the factor {f!r} (one whose TF product, cast down, is `n * p // q` for "
                f"every length n below {_EXACT_BELOW}, with q at most 1000, is)",
            )
        is_from = isinstance(node, ast.Call) and ast.unparse(node.func) == "max_len_from" and len(node.args) == 1
        arg = node.args[0] if is_from else None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            # RETURNN reads it in the rec layer's network: `base:x` (its older meaning) and `x` alike
            ref = arg.value.removeprefix("base:")
            target = d.get("target")
            if isinstance(target, str) and ref in (f"data:{target}", target):
                raise Refused(
                    full,
                    "rec",
                    f"max_seq_len {spec!r}: a bound of the decoder's own target `{target}` (a search in training's; "
                    "netc's search reads no target: a config's bound for recognition, as `--set task=search` "
                    "gives, is imported)",
                )
            val = imp.get(ref, scope)
            if isinstance(val.expr, cst.Name) and not val.is_list:
                return cst.Attribute(val.expr, name("max_seq_len"))
        raise Refused(full, "rec", f"max_seq_len {spec!r} (`max_len_from('base:x')`, integer `*`/`+`, are supported)")

    if tree is None:
        raise Refused(full, "rec", f"max_seq_len {spec!r} is not an expression")
    return conv(tree)


def _over_frames(imp, d: dict, scope: Scope, full: str, target: Val) -> bool:
    """Whether the `choice`'s target is over the frames of the rec layer's `from`."""
    src = imp._source(d, scope, full)
    frames = {imp.dims.find(x) for x in src.dims if imp.dims.is_dynamic(x)}
    return any(imp.dims.find(x) in frames for x in target.dims if imp.dims.is_dynamic(x))
