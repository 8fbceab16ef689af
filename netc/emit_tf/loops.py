"""How a loop becomes a RETURNN `rec` layer: a `RecLowering` per loop, which the emitter makes
for each `Loop` of a block. Its seams, in the order they add layers (the order of a unit's
layers and of fresh names is the config's, so `lower` keeps it):

- boundary (`_boundary_refs`, `_boundary_frames`): outer values read in the unit as `base:`
  refs (retagged where the body reads the whole axis; an outer unit's state through a layer of
  that unit), the sequences as `rec_unstack` layers (reversed within each length for backward
  loops), invariants.
- states (`_states_named` before the body, `_state_layers` after it): each state's layer name
  and `prev:` ref, the state that is the unit's `output`, `<state>_prev` layers; then each
  state's layer with its `initial_output`, and the values held across `end`.
- body (`_body`): the block's layers, inner loops kept in the loop, kept `cum_concat` frames.
- end (`_end_axis` before the results, `_end_layers` after them): whether the loop runs with
  `include_eos` over an axis of its own; the `end` layer (the user's condition, the step limit)
  and `max_seq_len`.
- results (`loop_results.py`): stacks and last values as the outer block reads them,
  the unit's `output`, collocated copies of an outer unit's layers an inner unit reads.

The rules are in docs/design.md, "How loops are lowered to RETURNN"; `loop_rules.py` decides them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from netc.emit_tf.block import Block, loop_names
from netc.emit_tf.grow_rules import check_grown_reads, kept_cum_concats
from netc.emit_tf.loop_results import lower_results
from netc.emit_tf.loop_rules import (
    REBEAM_TYPE_HELPER,
    REBEAM_TYPE_HELPER_SOURCE,
    STEP_TYPE_HELPER,
    STEP_TYPE_HELPER_SOURCE,
    axes_of_prev,
    check_inner_states_searched,
    computed_from,
    dims_without_prev,
    feeding_state,
    output_carry,
    per_step,
    readers,
    rebeamed_states,
    shaped_by_others,
    stepped_values,
    unchained_choices,
)
from netc.errors import CompileError
from netc.ir.loopkinds import choice_ops, chosen, loop_chunk, target_seqs
from netc.ir.model import Loop, LoopLast, Op, Value
from netc.ir.uses import count_uses_in_loop
from netc.naming import Code
from netc.ops.base import Carry
from netc.passes.returnn_names import UNIT_RESERVED as _UNIT_RESERVED

if TYPE_CHECKING:
    from netc.emit_tf.emitter import ReturnnEmitter

# `while True` loops have no limit in eager mode and torch; RETURNN's loop needs one
UNBOUNDED_MAX_STEPS = 1000


# RETURNN's batch limit of a loop whose `end` layer holds each sequence's step limit: never reached
NO_BATCH_LIMIT = 2**31 - 1


REVERSE_HELPER = "reverse_in_length"


REVERSE_HELPER_SOURCE = f'''def {REVERSE_HELPER}(source, axis_dim, **_kwargs):
    """Each sequence reversed within its own length along `axis_dim`, for backward loops
    (RETURNN ignores `direction: -1` on subnetwork units)."""
    import tensorflow as tf

    x = source(0, as_data=True)
    axis = x.get_axis_from_description(axis_dim)
    return tf.compat.v1.reverse_sequence(
        x.placeholder, seq_lengths=x.get_dynamic_size(axis), seq_axis=axis, batch_axis=x.batch_dim_axis
    )
'''


def _body_values(n: Loop) -> list[Value]:
    return [*n.block_args(), *(v for nd in n.body for v in (nd.outs if isinstance(nd, Op) else nd.results()))]


def _base(ref: str) -> str:
    return f"base:{ref}"


class RecLowering:
    """Loop `n` as the rec layer `n.name` of block `outer`. `named`: results that are outputs,
    whose layers take the output's name (in a unit: the layer names reserved for the outer
    loop's states, `ReturnnEmitter.op`)."""

    def __init__(self, em: ReturnnEmitter, n: Loop, outer: Block, named: dict[int, str]):
        self.em, self.n, self.outer, self.named = em, n, outer, named
        self.rec = n.name  # chosen by the returnn_names pass (parameter names depend on it); reserved
        path = (*outer.path, self.rec)
        self.unit = em.blocks[path] = Block(
            _UNIT_RESERVED | set(loop_names(n.body)), dict(outer.dims), in_unit=True, path=path
        )
        self.axis = Code(outer.dims[n.axis])  # the rec layer's (`_end_axis` may give it one of its own)
        self.stepped = stepped_values(n)
        self.feeding = feeding_state(n)  # values a state or `end` needs: RETURNN keeps them in the loop
        self.single = {nd.outs[0].id for nd in n.body if isinstance(nd, Op) and len(nd.outs) == 1}
        self.chosen = chosen(n)
        self.beamed = computed_from(n, set(self.chosen))  # values with the beam
        self.rebeamed = rebeamed_states(n)  # states to carry with the step's last choice's hypotheses
        self.rebeam_zeros: dict[str, str] = {}  # dtype -> their layer of zeros with those hypotheses
        self.grown = [c for c in n.carries if c.init in em.grown]  # its layer is `cum_concat`, its own state
        # made by the seams, in `lower`'s order
        self.crossing: list[int] = []  # outer values read as `base:` refs (invariants, initial values)
        self.base: dict[int, str] = {}  # such a value -> its `base:` ref
        self.batched: set[str] = set()  # refs with a batch dim
        self.steps_from: list[str] = []  # sequences no layer reads: RETURNN must still build them first
        self.carry_layers: dict[int, str] = {}  # a state's inner value -> its layer
        self.reserved: dict[int, str] = {}  # a state's next value -> its layer (the state's), named up front
        self.prev_layers: dict[int, str] = {}  # a state read through a layer kept in the loop -> that layer
        self.held_layers: dict[int, str] = {}  # a value held across `end` (its `out`) -> its state layer
        self.beam: str | None = None  # searching: the step's last choice's layer (its final beam)
        self.include_eos = n.include_eos
        self.trim: str | None = None  # the loop's own axis when it runs with `include_eos` for its appends
        self.kept = ""  # with `trim`: the layer of each sequence's kept steps (`loop_results._kept`)

    def lower(self) -> None:
        """The rec layer, seam by seam: a unit's layers and fresh names come in this order."""
        n, outer = self.n, self.outer
        self._boundary_refs()
        outer.layers[self.rec] = {}  # keeps the layer order readable: the loop before what reads it
        self._states_named()
        self._boundary_frames()
        self._body()
        self._state_layers()
        self._end_axis()
        lower_results(self)  # the results seam
        rec_layer = {"class": "rec", "from": self.steps_from, "axis": self.axis, "unit": self.unit.layers}
        # a search, and a chunked loop (its chunk dim's sizes are set per step, which a layer moved
        # out of the loop would not see): see docs/design.md, "How loops are lowered to RETURNN"
        if self.chosen or loop_chunk(n) is not None:
            rec_layer["optimize_move_layers_out"] = False
        if n.target is not None:  # training: the target's frames; searching: a new axis per search
            del rec_layer["axis"]
            # by data key: an input's (a computed target is training's, which has no `choice` layer)
            given = [c.attrs["target"] for c in choice_ops(n) if c.attrs["target"] is not None]
            if given:
                rec_layer["target"] = given[0]
        self._end_layers(rec_layer)
        outer.layers[self.rec].update(rec_layer)

    # --- boundary: what crosses into the unit ----------------------------------------------

    def _boundary_refs(self) -> None:
        """The outer values the unit reads as `base:` refs: invariants and states' initial values."""
        em, n, outer, unit = self.em, self.n, self.outer, self.unit
        check_grown_reads(n, em.grown, em.values | {v.id: v for v in _body_values(n)})
        self.crossing = [*(i.outer for i in n.invariants), *(c.init for c in n.carries if c.init not in em.grown)]
        if any(n.axis in em.values[v].dims for v in self.crossing):  # the whole axis is read in the body
            var = em.dim_ns.fresh(f"{outer.dims[n.axis]}_whole")
            em.whole_dims.append((var, f"{n.axis}:whole"))
            unit.dims[n.axis] = var
        self.base = {v: _base(self.retag(outer, v, outer.dims, unit.dims, self._crossing(v))) for v in self.crossing}

    def _boundary_frames(self) -> None:
        """The sequences' frames (`rec_unstack`) and the invariants' refs in the unit."""
        em, n, unit = self.em, self.n, self.unit
        read = unit.read = count_uses_in_loop(n)
        self.batched = {self.base[v] for v in self.crossing if "batch" in em.values[v].dims}
        targets = {s.inner.id for s in target_seqs(n)}
        for s in n.seqs:
            em.values[s.inner.id] = s.inner
            if s.inner.id in targets:  # a choice layer takes its target by data key
                continue
            src = self._crossing(s.outer)
            if n.reverse:
                src = self.reverse(src, f"{em.values[s.outer].name or 'x'}_reversed")
            if not read[s.inner.id]:
                self.steps_from.append(src)
                continue
            name = unit.ns.fresh(s.inner.name or f"{em.values[s.outer].name or 'x'}_t")
            unit.layers[name] = {"class": "rec_unstack", "from": _base(src), "axis": self.axis}
            if loop_chunk(n) is not None:  # no layer moves out of its loop: the step's frame by index
                unit.layers[name] = {"class": "gather", "from": _base(src), "position": ":i", "axis": self.axis}
            unit.refs[s.inner.id] = unit.layer_of[s.inner.id] = name
            if "batch" in s.inner.dims:
                self.batched.add(name)
        for i in n.invariants:
            em.values[i.inner.id] = i.inner
            unit.refs[i.inner.id] = self.base[i.outer]

    def _crossing(self, vid: int) -> str:
        """The reference to value `vid` of the outer block that the loop reads. An outer unit's
        state is read through a layer of that unit: RETURNN builds an inner unit while it builds
        the outer unit's layers, and an inner `base:prev:h` (a read of the outer state, which the
        inner loop computes) is a dependency loop to it."""
        ref = self.outer.refs[vid]
        if not ref.startswith("prev:"):
            return ref
        return self.own_layer(self.outer, vid, f"{self.em.values[vid].name or 'state'}_prev")

    def retag(self, blk: Block, vid: int, old: dict[str, str], new: dict[str, str], src: str | None = None) -> str:
        """A reference to value `vid` of `blk` (read as `src`, by default its reference) with its
        dims under the tags of `new` (a `reinterpret_data` layer when a tag differs: the whole
        axis entering or leaving a loop)."""
        src = src or blk.refs[vid]
        values = self.em.values
        changes = {Code(old[d]): Code(new[d]) for d in values[vid].dims if old[d] != new[d]}
        if not changes:
            return src
        key = (vid, tuple(changes.items()))
        if key not in blk.retagged:
            name = blk.ns.fresh(f"{values[vid].name or 'x'}_{'_'.join(changes.values())}")
            # pairs, not a dict keyed by dims: TF flattens a layer's options, and such a dict's keys
            # hash anew once RETURNN has merged a dim with another (a dim read first from a nested
            # loop: "Dictionary was modified during iteration over it")
            pairs = list(changes.items())
            blk.layers[name] = {"class": "reinterpret_data", "from": src, "set_dim_tags": pairs}
            blk.retagged[key] = name
        return blk.retagged[key]

    def reverse(self, src: str, hint: str) -> str:
        """RETURNN ignores `direction: -1` on subnetwork units: reverse within each length instead."""
        self.em.helpers[REVERSE_HELPER] = REVERSE_HELPER_SOURCE
        name = self.outer.ns.fresh(hint)
        self.outer.layers[name] = {
            "class": "eval",
            "from": src,
            "eval": Code(REVERSE_HELPER),
            "eval_locals": {"axis_dim": Code(self.outer.dims[self.n.axis])},
        }
        return name

    # --- states: carries, their initial values, values held across `end` ----------------------

    def _states_named(self) -> None:
        """Each state's layer name and `prev:` ref, known before the body: each carry's layer is
        named after its variable (first: state is what a reader of the config follows), and is
        the layer computing its next value when that is an op of this body that RETURNN keeps in
        the loop. A state read where RETURNN would shift it wrongly gets a `<state>_prev` layer."""
        em, n, unit = self.em, self.n, self.unit
        for nd in n.body:  # known before the body's layers are: how its states are emitted depends on them
            em.values.update((v.id, v) for v in (nd.outs if isinstance(nd, Op) else nd.results()))
        em.values.update((v.id, v) for v in n.block_args())
        check_inner_states_searched(n)
        grown_inner = {c.inner.id for c in self.grown}
        output = output_carry(n, self.single, self.outer, lambda v: self.has_other(v) or v.id in grown_inner)
        for c in n.carries:
            em.values[c.inner.id] = c.inner
            unit.carries[c.inner.id] = Carry(self.base.get(c.init, ""), c.init in em.zeros, c.next)
            self.carry_layers[c.inner.id] = "output" if c is output else unit.ns.fresh(c.name)
            # (a rebeamed state's layer is a copy with the last choice's hypotheses: not its op's)
            reserve = c.next in self.single and c.next not in self.reserved and c.next not in self.rebeamed
            if reserve and c.next in self.stepped:
                self.reserved[c.next] = self.carry_layers[c.inner.id]
            unit.refs[c.inner.id] = f"prev:{self.carry_layers[c.inner.id]}"
        read_whole = {s.value for s in n.stacks} | {ll.value for ll in n.lasts}
        for c in n.carries:
            if c.inner.id in read_whole or not readers(n, c.inner.id) <= self.feeding:
                # RETURNN moves a layer that no state needs after the loop and gives it the frames
                # of the states it reads shifted by one, along the axis it takes for time: of a
                # value with another dynamic dim, possibly that one, and none when the state's
                # template came from its `prev:` or initial value (no time axis: an assertion).
                # Such a state's previous value is read through a layer kept in the loop
                prev = unit.ns.fresh(f"{c.name}_prev")
                unit.layers[prev] = self.per_step_layer(prev, unit.refs[c.inner.id], False)
                unit.refs[c.inner.id] = unit.layer_of[c.inner.id] = prev
                self.prev_layers[c.inner.id] = prev

    def has_other(self, v: Value) -> bool:
        """Value `v` has a dynamic dim besides batch that RETURNN may take for the loop's axis (not in
        a `choice`'s loop in training, which runs over its target's frames).

        RETURNN takes the loop's axis from the unit's `output`: a loop with `end` has no lengths
        before it runs, and it takes them from the output's first dynamic dim if that has another
        one (an assertion); in any loop, an output state whose template came from its initial
        value takes that value's dynamic dim for time, not the loop's axis (the rec layer's
        template and output then differ: an assertion). Such an output is not a state."""
        return self.n.target is None and any(self.em.g.dim(d).kind == "dynamic" for d in v.dims)

    def _state_layers(self) -> None:
        """After the body: each state's layer (where the body made none) and its initial value,
        then the values held across `end`."""
        n, unit = self.n, self.unit
        for c in n.carries:
            name = self.carry_layers[c.inner.id]
            if name not in unit.layers:
                stepped = c.next in self.stepped
                unit.layers[name] = self.per_step_layer(name, unit.refs[c.next], stepped, self.beam)
                # labels kept as a plain int state (`t = where` after `t = full(..., -1)`): RETURNN
                # would keep them labels, which its initial value is not
                dense = self.em.values[c.next].sparse_dim is not None and c.inner.sparse_dim is None
                if c.next in self.rebeamed:
                    unit.layers[name] = self._rebeamed(unit.refs[c.next], self.em.values[c.next].dtype, dense)
                elif dense and stepped:
                    unit.layers[name] = {"class": "eval", "from": unit.refs[c.next], "eval": "source(0)"}
                    unit.layers[name]["out_type"] = {"sparse": False}
                elif stepped:
                    unit.layer_of.setdefault(c.next, name)
            if c not in self.grown:
                # (a state read through its `_prev` layer: that layer's template comes from the
                # initial value alone, which RETURNN's default zeros give without the batch dim an
                # inner loop's `end` then lacks: its lengths lose the batch, an assertion)
                given = c.next in self.rebeamed or c.inner.id in self.prev_layers
                self._initial_output(name, c.init, self.base[c.init], given=given)
            init = unit.layers[name].get("initial_output")
            if c.inner.id in self.prev_layers and isinstance(init, str) and init.startswith("base:"):
                # RETURNN's first template of a layer is its `base:` initial value's: the state and
                # its `_prev` layer, a cycle through the state's next value, start alike (else the
                # one template with the state's dims goes round the cycle and never settles)
                unit.layers[self.prev_layers[c.inner.id]]["initial_output"] = init
        for ll in n.lasts:
            if ll.after_end:
                self.held_layers[ll.out.id] = self._held(ll)

    def _rebeamed(self, src: str, dtype: str, ints: bool = False) -> dict:
        """A state's layer giving `src` (of an earlier choice's hypotheses) with the step's last
        choice's (`rebeamed_states`): plus zeros computed from that choice, which RETURNN gives
        the combined hypotheses; the sum's dims are `src`'s, whatever its template so far. The
        zeros have the state's dtype (an int state: a position chosen before the label); `ints`:
        `src` is labels the state keeps as plain ints."""
        unit = self.unit
        if dtype not in self.rebeam_zeros:
            zeros = self.rebeam_zeros[dtype] = unit.ns.fresh("last_choice_zeros")
            unit.layers[zeros] = {
                "class": "eval",
                "from": [self.beam, *(f"prev:{unit.refs[c]}" for c in self.chosen[:-1])],
                "eval": "([source(i) for i in range(1, len(self.sources))], "
                f"tf.zeros_like(tf.cast(source(0), tf.{dtype})))[-1]",
                "out_type": {"dtype": dtype, "sparse": False, "dim": None, "shape": ()},
                "collocate_with": [self.beam],
            }
        for c in self.chosen[:-1]:  # RETURNN maps this step's earlier choices to their `prev:` layers
            unit.layers[unit.refs[c]].setdefault("initial_output", 0)
        zeros = self.rebeam_zeros[dtype]
        self.em.helpers[REBEAM_TYPE_HELPER] = REBEAM_TYPE_HELPER_SOURCE
        return {
            "class": "combine",
            "kind": "add",
            "from": [src, zeros],
            "out_type": Code(f"{REBEAM_TYPE_HELPER}_ints" if ints else REBEAM_TYPE_HELPER),
            "collocate_with": [self.beam],
        }

    def _initial_output(self, name: str, init: int, ref: str, given: bool = False) -> None:
        """The initial value `init` (an outer value, read as `ref`) of the unit's state layer `name`;
        `given`: also where it is zeros that RETURNN's default would give (a rebeamed state: the
        last choice its zeros read looks like a source giving the state's dims, which they do not)."""
        em, unit, outer = self.em, self.unit, self.outer
        if (
            not given
            and init in em.zeros
            and not outer.in_unit
            and shaped_by_others(unit.layers, name, self.batched)
            and not axes_of_prev(unit.layers, name)
        ):
            # zeros are RETURNN's default, if its first template of the state has all its dims
            known = {r: frozenset(em.values[v].dims) for v, r in unit.refs.items() if v in em.values}
            known.update({r: frozenset(em.values[v].dims) for v, r in unit.layer_of.items() if v in em.values})
            shaped = dims_without_prev(unit.layers, name, known)
            if shaped is None or set(em.values[init].dims) <= shaped:
                return
        # RETURNN looks for an inner unit's initial values before the outer unit has built its
        # own layers: zeros made there are RETURNN's `"zeros"`
        in_outer_unit = outer.in_unit and not ref.startswith("base:base:")
        zeros = in_outer_unit and self._static_zeros(init)
        made = outer.layers.get(outer.layer_of.get(init, ""), {})
        if zeros and "batch" in em.values[init].dims:
            # but RETURNN's "zeros" have a batch dim only if a layer the state is computed from
            # has one when it makes the state's first template: in a unit nested in another, one
            # read from the outer unit (`base:`) may have none yet (the inner loop's lengths then
            # lack the batch: an assertion), so the same constant made at the network's top
            # (which RETURNN builds first)
            if made.get("class") == "constant" and "from" not in made:
                root = em.blocks[()]
                top = root.ns.fresh(f"{name}_initial")
                root.layers[top] = dict(made)
                zeros, ref = False, "base:" * len(unit.path) + top
        unit.layers[name]["initial_output"] = "zeros" if zeros else ref

    def _static_zeros(self, vid: int) -> bool:
        """Value `vid` is made by `zeros(...)` over the batch and static dims only."""
        em = self.em
        return vid in em.zeros and all(em.g.dim(d).kind != "dynamic" for d in em.values[vid].dims)

    def _held(self, ll: LoopLast) -> str:
        """A value assigned after `if end(...): break`, held at the step where `end` held: a state
        layer that keeps its previous value there (its value before the loop at the first step).
        RETURNN's last frame of it is what Python holds after the loop: with `include_eos` the
        ending frame, which holds; without, the frame before it (RETURNN reads the previous value
        at the ending frame, the initial value when that is the first); a sequence stopped by its
        bound (not by the user's condition) has its last step's value."""
        n, unit = self.n, self.unit
        name = unit.ns.fresh(ll.name)
        unit.layers[name] = {
            "class": "switch",
            "condition": unit.refs[n.end],
            "true_from": f"prev:{name}",
            "false_from": unit.refs[ll.value],
        }
        init = next(i.outer for i in n.invariants if i.inner.id == ll.init)
        self._initial_output(name, init, unit.refs[ll.init])
        return name

    # --- body ----------------------------------------------------------------------------

    def _body(self) -> None:
        """The body's layers; inner loops and `cum_concat` frames RETURNN would move out, kept in."""
        em, n, unit = self.em, self.n, self.unit
        # RETURNN moves an inner loop's rec layer that no state needs out of this loop and runs it
        # over the stacked frames of the values of this loop's step it reads: its unit's templates
        # then put this loop's axis elsewhere than its layers do (an assertion). Kept in the loop
        unit.keep_nested = {
            nd.name
            for nd in n.body
            if isinstance(nd, Loop)
            and any(r.id in self.stepped for r in nd.results())
            and not any(r.id in self.feeding for r in nd.results())
        }
        em.block(n.body, unit, self.reserved)
        # a layer kept in a searched loop reads the choice too: its frames are per hypothesis
        self.beam = unit.refs[self.chosen[-1]] if self.chosen else None
        self._chain_choices()
        for nd in kept_cum_concats(n):  # its frame through a layer RETURNN keeps in the loop
            layer = unit.layers[em.op_layers[nd.outs[0].id][-1]]
            frame = unit.ns.fresh(f"{em.op_layers[nd.outs[0].id][-1]}_frame")
            # not reading the choice (a search's beam): the frame is needed before it
            unit.layers[frame] = self.per_step_layer(frame, layer["from"], False)
            layer["from"] = frame

    def _chain_choices(self) -> None:
        """Each later choice of the step reads its scores through a layer that also reads the
        choice before it, and the step's first choice the previous step's last where its scores
        read nothing carried from it (`unchained_choices`).

        A choice extends the hypotheses the one before made (docs/language.md, "Several choices
        in one step"); RETURNN's `choice` extends those of its input's search choices (or, where
        its input has none, its own previous step's), and it orders a step's choices by their
        dependencies alone: two choices it finds independent cannot be compared
        (`get_search_choices`, "Search choices cannot be compared", at a layer reading both,
        such as a state computed from both). Adding zeros computed from the earlier choice gives
        the scores its hypotheses (RETURNN selects the scores' frames by that choice's source
        hypotheses) and a dependency RETURNN always sees."""
        unit = self.unit
        for before, label, across in unchained_choices(self.n):
            choice = unit.layers[unit.refs[label]]
            src, prev = choice["from"], unit.refs[before]
            zeros = unit.ns.fresh(f"prev_{prev}_zeros" if across else f"{prev}_zeros")
            unit.layers[zeros] = {
                "class": "eval",
                "from": [f"prev:{prev}" if across else prev],
                "eval": "tf.zeros_like(tf.cast(source(0), tf.float32))",
                "out_type": {"dtype": "float32", "sparse": False, "dim": None, "shape": ()},
            }
            if across:  # never read: the first step's first choice has no hypotheses to follow
                unit.layers[prev].setdefault("initial_output", 0)
            else:
                unit.layers[zeros]["collocate_with"] = [prev]
            rebeamed = unit.ns.fresh(f"{src}_rebeamed")
            unit.layers[rebeamed] = {"class": "combine", "kind": "add", "from": [src, zeros]}
            choice["from"] = rebeamed

    def per_step_layer(self, name: str, src: str, stepped: bool, beam: str | None = None) -> dict:
        """`loop_rules.per_step`, with the config's helper it may call."""
        if not stepped:
            self.em.helpers[STEP_TYPE_HELPER] = STEP_TYPE_HELPER_SOURCE
        return per_step(name, src, stepped, beam)

    def own_layer(self, blk: Block, vid: int, hint: str) -> str:
        """A layer of `blk` holding value `vid` (a copy when it is a reference)."""
        if vid in blk.layer_of:
            return blk.layer_of[vid]
        name = blk.ns.fresh(hint)
        blk.layers[name] = {"class": "copy", "from": blk.refs[vid]}
        blk.layer_of[vid] = name
        return name

    # --- end -----------------------------------------------------------------------------

    def _end_axis(self) -> None:
        """Whether a loop with `end` runs with `include_eos`, over an axis of its own.

        RETURNN's last frame without `include_eos` is the step before the ending one: a value the
        ending step computes before the `break` would be in no frame it keeps (and a batch that
        ends at its first step would stack no frame, which TF cannot stack). A loop whose appends
        stand after the `break` runs with `include_eos` over an axis of its own, its stacks
        dropping the ending step after it (`loop_results._trimmed`)."""
        em, n, outer = self.em, self.n, self.outer
        if n.end is not None and not self.include_eos and not outer.in_unit:
            self.trim = em.dim_ns.fresh(f"{outer.dims[n.axis]}_steps")
            em.whole_dims.append((self.trim, f"{n.axis}:steps"))
            self.axis, self.include_eos = Code(self.trim), True
        elif n.end is not None and not self.include_eos:  # a loop inside another: its result as RETURNN gives it
            before = [c.name for c in n.carries if c.out is not None] + [ll.name for ll in n.lasts if not ll.after_end]
            if before:
                raise CompileError(
                    n.span,
                    f"RETURNN target: `{before[0]}` is assigned before `if end(...): break` of a loop inside "
                    f"another loop, but the stacks are appended after it, so its value after the loop would "
                    f"be one step off; assign it after the `break` (bound before the loop) or append before it",
                )

    def _end_layers(self, rec_layer: dict) -> None:
        """The unit's `end` layer and the rec layer's options for it."""
        n = self.n
        if n.end is None:
            return
        self.unit.layers["end"] = self._end_layer()
        rec_layer["include_eos"] = self.include_eos
        # RETURNN needs a loop limit for the whole batch; `end` stops each sequence at its own
        rec_layer["max_seq_len"] = NO_BATCH_LIMIT if n.bound is not None else n.max_steps or UNBOUNDED_MAX_STEPS

    def _end_layer(self) -> dict:
        """The unit's `end` layer: the user's condition, or the sequence's step limit reached."""
        n, unit = self.n, self.unit
        cond = unit.refs[n.end]
        if self.chosen and n.end not in self.beamed:
            # a search takes the beam its hypotheses end in from the `end` layer's dependencies (it
            # asserts they reach the choice): an end of the frames alone (a transducer's last frame)
            # reads the choice through a comparison that never holds
            never = unit.ns.fresh("never")
            unit.layers[never] = {"class": "compare", "kind": "less", "from": [unit.refs[self.chosen[-1]]], "value": 0}
            ended = unit.ns.fresh("ended")
            unit.layers[ended] = {"class": "combine", "kind": "logical_or", "from": [cond, never]}
            cond = ended
        bound = self._bound() if n.bound is not None else None
        if n.bound is None and n.max_steps is None:
            return {"class": "copy", "from": cond}
        # steps 0 .. limit-1 run; with include_eos the last of them is the ending step itself
        step = unit.ns.fresh("step")
        unit.layers[step] = {
            "class": "eval",
            "from": ":i",
            "eval": "source(0) + 1" if self.include_eos else "source(0)",
        }
        at_limit = unit.ns.fresh("at_limit")
        if bound is not None:
            unit.layers[at_limit] = {"class": "compare", "kind": "greater_equal", "from": [step, bound]}
        else:
            unit.layers[at_limit] = {"class": "compare", "kind": "greater_equal", "from": [step], "value": n.max_steps}
        return {"class": "combine", "kind": "logical_or", "from": [cond, at_limit]}

    def _bound(self) -> str:
        """The loop's per-sequence step limit in its unit: the ops computing it only for the limit
        are layers of the unit (no top-level layers for it), reading the rest with `base:`."""
        em, n, outer, unit = self.em, self.n, self.outer, self.unit
        ops = [em.in_units[vid] for vid in em.low.bound_ops_of(n)]
        made = {v.id for op in ops for v in op.outs}
        for op in ops:
            for a in op.args:
                if a not in made:
                    unit.refs[a] = _base(outer.refs[a])
            em.op(op, unit, {})
        if ops:
            return unit.refs[n.bound]
        ref = outer.refs[n.bound]
        if outer.in_unit and not ref.startswith(("base:", "prev:")):
            # a bound the outer loop's step computes (not hoisted: `range(x.max_seq_len)` of an
            # `end` loop in a loop) is loop-invariant there, so RETURNN moves its layer out of the
            # outer loop, where the inner loop's `base:` no longer finds it (LayerNotFound); a
            # layer reading its own previous value stays
            held = outer.ns.fresh(f"{ref}_step")
            outer.layers[held] = self.per_step_layer(held, ref, False)
            ref = held
        return _base(ref)
