"""What searching a model means: its `choice` loop, what a search returns, what needs a target.

A model with a `choice` is trained (its loop runs over the target's frames) or searched (its
loop runs a beam search; the targets are not given). A search returns each output that is
stacked in the choice loop, for each sequence's best hypothesis, the lengths of the loop's
axis (`<axis>_lens`) and the best hypotheses' scores (`scores`). Values computed from a
target outside the choice loop (e.g. a loss) exist only in training.
"""

from __future__ import annotations

from dataclasses import dataclass

from netc.errors import CompileError
from netc.ir.loopkinds import choice_ops, target_seqs
from netc.ir.model import Graph, Loop
from netc.ir.uses import node_uses, values_by_id
from netc.ir.walk import ops, param_paths
from netc.naming import lens_name

SCORES = "scores"
BATCH_SIZE = "batch_size"  # what a search that takes no input (its inputs are targets) is given instead


@dataclass(frozen=True)
class SearchPlan:
    loop: Loop
    targets: frozenset[str]  # names of the inputs a choice takes its reference labels from
    outputs: tuple[str, ...]  # outputs stacked in the choice loop: what a search returns
    needs_target: frozenset[int]  # top-level values that only exist with the targets given
    lens: str  # the result holding each best hypothesis' length
    # every dim of what a search returns whose lengths it returns (`<dim>_lens`): the loop's axis,
    # and the other dynamic dims no input has (made by an op: `max_pool`'s `out_axis`)
    made_lens: dict[str, str]
    inputs: tuple[str, ...]  # the inputs a search takes
    input_dims: tuple[str, ...]  # dynamic input dims whose lengths a search takes


def search_plan(g: Graph) -> SearchPlan | None:
    """What searching `g` means (on its search graph, `g.search`, when it has one)."""
    g = g.search or g
    loops = [n for n in g.body if isinstance(n, Loop) and n.target is not None]
    if not loops:
        return None
    if len(loops) > 1:
        raise CompileError(loops[1].span, "a network can search in one loop; this is a second loop with `choice`")
    loop = loops[0]
    # the inputs the step's choices take their targets from (a computed target names none)
    targets = frozenset(c.attrs["target"] for c in choice_ops(loop) if c.attrs["target"] is not None)
    needs: set[int] = {i.value.id for i in g.inputs if i.name in targets}
    # a target computed before the loop is training's too: a search neither reads nor computes it
    needs |= {s.outer for s in target_seqs(loop)}
    target_ids = set(needs)
    for n in g.body:
        if isinstance(n, Loop):
            if n.target is None and any(v in needs for v in node_uses(n)):
                needs.update(r.id for r in n.results())
        elif any(a in needs for a in n.args):
            needs.update(o.id for o in n.outs)
    if any(v in needs for v in node_uses(loop) if v not in target_ids):
        raise CompileError(loop.span, "this search needs values computed from its target before the loop")
    stacks = {s.out.id for s in loop.stacks}
    outputs = tuple(o.name for o in g.outputs if o.value in stacks)
    if not outputs:
        raise CompileError(loop.span, "a loop with `choice` must stack a value that the network returns")
    if SCORES in outputs or lens_name(loop.axis) in outputs:
        clash = SCORES if SCORES in outputs else lens_name(loop.axis)
        raise CompileError(next(o.span for o in g.outputs if o.name == clash), f"a search returns `{clash}` itself")
    search_inputs = [i for i in g.inputs if i.name not in targets]
    used = {d for i in search_inputs for d in i.value.dims}
    input_dims = tuple(d.name for d in g.dims if d.kind == "dynamic" and d.name in used)
    values = values_by_id(g)
    returned = {d for o in g.outputs if o.name in outputs for d in values[o.value].dims}
    made = [d.name for d in g.dims if d.kind == "dynamic" and d.name in returned and d.name not in input_dims]
    made_lens = {loop.axis: lens_name(loop.axis)} | {d: lens_name(d) for d in made}
    return SearchPlan(
        loop=loop,
        targets=targets,
        outputs=outputs,
        needs_target=frozenset(needs),
        lens=lens_name(loop.axis),
        made_lens=made_lens,
        inputs=tuple(i.name for i in search_inputs),
        input_dims=input_dims,
    )


def check_no_training_frames(g: Graph) -> None:
    """A search (`g`, its graph as written, `searching()` decided) has no target frames: the
    sequences of its choice loop other than its choices' targets are `x[i]` reads by the step
    (training's), which it must not compute. Checked before hoisting, which would move the read's
    reader out of the loop (the error points at the op reading the frame)."""
    loop = next((n for n in g.body if isinstance(n, Loop) and n.target is not None), None)
    if loop is None:
        return
    targets = {s.inner.id for s in target_seqs(loop)}
    for s in loop.seqs:
        if s.inner.id in targets:
            continue
        reader = next((n for n in ops(loop.body) if s.inner.id in n.args), None)
        raise CompileError(
            reader.span if reader is not None else loop.span,
            "`x[i]` by the step reads the frame of a sequence training runs over, which a search does not "
            "have (it makes its own steps): read it only in training, `where(searching(), a, ...)` or "
            "`if searching(): ... else: ...`",
        )


def search_dims(g: Graph) -> dict[str, list[str]]:
    """What a search returns and its dims: the choice loop's stacked outputs, and the scores."""
    plan = search_plan(g)
    if plan is None:
        raise ValueError(f"{g.network} has no `choice`: there is nothing to search")
    searched = g.search or g  # its own value ids: training's graph may stack other values
    values = values_by_id(searched)
    dims = {o.name: list(values[o.value].dims) for o in searched.outputs if o.name in plan.outputs}
    dims[SCORES] = ["batch"]
    return dims


def network_params(g: Graph, search: bool = False) -> set[str]:
    """The parameters (variable names) the network computes with, in training or (`search`) in a
    search: those of the ops its outputs and losses are computed from. RETURNN builds no others:
    training's loop with a `choice` reads the target, not the scores (nothing may need the
    decoder's parameters), and a search has no targets (an auxiliary CTC loss's `Linear` exists
    only in training)."""
    plan = search_plan(g) if search else None
    if plan is None:  # dead code is gone: what is left computes a result
        return {p.name for p in g.params if p.path in param_paths(g.body)}
    searched = g.search or g
    live = {o.value for o in [*searched.outputs, *searched.losses] if o.value not in plan.needs_target}
    paths: set[str] = set()
    for n in reversed(searched.body):
        if any(v.id in live for v in (n.results() if isinstance(n, Loop) else n.outs)):
            live.update(node_uses(n))
            paths |= param_paths([n])
    return {p.name for p in searched.params if p.path in paths}
