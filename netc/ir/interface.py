"""The names a compiled model is called and answered with, the same on every target.

Callers pass each input by its name plus `<dim>_lens` for each dynamic dim of the inputs;
results are the outputs by name, `<dim>_lens` for each dim a loop made (with `end`) that an
output has, and the losses by name. Arguments share one name space, results another: a clash
is a located error at the place that introduced the second name.
"""

from __future__ import annotations

from dataclasses import dataclass

from netc.errors import CompileError, Span
from netc.ir.loopkinds import choice_ops
from netc.ir.model import Graph, Loop
from netc.ir.search import BATCH_SIZE
from netc.ir.uses import values_by_id
from netc.naming import lens_name


@dataclass(frozen=True)
class Interface:
    inputs: list[str]
    input_lens: dict[str, str]  # dynamic dim of the inputs -> its lengths argument
    outputs: list[str]
    made_lens: dict[str, str]  # dim made by a loop, in some output -> its lengths result
    losses: list[str]


def input_dyn_dims(g: Graph) -> list[str]:
    """Dynamic dims of the inputs, in declaration order: each has a `<dim>_lens` argument."""
    used = {d for i in g.inputs for d in i.value.dims}
    return [d.name for d in g.dims if d.kind == "dynamic" and d.name in used]


def made_dims(g: Graph) -> list[str]:
    """Dynamic dims made by loops (not inputs') that outputs have: their lengths are results."""
    values = values_by_id(g)
    from_inputs = set(input_dyn_dims(g))
    used = {d for o in g.outputs for d in values[o.value].dims}
    return [d.name for d in g.dims if d.kind == "dynamic" and d.name in used and d.name not in from_inputs]


def search_arguments(g: Graph) -> dict[str, str]:
    """The arguments a model with `choice` takes besides its inputs (eager mode, the torch module):
    `search`, and `batch_size` where a search takes no input (its only inputs are targets)."""
    searched = g.search or g  # training's graph has made the loop one over its target
    # every choice's target (a loop may make several choices)
    names = {c.attrs["target"] for n in searched.body if isinstance(n, Loop) for c in choice_ops(n)}
    targets = {i.value.id for i in g.inputs if i.name in names}
    if not targets:
        return {}
    out = {"search": "the argument `search` of a model with `choice`"}
    if all(i.value.id in targets for i in g.inputs):
        out[BATCH_SIZE] = f"the argument `{BATCH_SIZE}` of a search that takes no input"
    return out


def interface(g: Graph) -> Interface:
    return Interface(
        inputs=[i.name for i in g.inputs],
        input_lens={d: lens_name(d) for d in input_dyn_dims(g)},
        outputs=[o.name for o in g.outputs],
        made_lens={d: lens_name(d) for d in made_dims(g)},
        losses=[o.name for o in g.losses],
    )


def check_interface(g: Graph) -> None:
    """Argument names are unique, and so are result names (raises a located CompileError)."""
    fixed = search_arguments(g)  # netc's own arguments: the user's name is the one to change
    taken: dict[str, str] = dict(fixed)

    def claim(name: str, what: str, span: Span | None) -> None:
        if name in taken:
            rename = "rename the input" if name in fixed else "rename one of them"
            raise CompileError(span, f"{what} has the same name as {taken[name]}; {rename}")
        taken[name] = what

    values = values_by_id(g)
    for inp in g.inputs:
        claim(inp.name, f"input `{inp.name}`", inp.span)
    for d in input_dyn_dims(g):
        first = next(i for i in g.inputs if d in i.value.dims)
        claim(lens_name(d), f"the lengths argument `{lens_name(d)}` of dim `{d}`", first.span)
    taken.clear()  # results
    made = set(made_dims(g))
    for o in g.outputs:
        claim(o.name, f"output `{o.name}`", o.span)
        for d in values[o.value].dims:
            if d in made:
                made.discard(d)
                claim(lens_name(d), f"the lengths result `{lens_name(d)}` of dim `{d}`", o.span)
    for loss in g.losses:
        claim(loss.name, f"loss `{loss.name}`", loss.span)
