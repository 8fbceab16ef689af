"""How a loop becomes a RETURNN `rec` layer (a mixin of `ReturnnEmitter`, split from it for
size: `self` is the emitter): the unit's layers, states with their `initial_output`, values
held across `end`, the end condition and bound, what crosses the loop's boundary (`base:`,
`rec_unstack`), backward loops, and each sequence's last frame. The rules are in
docs/design.md, "How loops are lowered to RETURNN"; `loop_rules.py` decides them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from netc.emit_tf.grow_rules import check_grown_reads, kept_cum_concats
from netc.emit_tf.loop_rules import (
    axes_of_prev,
    dims_without_prev,
    feeding_state,
    outer_unit_reads,
    readers,
    reads_prev,
    rename_outer_reads,
    shaped_by_others,
    stepped_values,
)
from netc.errors import CompileError
from netc.ir.model import Loop, LoopCarry, LoopLast, Node, Op, Value
from netc.ir.uses import count_uses_in_loop, node_uses
from netc.naming import Code, Namespace
from netc.ops.base import Carry
from netc.passes.returnn_names import UNIT_RESERVED as _UNIT_RESERVED

# `while True` loops have no limit in eager mode and torch; RETURNN's loop needs one
UNBOUNDED_MAX_STEPS = 1000


# RETURNN's batch limit of a loop whose `end` layer holds each sequence's step limit: never reached
NO_BATCH_LIMIT = 2**31 - 1


class Block:
    def __init__(self, reserved: set[str], dims: dict[str, str], in_unit: bool = False, path: tuple[str, ...] = ()):
        self.in_unit = in_unit
        self.path = path  # rec layer names down to this block: () for the network, ("rec",) for its unit
        # IR dim -> the config's dim variable here: inside a loop over `time`, a value that has
        # `time` holds the whole sequence, which RETURNN must see as a dim other than the loop's
        self.dims = dims
        self.ns = Namespace(reserved, python=False, letter_first=True)
        self.layers: dict[str, dict] = {}
        self.refs: dict[int, str] = {}
        self.layer_of: dict[int, str] = {}  # value id -> its own layer in this block (not a `base:`/`prev:` ref)
        self.retagged: dict[tuple, str] = {}  # (value id, tag changes) -> its `reinterpret_data` layer
        self.carries: dict[int, Carry] = {}  # carried value id -> its initial and next value
        self.read: Counter = Counter()  # in a unit: reads of the body's values (count_uses_in_loop)
        # in a unit: its inner loops' rec layers to keep in its loop (`LoopLowering.loop`)
        self.keep_nested: set[str] = set()


def _computed_from(n: Loop, source: int) -> set[int]:
    """The body values of loop `n` computed from body value `source` (and itself), within a step
    or through the loop's states (a state whose next value depends on it, read at the next step)."""
    deps, changed = {source}, True
    while changed:
        changed = False
        for nd in n.body:
            outs = nd.outs if isinstance(nd, Op) else nd.results()
            if any(a in deps for a in node_uses(nd)) and any(o.id not in deps for o in outs):
                deps.update(o.id for o in outs)
                changed = True
        for c in n.carries:
            if c.next in deps and c.inner.id not in deps:
                deps.add(c.inner.id)
                changed = True
    return deps


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


def _output_carry(n: Loop, single: set[int], outer: Block, unfit: Callable[[Value], bool]) -> LoopCarry | None:
    """The state whose layer is the unit's `output` (`prev:output`). RETURNN computes a unit's
    `output` after the loop when no layer of the unit reads it: a state's layer stays in the loop.
    With a `choice`, only the state the choice gives, if any (RETURNN's search follows the unit's
    output: else the output is a copy of the choice); without, the first state computed by a layer
    of its own; in a loop inside a loop, the state that is the loop's result (its output is all
    the outer unit can read), unless it starts from a layer of the outer unit (RETURNN looks for an
    inner unit's `output`'s initial value before the outer unit has built its layers)."""
    own = [c for c in n.carries if c.next in single and (outer.in_unit or not unfit(c.inner))]
    if outer.in_unit:
        results = [c for c in n.carries if c.out is not None]
        if len(results) != 1 or results[0] not in own or n.stacks or n.lasts:
            return None
        return results[0] if outer.refs[results[0].init].startswith("base:") else None
    chosen = {nd.outs[0].id for nd in n.body if isinstance(nd, Op) and nd.op == "choice"}
    if chosen:  # a search follows the output: the choice's layer, or a copy of it
        return next((c for c in own if c.next in chosen), None)
    return own[0] if own else None


def loop_names(nodes: list[Node]) -> list[str]:
    """The rec layers' names, chosen by a pass (a fused op's loop too: this target may emit it)."""
    return [n.name for n in nodes if isinstance(n, Loop)] + [
        name for n in nodes if isinstance(n, Op) for name in loop_names(n.unfused)
    ]


def _body_values(n: Loop) -> list[Value]:
    return [*n.block_args(), *(v for nd in n.body for v in (nd.outs if isinstance(nd, Op) else nd.results()))]


def _base(ref: str) -> str:
    return f"base:{ref}"


class LoopLowering:
    def loop(self, n: Loop, outer: Block, named: dict[int, str]) -> None:
        """A rec layer; `named`: results that are outputs, whose layers take the output's name."""
        rec = n.name  # chosen by the returnn_names pass (parameter names depend on it); reserved
        path = (*outer.path, rec)
        unit = self.blocks[path] = Block(
            _UNIT_RESERVED | set(loop_names(n.body)), dict(outer.dims), in_unit=True, path=path
        )
        axis = Code(outer.dims[n.axis])
        check_grown_reads(n, self.grown, self.values | {v.id: v for v in _body_values(n)})
        crossing = [*(i.outer for i in n.invariants), *(c.init for c in n.carries if c.init not in self.grown)]
        if any(n.axis in self.values[v].dims for v in crossing):  # the whole axis is read in the body
            var = self.dim_ns.fresh(f"{outer.dims[n.axis]}_whole")
            self.whole_dims.append((var, f"{n.axis}:whole"))
            unit.dims[n.axis] = var
        base = {v: _base(self._retag(outer, v, outer.dims, unit.dims, self._crossing(outer, v))) for v in crossing}
        outer.layers[rec] = {}  # keeps the layer order readable: the loop before what reads it
        # `prev:` refs must be known before the body: each carry's layer is named after its
        # variable (first: state is what a reader of the config follows), and is the layer
        # computing its next value when that is an op of this body that RETURNN keeps in the loop
        single = {nd.outs[0].id for nd in n.body if isinstance(nd, Op) and len(nd.outs) == 1}
        stepped = stepped_values(n)
        for nd in n.body:  # known before the body's layers are: how its states are emitted depends on them
            self.values.update((v.id, v) for v in (nd.outs if isinstance(nd, Op) else nd.results()))
        self.values.update((v.id, v) for v in n.block_args())

        # RETURNN takes the loop's axis from the unit's `output`: a loop with `end` has no lengths
        # before it runs, and it takes them from the output's first dynamic dim if that has another
        # one (an assertion); in any loop, an output state whose template came from its initial
        # value takes that value's dynamic dim for time, not the loop's axis (the rec layer's
        # template and output then differ: an assertion). Such an output is not a state
        def has_other(v: Value) -> bool:
            return n.target is None and any(self.g.dim(d).kind == "dynamic" for d in v.dims)

        grown = [c for c in n.carries if c.init in self.grown]  # its layer is `cum_concat`, its own state
        output_carry = _output_carry(n, single, outer, lambda v: has_other(v) or v.id in {c.inner.id for c in grown})
        carry_layers: dict[int, str] = {}
        reserved: dict[int, str] = {}
        for c in n.carries:
            self.values[c.inner.id] = c.inner
            unit.carries[c.inner.id] = Carry(base.get(c.init, ""), c.init in self.zeros, c.next)
            carry_layers[c.inner.id] = "output" if c is output_carry else unit.ns.fresh(c.name)
            if c.next in single and c.next not in reserved and c.next in stepped:
                reserved[c.next] = carry_layers[c.inner.id]
            unit.refs[c.inner.id] = f"prev:{carry_layers[c.inner.id]}"
        in_loop = feeding_state(n)
        read_whole = {s.value for s in n.stacks} | {ll.value for ll in n.lasts}
        prev_layers: dict[int, str] = {}  # a state read through a layer kept in the loop -> that layer
        for c in n.carries:
            if c.inner.id in read_whole or not readers(n, c.inner.id) <= in_loop:
                # RETURNN moves a layer that no state needs after the loop and gives it the frames
                # of the states it reads shifted by one, along the axis it takes for time: of a
                # value with another dynamic dim, possibly that one, and none when the state's
                # template came from its `prev:` or initial value (no time axis: an assertion).
                # Such a state's previous value is read through a layer kept in the loop
                prev = unit.ns.fresh(f"{c.name}_prev")
                unit.layers[prev] = self._per_step(prev, unit.refs[c.inner.id], False)
                unit.refs[c.inner.id] = unit.layer_of[c.inner.id] = prev
                prev_layers[c.inner.id] = prev
        read = unit.read = count_uses_in_loop(n)
        batched = {base[v] for v in crossing if "batch" in self.values[v].dims}  # refs with a batch dim
        steps_from: list[str] = []  # a sequence no layer reads: RETURNN must still build it first
        for s in n.seqs:
            self.values[s.inner.id] = s.inner
            if s.outer == n.target:  # the choice layer takes its target by data key
                continue
            src = self._crossing(outer, s.outer)
            if n.reverse:
                src = self._reverse(outer, src, n.axis, f"{self.values[s.outer].name or 'x'}_reversed")
            if not read[s.inner.id]:
                steps_from.append(src)
                continue
            name = unit.ns.fresh(s.inner.name or f"{self.values[s.outer].name or 'x'}_t")
            unit.layers[name] = {"class": "rec_unstack", "from": _base(src), "axis": axis}
            unit.refs[s.inner.id] = unit.layer_of[s.inner.id] = name
            if "batch" in s.inner.dims:
                batched.add(name)
        for i in n.invariants:
            self.values[i.inner.id] = i.inner
            unit.refs[i.inner.id] = base[i.outer]
        # RETURNN moves an inner loop's rec layer that no state needs out of this loop and runs it
        # over the stacked frames of the values of this loop's step it reads: its unit's templates
        # then put this loop's axis elsewhere than its layers do (an assertion). Kept in the loop
        unit.keep_nested = {
            nd.name
            for nd in n.body
            if isinstance(nd, Loop)
            and any(r.id in stepped for r in nd.results())
            and not any(r.id in in_loop for r in nd.results())
        }
        self.block(n.body, unit, reserved)
        # a layer kept in a searched loop reads the choice too: its frames are per hypothesis
        beam = next((unit.refs[nd.outs[0].id] for nd in n.body if isinstance(nd, Op) and nd.op == "choice"), None)
        for nd in kept_cum_concats(n):  # its frame through a layer RETURNN keeps in the loop
            layer = unit.layers[self.op_layers[nd.outs[0].id][-1]]
            frame = unit.ns.fresh(f"{self.op_layers[nd.outs[0].id][-1]}_frame")
            # not reading the choice (a search's beam): the frame is needed before it
            unit.layers[frame] = self._per_step(frame, layer["from"], False)
            layer["from"] = frame
        for c in n.carries:
            name = carry_layers[c.inner.id]
            if name not in unit.layers:
                unit.layers[name] = self._per_step(name, unit.refs[c.next], c.next in stepped, beam)
                if c.next in stepped:
                    unit.layer_of.setdefault(c.next, name)
            if c not in grown:
                self._initial_output(unit, outer, name, c.init, base[c.init], batched)
            init = unit.layers[name].get("initial_output")
            if c.inner.id in prev_layers and isinstance(init, str) and init.startswith("base:"):
                # RETURNN's first template of a layer is its `base:` initial value's: the state and
                # its `_prev` layer, a cycle through the state's next value, start alike (else the
                # one template with the state's dims goes round the cycle and never settles)
                unit.layers[prev_layers[c.inner.id]]["initial_output"] = init
        results = [(c.next, c.out, carry_layers[c.inner.id], "state") for c in n.carries if c.out is not None]
        results += [(s.value, s.out, s.name, "stack") for s in n.stacks]
        results += [(ll.value, ll.out, ll.name, "last") for ll in n.lasts if not ll.after_end]
        results += [
            (self._held(n, unit, outer, ll, batched), ll.out, ll.name, "held") for ll in n.lasts if ll.after_end
        ]
        # RETURNN's last frame without `include_eos` is the step before the ending one: a value the
        # ending step computes before the `break` would be in no frame it keeps (and a batch that
        # ends at its first step would stack no frame, which TF cannot stack). A loop whose appends
        # stand after the `break` runs with `include_eos` over an axis of its own, its stacks
        # dropping the ending step after it
        eos = n.include_eos
        trim: str | None = None  # that axis
        if n.end is not None and not eos and not outer.in_unit:
            trim = self.dim_ns.fresh(f"{outer.dims[n.axis]}_steps")
            self.whole_dims.append((trim, f"{n.axis}:steps"))
            axis, eos = Code(trim), True
        elif n.end is not None and not eos:  # a loop inside another: its result as RETURNN gives it
            before = [c.name for c in n.carries if c.out is not None] + [ll.name for ll in n.lasts if not ll.after_end]
            if before:
                raise CompileError(
                    n.span,
                    f"RETURNN target: `{before[0]}` is assigned before `if end(...): break` of a loop inside "
                    f"another loop, but the stacks are appended after it, so its value after the loop would "
                    f"be one step off; assign it after the `break` (bound before the loop) or append before it",
                )
        if outer.in_unit and len(results) != 1:
            raise CompileError(
                n.span,
                "RETURNN target: a loop inside another loop can give one result (a stacked list "
                "or one variable read after it); split it into several loops",
            )
        result_layers: list[str] = []
        kept = ""  # with `trim`: the layer of each sequence's kept steps (`_kept`)
        held: dict[int, str] = {}  # a value no step changes -> its layer that each step computes
        # searching, RETURNN stacks a layer per hypothesis only if it has the beam, which a layer
        # has when it reads the choice (in this step or through a state): the frames of one that
        # does not (a counter, a state ignoring the labels, an encoder frame) are one per sequence,
        # while the loop's lengths are per hypothesis. Such a result is read through a layer that
        # also reads the choice (`per_step` with `beam`): a copy per hypothesis
        chosen = [nd.outs[0].id for nd in n.body if isinstance(nd, Op) and nd.op == "choice"]
        beamed = _computed_from(n, chosen[0]) if chosen else set()

        def without_beam(v: int | str) -> bool:
            return bool(chosen) and isinstance(v, int) and v not in beamed

        for value, out, hint, kind in results:
            if kind == "held":
                name, kind = value, "last"  # its own state layer
            elif kind == "state" and value not in stepped:
                name = hint  # the state's own layer, kept in the loop above
            elif value in stepped and not (kind == "last" and self._dynamic(value)) and not without_beam(value):
                name = self._own_layer(unit, value, hint)
            else:  # also a last value with a dynamic dim: RETURNN may take the last frame along it
                if value not in held:
                    held[value] = unit.ns.fresh(hint)
                    unit.layers[held[value]] = self._per_step(held[value], unit.refs[value], False, beam)
                name = held[value]
            result_layers.append(name)
            self.values[out.id] = out
            if outer.in_unit:
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
                    ref = self._gather_last(outer, rec, out, n.axis, init)
                if rec in outer.keep_nested:  # by a layer reading its own previous value (`per_step`)
                    step = outer.ns.fresh(f"{ref}_step")
                    outer.layers[step] = self._per_step(step, ref, False)
                    ref = step
            elif kind == "stack":
                unit.layers[name]["is_output_layer"] = True
                if beam and name != beam and value in beamed:
                    # RETURNN moves a layer no step needs out of a searched loop, and one reading
                    # two such layers there finds no search choices ("has beam but no search
                    # choices": `where(s > 0, s, 0.1 * s)` stacked); collocated with the choice,
                    # it and what it reads stay in the loop
                    unit.layers[name].setdefault("collocate_with", [beam])
                ref = f"{rec}/{name}"
                if trim is not None:
                    kept = kept or self._kept(outer, unit, n, rec, trim)
                    ref = self._trimmed(outer, unit, n, trim, kept, ref, out, hint)
            else:
                unit.layers[name]["need_last"] = True
                # RETURNN reads it as a previous value too (a held value, its layer's name here,
                # has its own initial value)
                if isinstance(value, int) and self.values[value].sparse_dim:
                    unit.layers[name].setdefault("initial_output", "zeros")
                # the output's own name unless a whole axis is retagged after it (a layer more)
                retagged = any(unit.dims[d] != outer.dims[d] for d in out.dims)
                ref = (None if retagged else named.get(out.id)) or outer.ns.fresh(out.name or f"{name}_last")
                outer.layers[ref] = {"class": "rec_last_output", "rec_layer": rec, "sub_layer_name": name}
                outer.layer_of[out.id] = ref
            if kind == "stack" and n.reverse:  # the loop ran over reversed sequences: back to frame order
                ref = self._reverse(outer, ref, n.axis, hint)
            outer.refs[out.id] = ref
            # a stack's `n.axis` is the loop's own; in a last value `n.axis` is the whole axis
            inside = {**unit.dims, n.axis: outer.dims[n.axis]} if kind == "stack" else unit.dims
            outer.refs[out.id] = self._retag(outer, out.id, inside, outer.dims)
            self._note_dims(outer, out, outer.refs[out.id])
        if "output" not in unit.layers:
            # searching, RETURNN takes the rec layer's hypotheses from its output: the choice
            first = self._own_layer(unit, chosen[0], "out") if chosen else result_layers[0]
            unit.layers["output"] = {"class": "copy", "from": first}

            # a held value's result is its layer (`_held`); its outer value has the body value's dims
            def step_value(r) -> Value:
                return self.values[r[0]] if isinstance(r[0], int) else r[1]

            if not chosen and has_other(step_value(results[0])):
                plain = [name for r, name in zip(results, result_layers) if not has_other(step_value(r))]
                if plain:
                    unit.layers["output"]["from"] = plain[0]
                else:  # the first result over its other dynamic dims (nothing reads it)
                    dims = [unit.dims[d] for d in step_value(results[0]).dims if self.g.dim(d).kind == "dynamic"]
                    unit.layers["output"] = {
                        "class": "reduce",
                        "mode": "max",
                        "from": first,
                        "axis": [Code(d) for d in dims],
                    }
        rec_layer = {"class": "rec", "from": steps_from, "axis": axis, "unit": unit.layers}
        if outer.in_unit:  # see `outer_unit_reads`
            for name in outer_unit_reads(unit.layers, set(outer.layers)):
                if reads_prev(outer.layers, name):  # in the loop anyway
                    continue
                # a copy of its own, collocated: the layer itself may still move out (RETURNN
                # always moves a `rec_unstack`, and a layer kept in reading a part of a moved one,
                # `split/0`, is not found)
                step = outer.ns.fresh(f"{name}_step")
                outer.layers[step] = {"class": "copy", "from": name, "collocate_with": [rec]}
                rec_layer["unit"] = unit.layers = rename_outer_reads(unit.layers, name, step)
        if n.target is not None:  # training: the target's frames; searching: a new axis per search
            del rec_layer["axis"]
            rec_layer["target"] = next(i.name for i in self.g.inputs if i.value.id == n.target)
        if n.end is not None:
            unit.layers["end"] = self._end(n, unit, outer, eos)
            rec_layer["include_eos"] = eos
            # RETURNN needs a loop limit for the whole batch; `end` stops each sequence at its own
            rec_layer["max_seq_len"] = NO_BATCH_LIMIT if n.bound is not None else n.max_steps or UNBOUNDED_MAX_STEPS
        outer.layers[rec].update(rec_layer)

    def _initial_output(self, unit: Block, outer: Block, name: str, init: int, ref: str, batched: set[str]) -> None:
        """The initial value `init` (an outer value, read as `ref`) of the unit's state layer `name`."""
        if init in self.zeros and shaped_by_others(unit.layers, name, batched) and not axes_of_prev(unit.layers, name):
            # zeros are RETURNN's default, if its first template of the state has all its dims
            known = {r: frozenset(self.values[v].dims) for v, r in unit.refs.items() if v in self.values}
            known.update({r: frozenset(self.values[v].dims) for v, r in unit.layer_of.items() if v in self.values})
            shaped = dims_without_prev(unit.layers, name, known)
            if shaped is None or set(self.values[init].dims) <= shaped:
                return
        # RETURNN looks for an inner unit's initial values before the outer unit has built its
        # own layers: zeros made there are RETURNN's `"zeros"`
        in_outer_unit = outer.in_unit and not ref.startswith("base:base:")
        zeros = in_outer_unit and self._static_zeros(init)
        made = outer.layers.get(ref.removeprefix("base:"))
        if zeros and "batch" in self.values[init].dims and made and not shaped_by_others(unit.layers, name, batched):
            # nothing else of the inner unit has the batch dim (a loop reading no outer value):
            # RETURNN's "zeros" would have none; the same constant at the top level, which the
            # inner unit may read
            root = self.blocks[()]
            top = root.ns.fresh(f"{name}_init")
            root.layers[top] = dict(made)
            ref, zeros = "base:" * len(unit.path) + top, False
        unit.layers[name]["initial_output"] = "zeros" if zeros else ref

    def _held(self, n: Loop, unit: Block, outer: Block, ll: LoopLast, batched: set[str]) -> str:
        """A value assigned after `if end(...): break`, held at the step where `end` held: a state
        layer that keeps its previous value there (its value before the loop at the first step).
        RETURNN's last frame of it is what Python holds after the loop: with `include_eos` the
        ending frame, which holds; without, the frame before it (RETURNN reads the previous value
        at the ending frame, the initial value when that is the first); a sequence stopped by its
        bound (not by the user's condition) has its last step's value."""
        name = unit.ns.fresh(ll.name)
        unit.layers[name] = {
            "class": "switch",
            "condition": unit.refs[n.end],
            "true_from": f"prev:{name}",
            "false_from": unit.refs[ll.value],
        }
        init = next(i.outer for i in n.invariants if i.inner.id == ll.init)
        self._initial_output(unit, outer, name, init, unit.refs[ll.init], batched)
        return name

    def _end(self, n: Loop, unit: Block, outer: Block, include_eos: bool) -> dict:
        """The unit's `end` layer: the user's condition, or the sequence's step limit reached."""
        cond = unit.refs[n.end]
        chosen = [nd.outs[0].id for nd in n.body if isinstance(nd, Op) and nd.op == "choice"]
        if chosen and n.end not in _computed_from(n, chosen[0]):
            # a search takes the beam its hypotheses end in from the `end` layer's dependencies (it
            # asserts they reach the choice): an end of the frames alone (a transducer's last frame)
            # reads the choice through a comparison that never holds
            never = unit.ns.fresh("never")
            unit.layers[never] = {"class": "compare", "kind": "less", "from": [unit.refs[chosen[0]]], "value": 0}
            ended = unit.ns.fresh("ended")
            unit.layers[ended] = {"class": "combine", "kind": "logical_or", "from": [cond, never]}
            cond = ended
        bound = self._bound(n, unit, outer) if n.bound is not None else None
        if n.bound is None and n.max_steps is None:
            return {"class": "copy", "from": cond}
        # steps 0 .. limit-1 run; with include_eos the last of them is the ending step itself
        step = unit.ns.fresh("step")
        unit.layers[step] = {"class": "eval", "from": ":i", "eval": "source(0) + 1" if include_eos else "source(0)"}
        at_limit = unit.ns.fresh("at_limit")
        if bound is not None:
            unit.layers[at_limit] = {"class": "compare", "kind": "greater_equal", "from": [step, bound]}
        else:
            unit.layers[at_limit] = {"class": "compare", "kind": "greater_equal", "from": [step], "value": n.max_steps}
        return {"class": "combine", "kind": "logical_or", "from": [cond, at_limit]}

    def _bound(self, n: Loop, unit: Block, outer: Block) -> str:
        """The loop's per-sequence step limit in its unit: the ops computing it only for the limit
        are layers of the unit (no top-level layers for it), reading the rest with `base:`."""
        ops = [self.in_units[vid] for vid in n.bound_ops]
        made = {v.id for op in ops for v in op.outs}
        for op in ops:
            for a in op.args:
                if a not in made:
                    unit.refs[a] = _base(outer.refs[a])
            self.op(op, unit, {})
        if ops:
            return unit.refs[n.bound]
        ref = outer.refs[n.bound]
        if outer.in_unit and not ref.startswith(("base:", "prev:")):
            # a bound the outer loop's step computes (not hoisted: `range(x.max_seq_len)` of an
            # `end` loop in a loop) is loop-invariant there, so RETURNN moves its layer out of the
            # outer loop, where the inner loop's `base:` no longer finds it (LayerNotFound); a
            # layer reading its own previous value stays
            held = outer.ns.fresh(f"{ref}_step")
            outer.layers[held] = self._per_step(held, ref, False)
            ref = held
        return _base(ref)

    def _crossing(self, outer: Block, vid: int) -> str:
        """The reference to value `vid` of `outer` that a loop in it reads. An outer unit's state
        is read through a layer of that unit: RETURNN builds an inner unit while it builds the
        outer unit's layers, and an inner `base:prev:h` (a read of the outer state, which the
        inner loop computes) is a dependency loop to it."""
        ref = outer.refs[vid]
        if not ref.startswith("prev:"):
            return ref
        return self._own_layer(outer, vid, f"{self.values[vid].name or 'state'}_prev")

    def _retag(self, blk: Block, vid: int, old: dict[str, str], new: dict[str, str], src: str | None = None) -> str:
        """A reference to value `vid` of `blk` (read as `src`, by default its reference) with its
        dims under the tags of `new` (a `reinterpret_data` layer when a tag differs: the whole
        axis entering or leaving a loop)."""
        src = src or blk.refs[vid]
        changes = {Code(old[d]): Code(new[d]) for d in self.values[vid].dims if old[d] != new[d]}
        if not changes:
            return src
        key = (vid, tuple(changes.items()))
        if key not in blk.retagged:
            name = blk.ns.fresh(f"{self.values[vid].name or 'x'}_{'_'.join(changes.values())}")
            blk.layers[name] = {"class": "reinterpret_data", "from": src, "set_dim_tags": changes}
            blk.retagged[key] = name
        return blk.retagged[key]

    def _reverse(self, blk: Block, src: str, axis: str, hint: str) -> str:
        """RETURNN ignores `direction: -1` on subnetwork units: reverse within each length instead."""
        self.helpers[REVERSE_HELPER] = REVERSE_HELPER_SOURCE
        name = blk.ns.fresh(hint)
        blk.layers[name] = {
            "class": "eval",
            "from": src,
            "eval": Code(REVERSE_HELPER),
            "eval_locals": {"axis_dim": Code(blk.dims[axis])},
        }
        return name

    def _kept(self, outer: Block, unit: Block, n: Loop, rec: str, trim: str) -> str:
        """A layer of the steps each sequence keeps of a loop run with `include_eos` over its own
        axis `trim` whose appends stand after the `break`: a sequence stopped by its bound ran its
        last step whole (no frame dropped), one stopped by the user's condition drops that step."""
        ended = unit.ns.fresh("ended")
        unit.layers[ended] = {"class": "cast", "from": unit.refs[n.end], "dtype": "int32"}
        if n.end not in stepped_values(n):
            # a condition no step changes: RETURNN would move the cast out before the loop, where
            # it has no time axis to take the last frame along (an assertion); kept in the loop
            cast = unit.ns.fresh("ended_cast")
            unit.layers[cast] = unit.layers.pop(ended)
            unit.layers[ended] = self._per_step(ended, cast, False)
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

    def _trimmed(
        self, outer: Block, unit: Block, n: Loop, trim: str, kept: str, ref: str, out: Value, hint: str
    ) -> str:
        """Stack `ref` of a loop run over its own axis `trim` (`_kept`): each sequence's frames
        without the ending step, over the loop's dim."""
        # batch-major first: `slice_nd` of a time-major tensor puts the new lengths on another dim
        dims = {**unit.dims, n.axis: trim}
        order = [Code(dims[d]) for d in ["batch", n.axis, *(d for d in out.dims if d not in ("batch", n.axis))]]
        bm = outer.ns.fresh(f"{hint}_with_end")
        outer.layers[bm] = {"class": "transpose", "from": ref, "perm": order}
        name = outer.ns.fresh(hint)
        outer.layers[name] = {
            "class": "slice_nd",
            "from": bm,
            "axis": Code(trim),
            "start": 0,
            "size": kept,
            "out_spatial_dim": Code(outer.dims[n.axis]),
        }
        return name

    def _gather_last(self, outer: Block, rec: str, out: Value, axis: str, init: str | None) -> str:
        """Each sequence's last frame of a rec layer's output (`rec_last_output` cannot live in a
        unit). Where a sequence may have no frame along `axis` (a dim an op made, e.g. a strided
        `Conv1d`'s), the loop ran no step for it: the state's initial value `init` (a layer),
        zeros for another value, as torch gives them (TF's gather fails on position -1)."""
        name = outer.ns.fresh(out.name or f"{rec}_last")
        length, pos = outer.ns.fresh(f"{name}_len"), outer.ns.fresh(f"{name}_pos")
        outer.layers[length] = {"class": "length", "from": rec, "axis": Code(outer.dims[axis])}
        if not self.g.dim(axis).may_be_empty:
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
