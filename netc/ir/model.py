"""The IR data model: dims, values, ops, and loops as regions with explicit carried values.

A loop is like MLIR's `scf.for` with `iter_args`: its body is a block whose block
arguments are the per-step frames of its sequences, the outer values it reads
(invariants) and the previous values of its carried state. Nothing in a body refers
to an outer value directly; everything crosses the region boundary explicitly.

The classes are plain dataclasses (cheap to import and to build: the compiler makes one per
value); `netc.ir.json` reads and writes them as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Union

from netc.errors import Span

DType = Literal["float32", "int32", "bool"]


@dataclass(slots=True, kw_only=True)
class DimDef:
    """A named dim. `batch` is the batch dim; dynamic dims have per-sequence lengths."""

    name: str
    kind: Literal["batch", "dynamic", "static"]
    size: int | None = None
    # a dynamic dim an op makes with no frame for some sequences (`slice_frames` of a short
    # one, a valid `Conv1d` shorter than its filter): RETURNN's softmax over it is NaN there
    may_be_empty: bool = False
    # a chunked loop's chunk dim (dynamic in its body): the most frames a step's chunk has (N)
    max_frames: int | None = None


@dataclass(slots=True, kw_only=True)
class Value:
    """One SSA value. `dims` are dim names in canonical order (see `DimTable.canonical`)."""

    id: int
    dims: tuple[str, ...]
    dtype: DType = "float32"
    name: str | None = None  # the user's variable name, when the value was assigned to one
    sparse_dim: str | None = None  # for int32 labels: their class dim


@dataclass(slots=True, kw_only=True)
class Op:
    kind: Literal["op"] = "op"
    op: str  # key into the op registry
    args: list[int]
    attrs: dict[str, Any] = field(default_factory=dict)
    outs: list[Value]
    span: Span
    param: str | None = None  # module path of a parameterised op, e.g. "cell/ff"
    # an op a pass fused from other nodes (a loop that is an LSTM): those nodes, in order, which
    # read only what the op reads and give its results; a target without a native equivalent
    # emits them instead
    unfused: list[Node] = field(default_factory=list)
    # functions the op calls (`transducer_search`'s prediction and joint networks): regions that
    # read only their own arguments and parameters, which the op's lowering runs as it needs
    regions: list[Region] = field(default_factory=list)

    def param_key(self, role: str) -> tuple[str, str]:
        """(module path, role) of the parameter the op calls `role`: its own module's, or for a
        fused op the parameter it names in `attrs["params"]` (the modules it was fused from)."""
        if "params" in self.attrs:
            path, own_role = self.attrs["params"][role]
            return path, own_role
        tied = self.attrs.get("tied", {}).get(role)
        if tied is not None:  # another module's parameter (`Linear(vocab, weight=emb.weight)`)
            return tied[0], tied[1]
        assert self.param is not None, self.op
        return self.param, role

    def transposed(self, role: str) -> bool:
        """Whether the parameter the op calls `role` is held transposed: another module's 2-d
        parameter whose dims are the op's own in the other order (`attrs["tied"]`)."""
        tied = self.attrs.get("tied", {}).get(role)
        return bool(tied and tied[2])

    def param_paths(self) -> set[str]:
        """Module paths of the parameters the op uses."""
        if "params" in self.attrs:
            return {ref[0] for ref in self.attrs["params"].values() if ref is not None}
        own = {self.param} if self.param else set()
        own |= {ref[0] for ref in self.attrs.get("tied", {}).values()}
        for r in self.regions:
            own |= r.param_paths()
        return own

    def hint(self) -> str:
        """A name for the result in emitted code: the user's variable, else the path of the
        sub-module that made it (`lstm0/fw` → `lstm0_fw`), else what the op is; a fused loop
        keeps its loop's name."""
        if self.unfused and self.attrs.get("loop"):
            return self.attrs["loop"]
        if len(self.outs) == 1 and self.outs[0].name:
            return self.outs[0].name
        if len(self.outs) == 1 and self.param and "/" in self.param:
            return self.param.replace("/", "_")
        return self.op


@dataclass(slots=True, kw_only=True)
class Region:
    """A function an op calls: `args` are its parameters, `body` computes `results` from them
    (and parameters) only; nothing in it refers to a value outside."""

    name: str  # what it is to the op, e.g. "predict"
    args: list[Value]
    body: list[Node] = field(default_factory=list)
    results: list[int] = field(default_factory=list)

    def param_paths(self) -> set[str]:
        out: set[str] = set()
        todo = list(self.body)
        while todo:
            n = todo.pop()
            if isinstance(n, Loop):
                todo.extend(n.body)
            else:
                out |= n.param_paths()
        return out


@dataclass(slots=True, kw_only=True)
class LoopSeq:
    """An input unstacked over the loop axis: `inner` is its frame in each step."""

    outer: int
    inner: Value


@dataclass(slots=True, kw_only=True)
class LoopInvariant:
    """An outer value read in the body."""

    outer: int
    inner: Value


@dataclass(slots=True, kw_only=True)
class LoopCarry:
    """Loop-carried state: `inner` is the previous step's value (RETURNN `prev:`)."""

    name: str
    init: int  # outer value: the state before the first step
    inner: Value
    next: int  # body value: the state after this step
    out: Value | None = None  # outer value: the state after each sequence's last step
    # where the body binds the state (its first assignment's target, `h` of `h = ...`): the
    # place of an op made for the state itself (`shift_frames`), which has no expression of its own
    span: Span | None = None


@dataclass(slots=True, kw_only=True)
class LoopStack:
    """`ys.append(v)`: `value` per step, stacked over the loop axis into `out`."""

    name: str
    value: int
    out: Value


@dataclass(slots=True, kw_only=True)
class LoopLast:
    """A body value read after the loop: its value at each sequence's last valid step."""

    name: str
    value: int
    out: Value
    # assigned after `if end(...): break` only: a sequence ending at step k (its `end` held) has
    # its value from step k-1, or `init` (a body value: the loop's invariant of the value before
    # the loop) when k is the first step; one stopped by its bound has its last step's
    after_end: bool = False
    init: int | None = None


@dataclass(slots=True, kw_only=True)
class Loop:
    kind: Literal["loop"] = "loop"
    name: str = ""  # its RETURNN rec layer name (set by the `returnn_names` pass)
    axis: str  # the dynamic dim stepped over
    span: Span
    reverse: bool = False  # each sequence from its last valid frame to its first; stacks stay aligned
    # loops with `if end(cond): break`: `axis` is a new dim whose lengths are the steps each sequence ran
    end: int | None = None  # body value: bool [batch], this sequence ends at this step
    include_eos: bool = True  # stacks include the ending step (appends before the `break`)
    bound: int | None = None  # outer value: int32 [batch], each sequence's step limit
    max_steps: int | None = None  # a constant step limit
    # loops with a `choice`: the outer labels it chooses from in training; `axis` is their dim.
    # Training runs over those frames (`end` and the bound then do not apply); a search makes
    # the axis anew from where each hypothesis ends (see the `choice` op)
    target: int | None = None
    seqs: list[LoopSeq] = field(default_factory=list)
    invariants: list[LoopInvariant] = field(default_factory=list)
    carries: list[LoopCarry] = field(default_factory=list)
    stacks: list[LoopStack] = field(default_factory=list)
    lasts: list[LoopLast] = field(default_factory=list)
    body: list[Node] = field(default_factory=list)

    @property
    def has_step_limit(self) -> bool:
        """Whether its steps are bounded (`bound` per sequence, or `max_steps`): what a `while`
        can preallocate its stacks and grown states to."""
        return self.bound is not None or self.max_steps is not None

    def block_args(self) -> list[Value]:
        return [s.inner for s in self.seqs] + [i.inner for i in self.invariants] + [c.inner for c in self.carries]

    def results(self) -> list[Value]:
        outs = [c.out for c in self.carries if c.out is not None]
        return outs + [s.out for s in self.stacks] + [ll.out for ll in self.lasts]


Node = Union[Op, Loop]


@dataclass(slots=True, kw_only=True)
class Input:
    name: str
    value: Value
    annotated_dims: tuple[str, ...]  # the user's order, as fed by callers
    span: Span | None = None


@dataclass(slots=True, kw_only=True)
class ParamDef:
    """One parameter tensor: `path`/`role` is its module path (`cell/ff` + `W`), the torch name;
    `name` is its RETURNN (TF) variable name, set by the `returnn_names` pass: the same path,
    prefixed by `<rec>/rec/` for each loop the owning layer stays in (RETURNN trains variables
    of a rec unit only under that scope)."""

    name: str
    path: str
    dims: tuple[str, ...]
    call_path: tuple[tuple[int, int], ...]  # (line, col) of each call site down to the constructor
    role: str  # the op's own name for it, e.g. "W"
    init: Literal["glorot", "zeros", "ones"] = "glorot"  # fresh values, as RETURNN initialises them


@dataclass(slots=True, kw_only=True)
class Output:
    name: str
    value: int
    span: Span | None = None  # the `return` or `mark_as_loss` that names it


@dataclass(slots=True, kw_only=True)
class Graph:
    source_file: str
    network: str  # name of the @network function
    dims: list[DimDef]
    inputs: list[Input]
    params: list[ParamDef]
    body: list[Node]
    outputs: list[Output]
    losses: list[Output] = field(default_factory=list)  # mark_as_loss: summed over valid frames
    # a model with `choice`: this graph is training's view (teacher forcing); a beam search runs
    # `search`, the same model with its choice loop as written (same params, inputs and outputs)
    search: Graph | None = None
    # each target's lowering's decisions on this graph (`netc.passes.pipeline.TARGET_LOWERINGS`),
    # by target name, in that target's own types: the IR and the other targets never read them.
    # Not a field pydantic sees (no default: `netc.ir.json` leaves it out); set in `__post_init__`
    lowerings: dict[str, object] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.lowerings = {}

    def dim(self, name: str) -> DimDef:
        for d in self.dims:
            if d.name == name:
                return d
        raise KeyError(name)
