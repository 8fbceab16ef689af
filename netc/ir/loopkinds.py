"""The kinds of loop the IR has, and the one place that says which loop (or state) is which.

A loop (`netc.ir.model.Loop`, a region with explicit carried values) combines these kinds:

- plain carried state (`LoopCarry`): the previous step's value; `out` its value after the loop;
- stack (`LoopStack`): a value per step, stacked over the loop's axis;
- last (`LoopLast`): a value at each sequence's last step (`after_end`: the step before `end`);
- reverse (`Loop.reverse`): each sequence from its last valid frame to its first;
- end / bound (`Loop.end`, `Loop.bound`, `Loop.max_steps`): the loop makes its axis, each
  sequence's length being the steps it ran until its `end` held or its limit;
- grown state (`LoopGrow`): a carried state started before the loop with no frames along a dim of
  its own (an op with `OpDef.loop_role` "grow_start": `empty`) and grown by a frame per step (role
  "grow": `cum_concat`); at each step it holds the frames so far (`growing_dims`);
- chunked (`LoopChunk`): `for c in chunks(x, chunk)`, a loop over chunks of N frames of a dynamic
  dim; its body's op with role "chunk" (`chunk_frame`) gives the step's frames over the dynamic
  `chunk` dim, whose lengths are the step's (`chunk_dims`: like a grown dim, a value over it has
  another length at each step);
- search (`LoopSearch`): a loop whose body has an op with role "choice" (`choice`) and whose
  `Loop.target` is the reference labels: training runs it over them (teacher forcing), a search
  runs it as a beam search (`netc.ir.search`).

Which op plays which part is the op registry's (`OpDef.loop_role`); passes and emitters ask the
functions here, never an op's name. They are derived from the body on demand, as use counts are
(`netc.ir.uses`): a pass that rewrites a body cannot leave them stale.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from netc.ir.dims import DimTable
from netc.ir.model import Graph, Loop, LoopCarry, LoopSeq, Node, Op
from netc.ir.walk import ops
from netc.ops import REGISTRY

GROW_START, GROW, CHOICE, CHUNK = "grow_start", "grow", "choice", "chunk"
ROLES = frozenset({GROW_START, GROW, CHOICE, CHUNK})  # the values of `OpDef.loop_role`


def role(op: Op) -> str | None:
    """The part `op` plays in a kind of loop (`OpDef.loop_role`), or None."""
    return REGISTRY[op.op].loop_role


def starts_growth(op: Op) -> bool:
    """Whether `op` starts a grown state (no frames along `attrs["axis"]`)."""
    return role(op) == GROW_START


def grows(op: Op) -> bool:
    """Whether `op` grows a state by a frame along `attrs["axis"]` (its first operand the state)."""
    return role(op) == GROW


def chooses(op: Op) -> bool:
    """Whether `op` is a search's choice (its loop's label at each step)."""
    return role(op) == CHOICE


# --- grown state


@dataclass(frozen=True, slots=True)
class LoopGrow:
    """A state of a loop grown by a frame per step along `axis`, from no frames before the loop."""

    carry: LoopCarry | None  # the loop's carry of the state (None: the op grows no state of this loop)
    op: Op  # the op growing it, in the loop's body
    axis: str


def grow_starts(nodes: Iterable[Node]) -> dict[int, str]:
    """The values ops started as grown states in these nodes (loops included) -> their dim."""
    return {op.outs[0].id: op.attrs["axis"] for op in ops(list(nodes)) if starts_growth(op)}


def growing_dims(nodes: Iterable[Node]) -> set[str]:
    """Which dims grow: those states grow along in these nodes (loops included). A value over
    one has another length at each step of the loop growing it."""
    return set(grow_starts(nodes).values())


def loop_grows(n: Loop) -> list[LoopGrow]:
    """The states the ops of `n`'s own body grow (not those of loops nested in it), in order."""
    carries = {c.inner.id: c for c in n.carries}
    return [LoopGrow(carries.get(m.args[0]), m, m.attrs["axis"]) for m in n.body if isinstance(m, Op) and grows(m)]


def dim_table(g: Graph) -> DimTable:
    """The graph's dim table, knowing which dims have another length at each step of a loop
    (states grow along them, or chunks are over them): the hoisting passes keep values over them
    in their loop."""
    dt = DimTable(g.dims)
    dt.growing = growing_dims(g.body) | chunk_dims(g.body)
    return dt


# --- chunked


@dataclass(frozen=True, slots=True)
class LoopChunk:
    """A chunked loop: `op` (role "chunk", first in the body) gives each step's chunk over `chunk`
    (dynamic, the step's lengths) from the loop's frame over `pad` (static N); the loop steps over
    `axis`'s chunks (`Loop.axis` is their own dim)."""

    op: Op
    axis: str  # the dim chunked (`time`)
    chunk: str
    pad: str
    size: int


def chunks_op(op: Op) -> bool:
    """Whether `op` gives a chunked loop's frames over its chunk dim."""
    return role(op) == CHUNK


def loop_chunk(n: Loop) -> LoopChunk | None:
    """`n` as a chunked loop, or None."""
    op = next((m for m in n.body if isinstance(m, Op) and chunks_op(m)), None)
    if op is None:
        return None
    a = op.attrs
    return LoopChunk(op, a["axis"], a["chunk"], a["pad"], a["size"])


def chunk_dims(nodes: Iterable[Node]) -> set[str]:
    """The chunk dims of the chunked loops in these nodes (loops included)."""
    return {op.attrs["chunk"] for op in ops(list(nodes)) if chunks_op(op)}


# --- search


@dataclass(frozen=True, slots=True)
class LoopSearch:
    """A loop with choices: `target` the outer reference labels of the first (`Loop.target`: the
    loop runs over their dim), `choices` the ops in the step's order (none in training's view of
    the loop: teacher forcing replaced each by its target's frame)."""

    target: int
    choices: tuple[Op, ...]


def loop_search(n: Loop) -> LoopSearch | None:
    """`n` as a search, or None where it is no loop with a choice."""
    if n.target is None:
        return None
    return LoopSearch(n.target, tuple(choice_ops(n)))


def choice_ops(n: Loop) -> list[Op]:
    """The choices of `n`'s own body, in the step's order: a later one extends the hypotheses
    the one before made (docs/language.md, "Several choices in one step")."""
    return [m for m in n.body if isinstance(m, Op) and chooses(m)]


def target_seqs(n: Loop) -> list[LoopSeq]:
    """The sequences of `n` whose frames are its choices' targets: training's only (a search
    neither reads them nor computes a target made before the loop)."""
    frames = {c.args[1] for c in choice_ops(n)}
    return [s for s in n.seqs if s.inner.id in frames]


def choice_op(n: Loop) -> Op | None:
    """The first choice of `n`'s own body, if it has one."""
    return next(iter(choice_ops(n)), None)


def chosen(n: Loop) -> list[int]:
    """The labels the choices of `n`'s own body make, in the step's order."""
    return [m.outs[0].id for m in choice_ops(n)]


def kinds(n: Loop) -> tuple[str, ...]:
    """The kinds `n` combines, by name (for messages and tools): carry, stack, last, reverse,
    end, bound, grow, chunk, search."""
    named = [
        ("carry", bool(n.carries)),
        ("stack", bool(n.stacks)),
        ("last", bool(n.lasts)),
        ("reverse", n.reverse),
        ("end", n.end is not None),
        ("bound", n.has_step_limit),
        ("grow", bool(loop_grows(n))),
        ("chunk", loop_chunk(n) is not None),
        ("search", n.target is not None),
    ]
    return tuple(k for k, on in named if on)
