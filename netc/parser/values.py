"""What a name can stand for while the parser evaluates a model file symbolically."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from netc.ir.model import Loop, Node, Value


@dataclass(eq=False)
class Block:
    """A list of IR nodes being built: the graph body or a loop body."""

    nodes: list[Node]
    loop: Loop | None = None
    parent: Block | None = None
    captured: dict[int, TV] = field(default_factory=dict)  # outer value id -> invariant arg
    region: str | None = None  # an op's region (`transducer_search`'s `predict`): what it is

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()


@dataclass(eq=False)
class TV:
    """A traced tensor: an IR value and the block that defines it."""

    value: Value
    block: Block
    # a list appended to in a loop: a tensor here, but a Python list when the model runs
    # eagerly, where operators would act on lists (`+` concatenates); `stack(ys)` converts
    from_list: bool = False

    @property
    def dims(self) -> tuple[str, ...]:
        return self.value.dims


@dataclass(frozen=True)
class DimRef:
    name: str


@dataclass(frozen=True)
class NetcSym:
    """A name exported by the `netc` package (an op, `Dim`, `batch`, `Tensor`, ...)."""

    name: str


@dataclass(frozen=True)
class NetcModule:
    """`import netc as nc`."""


@dataclass(frozen=True)
class Foreign:
    """A name imported from elsewhere: usable only in eager code, an error in a network."""

    name: str


@dataclass(frozen=True)
class Builtin:
    name: str


@dataclass(eq=False)
class FunctionRef:
    node: ast.FunctionDef


@dataclass(eq=False)
class ClassRef:
    node: ast.ClassDef

    def method(self, name: str) -> ast.FunctionDef | None:
        for stmt in self.node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                return stmt
        return None

    def method_names(self) -> list[str]:
        return [stmt.name for stmt in self.node.body if isinstance(stmt, ast.FunctionDef)]


@dataclass(eq=False)
class ModuleInstance:
    """An instance of a user `Module` subclass: attributes and its hierarchical path."""

    cls: ClassRef
    path: str
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class OpModule:
    """A constructed parameterised op such as `Linear(hidden)`."""

    op: str
    attrs: dict[str, Any]
    path: str
    call_path: tuple[tuple[int, int], ...]
    params: dict[str, tuple[str, ...]] | None = None  # fixed at the first call
    # roles whose parameter is another module's (`Linear(vocab, weight=emb.weight)`)
    tied: dict[str, ParamRef] = field(default_factory=dict)


@dataclass(eq=False)
class ParamRef:
    """One parameter of a constructed op, `emb.weight`: its module, its role (`W`) and the
    attribute the source names it by."""

    module: OpModule
    role: str
    attr: str


@dataclass(eq=False)
class BoundMethod:
    obj: Any
    name: str


@dataclass(eq=False)
class PyList:
    """A Python list; `append` inside a loop stacks over the loop axis."""

    items: list[Any] = field(default_factory=list)
    serial: int = 0  # when it was made, on the tracer's clock (see `Tracer.tick`)
    names: dict[str, None] = field(default_factory=dict)  # names it was bound to (some may be rebound since)

    def bound_in(self, env: dict[str, Any]) -> list[str]:
        """The names `env` binds to this list, in `env`'s order."""
        names = [n for n in self.names if env.get(n) is self]
        if len(names) > 1:
            order = {n: i for i, n in enumerate(env)}
            names.sort(key=order.__getitem__)
        return names


@dataclass(frozen=True)
class SeqLen:
    """`x.max_seq_len` (times `scale`, plus `offset`, floor-divided by `div`): per sequence, its own
    length of `dim`."""

    dim: str
    tensor: TV
    scale: int = 1
    offset: int = 0
    div: int = 1

    @property
    def plain(self) -> bool:
        return self.scale == 1 and self.offset == 0 and self.div == 1


@dataclass(frozen=True)
class RangeSpec:
    bound: SeqLen | int


@dataclass(frozen=True)
class UnstackSpec:
    tensor: TV
    axis: str


@dataclass(frozen=True)
class ReversedSpec:
    """`reversed(x)`: each sequence from its own last valid frame back to its first."""

    inner: Any  # a TV or UnstackSpec


@dataclass(frozen=True)
class ZipSpec:
    parts: tuple[Any, ...]


@dataclass(eq=False)
class LoopIndex:
    """The `t` of `for t in range(x.max_seq_len)`: only good for indexing `x[t]`. In a loop with
    `end` (`step`), the step: it indexes the frames training runs over, its `choice`'s target's
    dim, which each read takes (`LoopBuilder._step_axis`; `axis` is then "")."""

    block: Block  # the loop's body block
    axis: str
    seqs: dict[int, TV] = field(default_factory=dict)  # outer value id -> frame
    step: bool = False


@dataclass(frozen=True)
class Poison:
    """A name bound in only one branch of an `if` on a tensor, or only after the `if end(...):
    break` of a loop (and not before it): an error when read."""

    name: str
    line: int  # the `if`'s or the loop's
    after_end: bool = False
    reason: str | None = None  # why else it has no value here (the message)


class Return(Exception):  # a control-flow signal, not an error
    """A `return` statement: unwinds to the inlined call (or the network function)."""

    def __init__(self, value: Any, node: ast.AST):
        self.value, self.node = value, node


@dataclass(frozen=True)
class Super:
    pass


NOOP = Builtin("noop")
