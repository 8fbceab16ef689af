"""The results seam of a loop's `rec` layer (`loops.RecLowering`): each stack and value read
after the loop as the outer block reads it (`rec/<layer>` and `rec_last_output`; at the top, a
loop run over its own axis trims its stacks; in a unit, a batch-major stack or a gathered last
frame), the unit's `output`, and the collocated copies of an outer unit's layers an inner unit
reads. The rules are in docs/design.md, "How loops are lowered to RETURNN"."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netc.emit_tf.loop_rules import outer_unit_reads, reads_prev, rename_outer_reads
from netc.errors import CompileError
from netc.ir.model import Value
from netc.naming import Code

if TYPE_CHECKING:
    from netc.emit_tf.loops import RecLowering

# (the body value, or a held value's state layer; the result after the loop; its name; its kind:
# "state", "stack", "last" or "held")
Result = tuple[int | str, Value, str, str]


def lower_results(r: RecLowering) -> None:
    n, outer, unit = r.n, r.outer, r.unit
    results: list[Result] = [
        (c.next, c.out, r.carry_layers[c.inner.id], "state") for c in n.carries if c.out is not None
    ]
    results += [(s.value, s.out, s.name, "stack") for s in n.stacks]
    results += [(ll.value, ll.out, ll.name, "last") for ll in n.lasts if not ll.after_end]
    results += [(r.held_layers[ll.out.id], ll.out, ll.name, "held") for ll in n.lasts if ll.after_end]
    if outer.in_unit and len(results) != 1:
        raise CompileError(
            n.span,
            "RETURNN target: a loop inside another loop can give one result (a stacked list "
            "or one variable read after it); split it into several loops",
        )
    result_layers: list[str] = []
    repeated: dict[int, str] = {}  # a value no step changes -> its layer that each step computes
    for value, out, hint, kind in results:
        name, kind = _step_layer(r, value, hint, kind, repeated)
        result_layers.append(name)
        r.em.values[out.id] = out
        if outer.in_unit:
            ref = _in_unit(r, name, kind, out)
        elif kind == "stack":
            ref = _stack(r, name, value, out, hint)
        else:
            ref = _last(r, name, value, out)
        if kind == "stack" and n.reverse:  # the loop ran over reversed sequences: back to frame order
            ref = r.reverse(ref, hint)
        outer.refs[out.id] = ref
        # a stack's `n.axis` is the loop's own; in a last value `n.axis` is the whole axis
        inside = {**unit.dims, n.axis: outer.dims[n.axis]} if kind == "stack" else unit.dims
        outer.refs[out.id] = r.retag(outer, out.id, inside, outer.dims)
        r.em.note_dims(outer, out, outer.refs[out.id])
    if "output" not in unit.layers:
        _unit_output(r, results, result_layers)
    if outer.in_unit:
        _collocate_outer_reads(r)


def _step_layer(r: RecLowering, value: int | str, hint: str, kind: str, repeated: dict[int, str]) -> tuple[str, str]:
    """The unit's layer whose frames are the result, and the result's kind from here on.

    Searching, RETURNN stacks a layer per hypothesis only if it has the beam, which a layer has
    when it reads the choice (in this step or through a state): the frames of one that does not
    (a counter, a state ignoring the labels, an encoder frame) are one per sequence, while the
    loop's lengths are per hypothesis. Such a result is read through a layer that also reads the
    choice (`per_step` with `beam`): a copy per hypothesis."""
    if isinstance(value, str):  # a held value: its own state layer
        return value, "last"
    if kind == "state" and value not in r.stepped:
        return hint, kind  # the state's own layer, kept in the loop (`RecLowering._state_layers`)
    without_beam = bool(r.chosen) and value not in r.beamed
    if value in r.stepped and not (kind == "last" and _dynamic(r, value)) and not without_beam:
        return r.own_layer(r.unit, value, hint), kind
    # also a last value with a dynamic dim: RETURNN may take the last frame along it
    if value not in repeated:
        repeated[value] = r.unit.ns.fresh(hint)
        r.unit.layers[repeated[value]] = r.per_step_layer(repeated[value], r.unit.refs[value], False, r.beam)
    return repeated[value], kind


def _dynamic(r: RecLowering, vid: int) -> bool:
    """Value `vid` has a dynamic dim (besides batch)."""
    return any(r.em.g.dim(d).kind == "dynamic" for d in r.em.values[vid].dims)


def _in_unit(r: RecLowering, name: str, kind: str, out: Value) -> str:
    """The result of a loop inside another loop, as the outer unit reads it."""
    n, outer, unit, rec = r.n, r.outer, r.unit, r.rec
    # sub-layers of a rec layer inside a unit cannot be reached; its own output can
    if name != "output":
        unit.layers["output"] = {"class": "copy", "from": name}
    if kind == "stack":
        # RETURNN's template of a rec layer in a unit is batch-major and its output
        # time-major: a state's or last frame's layer of it would mix the two layouts
        # (its previous value laid out as the template says); batch-major throughout
        ref = outer.ns.fresh(out.name or f"{rec}_stacked")
        outer.layers[ref] = {"class": "reinterpret_data", "from": rec, "enforce_batch_major": True}
    else:
        # a sequence without a frame along the axis keeps the state's initial value
        init = next((outer.refs[c.init] for c in n.carries if c.out is out), None)
        ref = _gather_last(r, out, init)
    if rec in outer.keep_nested:  # by a layer reading its own previous value (`per_step`)
        step = outer.ns.fresh(f"{ref}_step")
        outer.layers[step] = r.per_step_layer(step, ref, False)
        ref = step
    return ref


def _stack(r: RecLowering, name: str, value: int | str, out: Value, hint: str) -> str:
    """A stack of the unit's layer `name`, read after the loop."""
    layer = r.unit.layers[name]
    layer["is_output_layer"] = True
    if r.beam and value in r.beamed and name not in {r.unit.refs[c] for c in r.chosen}:
        # RETURNN moves a layer no step needs out of a searched loop, and one reading
        # two such layers there finds no search choices ("has beam but no search
        # choices": `where(s > 0, s, 0.1 * s)` stacked); collocated with the choice,
        # it and what it reads stay in the loop
        layer.setdefault("collocate_with", [r.beam])
    ref = f"{r.rec}/{name}"
    if r.trim is not None:
        r.kept = r.kept or _kept(r, r.trim)
        ref = _trimmed(r, r.trim, ref, out, hint)
    return ref


def _last(r: RecLowering, name: str, value: int | str, out: Value) -> str:
    """The last frame of the unit's layer `name`, read after the loop."""
    em, outer, unit = r.em, r.outer, r.unit
    unit.layers[name]["need_last"] = True
    # RETURNN reads it as a previous value too (a held value, its layer's name here,
    # has its own initial value)
    if isinstance(value, int) and em.values[value].sparse_dim:
        unit.layers[name].setdefault("initial_output", "zeros")
    # the output's own name unless a whole axis is retagged after it (a layer more)
    retagged = any(unit.dims[d] != outer.dims[d] for d in out.dims)
    ref = (None if retagged else r.named.get(out.id)) or outer.ns.fresh(out.name or f"{name}_last")
    outer.layers[ref] = {"class": "rec_last_output", "rec_layer": r.rec, "sub_layer_name": name}
    outer.layer_of[out.id] = ref
    return ref


def _kept(r: RecLowering, trim: str) -> str:
    """A layer of the steps each sequence keeps of a loop run with `include_eos` over its own
    axis `trim` whose appends stand after the `break`: a sequence stopped by its bound ran its
    last step whole (no frame dropped), one stopped by the user's condition drops that step."""
    n, outer, unit, rec = r.n, r.outer, r.unit, r.rec
    ended = unit.ns.fresh("ended")
    unit.layers[ended] = {"class": "cast", "from": unit.refs[n.end], "dtype": "int32"}
    if n.end not in r.stepped:
        # a condition no step changes: RETURNN would move the cast out before the loop, where
        # it has no time axis to take the last frame along (an assertion); kept in the loop
        cast = unit.ns.fresh("ended_cast")
        unit.layers[cast] = unit.layers.pop(ended)
        unit.layers[ended] = r.per_step_layer(ended, cast, False)
    unit.layers[ended]["need_last"] = True
    last, steps = outer.ns.fresh(f"{rec}_ended"), outer.ns.fresh(f"{rec}_steps")
    outer.layers[last] = {"class": "rec_last_output", "rec_layer": rec, "sub_layer_name": ended}
    outer.layers[steps] = {"class": "length", "from": rec, "axis": Code(trim)}
    lens = outer.ns.fresh(f"{rec}_lens")
    outer.layers[lens] = {"class": "eval", "from": [steps, last], "eval": "source(0) - source(1)"}
    # `range_from_length` marks its lengths as the dim's size (a loop over the dim reads them)
    positions, kept = outer.ns.fresh(f"{rec}_positions"), outer.ns.fresh(f"{rec}_kept")
    axis = Code(outer.dims[n.axis])
    outer.layers[positions] = {"class": "range_from_length", "from": lens, "out_spatial_dim": axis}
    outer.layers[kept] = {"class": "length", "from": positions, "axis": axis}
    return kept


def _trimmed(r: RecLowering, trim: str, ref: str, out: Value, hint: str) -> str:
    """Stack `ref` of a loop run over its own axis `trim` (`_kept`): each sequence's frames
    without the ending step, over the loop's dim."""
    n, outer = r.n, r.outer
    # batch-major first: `slice_nd` of a time-major tensor puts the new lengths on another dim
    dims = {**r.unit.dims, n.axis: trim}
    order = [Code(dims[d]) for d in ["batch", n.axis, *(d for d in out.dims if d not in ("batch", n.axis))]]
    bm = outer.ns.fresh(f"{hint}_with_end")
    outer.layers[bm] = {"class": "transpose", "from": ref, "perm": order}
    name = outer.ns.fresh(hint)
    outer.layers[name] = {
        "class": "slice_nd",
        "from": bm,
        "axis": Code(trim),
        "start": 0,
        "size": r.kept,
        "out_spatial_dim": Code(outer.dims[n.axis]),
    }
    return name


def _gather_last(r: RecLowering, out: Value, init: str | None) -> str:
    """Each sequence's last frame of a rec layer's output (`rec_last_output` cannot live in a
    unit). Where a sequence may have no frame along the loop's axis (a dim an op made, e.g. a
    strided `Conv1d`'s), the loop ran no step for it: the state's initial value `init` (a layer),
    zeros for another value, as torch gives them (TF's gather fails on position -1)."""
    outer, rec, axis = r.outer, r.rec, r.n.axis
    name = outer.ns.fresh(out.name or f"{rec}_last")
    length, pos = outer.ns.fresh(f"{name}_len"), outer.ns.fresh(f"{name}_pos")
    outer.layers[length] = {"class": "length", "from": rec, "axis": Code(outer.dims[axis])}
    if not r.em.g.dim(axis).may_be_empty:
        outer.layers[pos] = {"class": "eval", "from": length, "eval": "source(0) - 1"}
        outer.layers[name] = {"class": "gather", "from": rec, "position": pos, "axis": Code(outer.dims[axis])}
        return name
    frame, ran = outer.ns.fresh(f"{name}_frame"), outer.ns.fresh(f"{name}_ran")
    outer.layers[pos] = {"class": "eval", "from": length, "eval": "tf.maximum(source(0) - 1, 0)"}
    outer.layers[frame] = {"class": "gather", "from": rec, "position": pos, "axis": Code(outer.dims[axis])}
    outer.layers[ran] = {"class": "compare", "from": length, "kind": "greater", "value": 0}
    outer.layers[name] = {
        "class": "switch",
        "condition": ran,
        "true_from": frame,
        "false_from": 0.0 if init is None else init,
    }
    return name


def _unit_output(r: RecLowering, results: list[Result], result_layers: list[str]) -> None:
    """The unit's `output` where no state is (see `RecLowering._has_other` for what it must not be)."""
    unit = r.unit
    # searching, RETURNN takes the rec layer's hypotheses from its output: the (step's last) choice
    first = r.own_layer(unit, r.chosen[-1], "out") if r.chosen else result_layers[0]
    unit.layers["output"] = {"class": "copy", "from": first}

    # a held value's result is its layer (`RecLowering._held`); its outer value has the body value's dims
    def step_value(res: Result) -> Value:
        return r.em.values[res[0]] if isinstance(res[0], int) else res[1]

    if not r.chosen and r.has_other(step_value(results[0])):
        plain = [name for res, name in zip(results, result_layers) if not r.has_other(step_value(res))]
        if plain:
            unit.layers["output"]["from"] = plain[0]
        else:  # the first result over its other dynamic dims (nothing reads it)
            dims = [unit.dims[d] for d in step_value(results[0]).dims if r.em.g.dim(d).kind == "dynamic"]
            unit.layers["output"] = {
                "class": "reduce",
                "mode": "max",
                "from": first,
                "axis": [Code(d) for d in dims],
            }


def _collocate_outer_reads(r: RecLowering) -> None:
    """See `outer_unit_reads`: the outer unit's layers this unit reads, through copies of their own."""
    outer, unit = r.outer, r.unit
    for name in outer_unit_reads(unit.layers, set(outer.layers)):
        if reads_prev(outer.layers, name):  # in the loop anyway
            continue
        # a copy of its own, collocated: the layer itself may still move out (RETURNN
        # always moves a `rec_unstack`, and a layer kept in reading a part of a moved one,
        # `split/0`, is not found)
        step = outer.ns.fresh(f"{name}_step")
        outer.layers[step] = {"class": "copy", "from": name, "collocate_with": [r.rec]}
        unit.layers = rename_outer_reads(unit.layers, name, step)
