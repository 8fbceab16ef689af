"""Which layers of a rec unit RETURNN keeps in its loop, and how the emitter makes it keep them.

RETURNN decides at construction, from the dependency graph alone, which layers of a unit run
in the loop (`optimize_move_layers_out`): a layer that depends on no frame, state or choice
runs once before the loop, without the loop's axis; a layer that no state needs runs after
it, over the stacked frames of what it reads. These functions tell the emitter which values
are which, so that it can lower stacks, last frames and states that RETURNN would otherwise
move out of reach (see docs/design.md, "How loops are lowered to RETURNN").
"""

from __future__ import annotations

from collections.abc import Callable

from netc.emit_tf.block import Block
from netc.errors import CompileError
from netc.ir.loopkinds import choice_ops, chooses, chosen
from netc.ir.model import Loop, LoopCarry, Op, Value
from netc.ir.uses import node_uses
from netc.naming import Code


def stepped_values(n: Loop) -> set[int]:
    """The body values that RETURNN sees change from step to step: those computed from a frame,
    a state (`prev:`), a `choice` or a nested loop reading any of these. RETURNN moves every
    other layer out of the loop before it runs, where it has no time axis."""
    stepped = {v.id for v in [*(s.inner for s in n.seqs), *(c.inner for c in n.carries)]}
    for nd in n.body:
        if isinstance(nd, Loop):
            crossing = [*(s.outer for s in nd.seqs), *(i.outer for i in nd.invariants), *(c.init for c in nd.carries)]
            if nd.bound is not None:
                crossing.append(nd.bound)
            if any(v in stepped for v in crossing):
                stepped |= {r.id for r in nd.results()}
        elif chooses(nd) or any(a in stepped for a in nd.args):
            stepped |= {o.id for o in nd.outs}
    return stepped


def feeding_state(n: Loop) -> set[int]:
    """The body values that a state's next value or the `end` condition is computed from: RETURNN
    keeps their layers in the loop; it moves the others after it."""
    need = {c.next for c in n.carries} | ({n.end} if n.end is not None else set())
    for nd in reversed(n.body):
        outs = nd.outs if isinstance(nd, Op) else nd.results()
        if any(v.id in need for v in outs):
            if isinstance(nd, Op):
                need.update(nd.args)
            else:
                need.update(s.outer for s in nd.seqs)
                need.update(i.outer for i in nd.invariants)
                need.update(c.init for c in nd.carries)
    return need


def readers(n: Loop, vid: int) -> set[int]:
    """The results of the body's ops and nested loops that read value `vid` (a state's inner
    value: the state's own next value when it is that)."""
    out = {c.next for c in n.carries if c.next == vid}
    for nd in n.body:
        if isinstance(nd, Op):
            if vid in nd.args:
                out.update(v.id for v in nd.outs)
        elif vid in {*(s.outer for s in nd.seqs), *(i.outer for i in nd.invariants), *(c.init for c in nd.carries)}:
            out.update(v.id for v in nd.results())
    return out


def computed_from(n: Loop, source: int | set[int]) -> set[int]:
    """The body values of loop `n` computed from body value(s) `source` (and these), within a step
    or through the loop's states (a state whose next value depends on it, read at the next step)."""
    deps, changed = set(source) if isinstance(source, set) else {source}, True
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


def rebeamed_states(n: Loop) -> set[int]:
    """A loop with several choices: the next values of states that, within the step, depend on
    an earlier choice but not on the last. RETURNN carries a state to the next step with the
    hypotheses its layer has; one of an earlier choice's would be compared with the last's
    there ("cannot compare search choices"). Such a state's layer is a copy that also reads the
    last choice (`per_step` with `beam`): its frames follow the step's final hypotheses."""
    labels = chosen(n)
    if len(labels) < 2:
        return set()
    earlier, last = _in_step(n, set(labels[:-1])), _in_step(n, {labels[-1]})
    return {c.next for c in n.carries if c.next in earlier and c.next not in last}


def unchained_choices(n: Loop) -> list[tuple[int, int, bool]]:
    """(earlier, later, across) labels of a search loop whose later choice's scores read the
    earlier choice through a layer of zeros computed from it (`RecLowering._chain_choices`): every
    later choice of the step, after the one before it (`across` false), and the step's first
    (with one choice, the choice itself), after the previous step's last (`across` true), where
    its scores read no state computed within the step from that choice (scores from attention on
    the previous decoder state only). RETURNN orders choices by their dependencies as it finds
    them while it builds the unit's templates, which go round the step's cycles: a dependency
    through the step's other layers (attention on the position chosen) or through a state
    computed before the choice may not be seen yet where it compares two choices ("Search
    choices cannot be compared"); a direct one always is. A `choice` whose scores have no
    hypotheses at all follows its own previous step's, not the last choice's."""
    labels, ops = chosen(n), choice_ops(n)
    if not labels:
        return []
    out = []
    beamed = {c.inner.id for c in n.carries if c.next in _in_step(n, {labels[-1]})}
    if ops[0].args[0] not in _in_step(n, beamed):
        out.append((labels[-1], labels[0], True))
    out += [(labels[i - 1], labels[i], False) for i in range(1, len(labels))]
    return out


def _in_step(n: Loop, source: set[int]) -> set[int]:
    """The body values of loop `n` computed from `source` within one step (not through states)."""
    deps = set(source)
    for nd in n.body:
        outs = nd.outs if isinstance(nd, Op) else nd.results()
        if any(a in deps for a in node_uses(nd)):
            deps.update(o.id for o in outs)
    return deps


def check_inner_states_searched(n: Loop) -> None:
    """RETURNN's search cannot follow the beam into the state of a rec layer nested in the searched
    unit: at each inner step it looks the outer `prev:output` (where a value computed from the
    previous label takes its hypotheses from) up among the inner unit's layers (an AttributeError
    or KeyError while it builds the loop). Stacks and values read after an inner loop pass."""
    labels = chosen(n)
    if not labels:
        return
    beamed = computed_from(n, set(labels))
    for nd in n.body:
        if not isinstance(nd, Loop) or not nd.carries:
            continue
        sources = {i.inner.id for i in nd.invariants if i.outer in beamed}
        sources |= {s.inner.id for s in nd.seqs if s.outer in beamed}
        sources |= {c.inner.id for c in nd.carries if c.init in beamed}
        inner = computed_from(nd, sources) if sources else set()
        state = next((c for c in nd.carries if c.inner.id in inner), None)
        if state is not None:
            raise CompileError(
                nd.span,
                f"RETURNN target: in a loop with `choice`, an inner loop's state (`{state.name}`) cannot be "
                "computed from the chosen labels (RETURNN's beam search cannot follow the hypotheses into "
                "it); stack the inner loop's values with `append` instead, or search with the torch target",
            )


def output_carry(n: Loop, single: set[int], outer: Block, unfit: Callable[[Value], bool]) -> LoopCarry | None:
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
    labels = chosen(n)
    if labels:  # a search follows the output: the step's last choice's layer, or a copy (a state
        # of an earlier choice is carried with the last one's hypotheses: `_rebeamed`)
        return next((c for c in own if c.next == labels[-1]), None)
    return own[0] if own else None


def per_step(name: str, src: str, stepped: bool, beam: str | None = None) -> dict:
    """The layer `name` giving `src` at each step. RETURNN moves a layer no step changes out of
    the loop before it runs, where it has no time axis for a stack, a last frame or a state to
    use: reading its own previous value (and ignoring it) keeps it in the loop. Its template is
    `src`'s dims afresh (`STEP_TYPE_HELPER`): a copy of an outer value's would keep that value's
    lack of a time axis when RETURNN adds the loop's (it reads a state's frames after the loop
    that way). The initial value is never read (sparse values need one given).

    In a search, `beam` is the choice's layer: read too, it gives the layer the beam (its frames
    are per hypothesis, as the loop's lengths are), and being collocated with it keeps the layer
    in the loop (RETURNN never moves a choice). Its own previous value is not read there: with
    both, RETURNN compares the previous step's choice with this one's, and its trace of the
    previous choice through a state reading its own previous value can miss it ("search choices
    cannot be compared"). `src` may then change from step to step (`stepped` false for it): a
    value that does not read the choice (a counter) has no beam of its own."""
    if stepped:
        return {"class": "copy", "from": src}
    if beam:
        return {
            "class": "eval",
            "from": [src, beam],
            "eval": "(source(1), source(0))[-1]",
            "out_type": Code(STEP_TYPE_HELPER),
            "collocate_with": [beam],
        }
    return {
        "class": "eval",
        "from": [src, f"prev:{name}"],
        "eval": "(source(1), source(0))[-1]",
        "out_type": Code(STEP_TYPE_HELPER),
        "initial_output": "zeros",
    }


STEP_TYPE_HELPER = "netc_step_type"
STEP_TYPE_HELPER_SOURCE = f'''def {STEP_TYPE_HELPER}(sources, name, **_kwargs):
    """The first source's dims with the time axis left to RETURNN: a layer kept in a loop gets the
    loop's axis as its time axis when RETURNN stacks its frames."""
    from returnn.tf.util.data import SearchBeam

    out = sources[0].output
    out = out.copy_template_new_dim_tags(out.dim_tags, name=f"{{name}}_output")
    beam = SearchBeam.get_combined_beam(*(s.output.beam for s in sources))
    return out.copy_extend_with_beam(beam) if beam else out
'''


REBEAM_TYPE_HELPER = "netc_rebeamed_type"
REBEAM_TYPE_HELPER_SOURCE = f'''def {REBEAM_TYPE_HELPER}(sources, name, **_kwargs):
    """The sum of the sources (a state and zeros of the step's last choice) as `combine` makes it,
    batch-major: RETURNN's templates of a unit's layers come without beams selected, while the
    layer itself reads a source of an earlier choice's hypotheses through a beam selection, which
    is batch-major; the state's template and its layer must put the batch axis alike."""
    from returnn.tf.util.data import Data

    out = Data.get_common_data([s.output for s in sources], allow_broadcast_all_sources=True, name=f"{{name}}_output")
    return out.copy_as_batch_major()


def {REBEAM_TYPE_HELPER}_ints(sources, name, **kwargs):
    """`{REBEAM_TYPE_HELPER}` of labels a state keeps as plain ints (it started as ints)."""
    out = {REBEAM_TYPE_HELPER}(sources, name, **kwargs)
    out.sparse = False
    return out
'''


# layers whose output always has the batch dim, whatever their sources
_BATCHED_CLASSES = {"rnn_cell", "choice"}


def _sources(layer: dict) -> list[str]:
    sources = layer.get("from", [])
    sources = [sources] if isinstance(sources, str) else sources
    return [s[0] if isinstance(s, tuple) else s for s in sources if isinstance(s, (str, tuple))]


# options by which a layer names axes of its input
_NAMES_AXES = {"axis", "axes", "reduce", "var1", "var2"}


def axes_of_prev(layers: dict[str, dict], name: str) -> bool:
    """Whether a layer naming axes of its input (a reduce, a dot) reads the state layer's previous
    value, maybe through others (not through a linear layer). RETURNN first builds the unit's templates from a previous value
    without dims when the state has no initial value given: such a layer fails there."""
    readers: dict[str, list[str]] = {}
    for n, layer in layers.items():
        for src in _sources(layer):
            readers.setdefault(src, []).append(n)
    todo, seen = list(readers.get(f"prev:{name}", [])), set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if _NAMES_AXES & layers[n].keys():
            return True
        if layers[n].get("class") != "linear":  # a linear's output has its own feature dim
            todo.extend(readers.get(n, []))
    return False


def shaped_by_others(layers: dict[str, dict], name: str, batched: set[str]) -> bool:
    """Whether RETURNN can tell the state layer's shape, batch included, without its initial
    value (then its default initial output, zeros, has that shape): some layer it is computed
    from, not through a `prev:` value, has a batch dim (a frame, a batched value from outside)."""
    todo, seen = [name], {name}
    while todo:
        layer = layers[todo.pop()]
        if layer.get("class") in _BATCHED_CLASSES:
            return True
        sources = layer.get("from", [])
        for src in [sources] if isinstance(sources, str) else sources:
            src = src[0] if isinstance(src, tuple) else src  # a concat's (source, dim)
            if not isinstance(src, str) or src.startswith("prev:"):
                continue
            if src in batched:
                return True
            if src in layers and src not in seen:
                seen.add(src)
                todo.append(src)
    return False


def dims_without_prev(layers: dict[str, dict], name: str, dims: dict[str, frozenset[str]]) -> set[str] | None:
    """The dims RETURNN's first template of the state layer `name` has, built before any state
    has a shape (a `prev:` value has no dims then): those of the layers it is computed from that
    read no previous value (frames, values from outside) and those that layers reading one make
    (a linear's feature dim, a merge's); None when a cell's or choice's output (whole, batched)
    makes it. `dims` are the known dims of layers and refs (`prev:` ones too)."""
    reads_prev: dict[str, bool] = {}

    def prev_free(n: str) -> bool:
        if n not in layers:
            return not n.startswith("prev:")
        if n not in reads_prev:
            reads_prev[n] = True  # a cycle not through `prev:` cannot be
            reads_prev[n] = all(prev_free(s) for s in _sources(layers[n]))
        return reads_prev[n]

    out: set[str] = set()
    todo, seen = list(_sources(layers[name])), {name}
    while todo:
        src = todo.pop()
        if src in seen or src.startswith("prev:"):
            continue
        seen.add(src)
        if src not in layers or prev_free(src) and src in dims:
            out |= dims.get(src, set())
            continue
        if layers[src].get("class") in _BATCHED_CLASSES:
            return None
        if not prev_free(src) and src in dims:  # the dims it makes: none of its sources has them
            srcs = _sources(layers[src])
            if all(x in dims for x in srcs):
                out |= dims[src] - set().union(*(dims[x] for x in srcs))
        todo.extend(_sources(layers[src]))
    return out


def outer_unit_reads(unit: dict[str, dict], outer: set[str]) -> list[str]:
    """The layers of the enclosing unit (names in `outer`) that a nested loop's unit reads
    (`base:x`; `base:base:x` from a unit nested in it). RETURNN moves a nested loop that no
    state needs to after the outer loop, where the outer unit's per-step layers it reads are not
    found if they ran before the loop (`LayerNotFound`): the nested loop reads a copy of each,
    collocated with it, so that it moves out of the loop only together with it, or stays."""
    found: set[str] = set()
    _outer_refs(unit, 1, lambda name: found.add(name) or None, outer)
    return sorted(found)


def reads_prev(layers: dict[str, dict], name: str) -> bool:
    """Whether unit layer `name` reads a previous value (`prev:`), maybe through other layers of
    the unit: RETURNN keeps such a layer in the loop."""
    todo, seen = [name], set()
    while todo:
        n = todo.pop()
        if n in seen or n not in layers:
            continue
        seen.add(n)
        for src in _sources(layers[n]):
            if src.startswith("prev:"):
                return True
            todo.append(src)
    return False


def rename_outer_reads(unit: dict[str, dict], old: str, new: str) -> dict[str, dict]:
    """`unit` with its reads of the enclosing unit's layer `old` reading `new` instead."""
    return _outer_refs(unit, 1, lambda name: new if name == old else None, {old})


def _outer_refs(obj, depth: int, visit, outer: set[str]):
    """`obj` with each reference to a layer of the enclosing unit (a name in `outer`, read from
    `depth` units down) replaced by `visit(name)` where that is not None."""
    if isinstance(obj, str):
        prefix = "base:" * depth
        rest = obj[len(prefix) :] if obj.startswith(prefix) else ""
        name, _, sub = rest.partition("/")
        if name in outer and not rest.startswith("base:"):
            to = visit(name)
            return obj if to is None else prefix + to + ("/" + sub if sub else "")
        return obj
    if isinstance(obj, dict):
        return {k: _outer_refs(v, depth + (k in ("unit", "subnetwork")), visit, outer) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_outer_refs(v, depth, visit, outer) for v in obj)
    return obj
