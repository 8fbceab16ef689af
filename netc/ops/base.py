"""The op registry's shape: one `OpDef` per op, holding its user-facing signature, its dim
rule, its RETURNN layer, its PyTorch code and its eager implementation side by side.

Lowering contexts (`ReturnnCtx`, `TorchCtx`, `EagerCtx`) are protocols implemented by the
emitters and the eager runtime; an op only asks them for names, dims and aligned operands.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from netc.ir.dims import DimTable
from netc.ir.model import Op, Value
from netc.naming import Code


@dataclass(frozen=True)
class OutType:
    dims: tuple[str, ...]
    dtype: str = "float32"
    sparse_dim: str | None = None


@dataclass(frozen=True)
class Carry:
    """A loop's carried state, as an op's RETURNN lowering sees it (`ReturnnCtx.carry`)."""

    init: str  # reference to its value before the loop (a `base:` layer)
    init_zero: bool  # that value is `zeros(...)` (RETURNN's default initial state)
    next: int  # id of the value it takes for the next step


class ReturnnCtx(Protocol):
    def src(self, i: int) -> str: ...  # layer reference of arg i
    def in_dims(self, i: int) -> tuple[str, ...]: ...
    def dim(self, name: str) -> Code: ...  # the config's variable for a dim
    # a variable for a dim the op makes, where its layer derives it from an input's (pool, conv,
    # pad): the layer's result is retagged to the dim after it
    def derived_dim(self, name: str) -> Code: ...
    # a static dim of the op's own (its layers' intermediate axis), declared in the config
    def static_dim(self, hint: str, size: int) -> Code: ...
    def size(self, name: str) -> int: ...  # a static dim's size
    def is_dynamic(self, name: str) -> bool: ...
    def may_be_empty(self, name: str) -> bool: ...  # some sequences may have no frame along it
    # a top-level layer whose output has dynamic dim `name` made by an op or a loop, as this
    # layer's network reads it (`base:` from a unit; None for the inputs' dims): a layer
    # creating a tensor over it must be built after that layer
    def dim_source(self, name: str) -> str | None: ...
    # when arg i is a loop's carried state: its value before the loop and the one it takes next
    def carry(self, i: int) -> Carry | None: ...
    def is_zeros(self, i: int) -> bool: ...  # arg i is made by `zeros(...)`

    # the op is in a loop's unit, where RETURNN may move it out of the loop while an operand stays
    # (or the reverse): operands then differ by the loop's axis
    in_unit: bool

    def variable(self, role: str) -> str: ...  # the TF variable name of the op's parameter `role`
    def param_shape(self, role: str) -> tuple[int, ...]: ...


class TorchCtx(Protocol):
    training: str  # code for "is the module training" (`self.training`)
    first: str  # the variable holding the op's `torch_first` code
    float_dtype: str  # code for the float dtype of the computation (float32 in the IR)
    device: str  # code for the device every created tensor goes to

    def arg(self, i: int) -> str: ...
    def in_dims(self, i: int) -> tuple[str, ...]: ...
    def is_dynamic(self, name: str) -> bool: ...
    def may_be_empty(self, name: str) -> bool: ...  # some sequences may have no frame along it
    def aligned(self, i: int, dims: tuple[str, ...]) -> str: ...
    def axis(self, i: int, dim: str) -> int: ...
    def size(self, dim: str) -> str: ...
    def mask(self, dim: str, dims: tuple[str, ...]) -> str: ...
    def lens(self, dim: str, dims: tuple[str, ...]) -> str: ...  # float lengths aligned to dims
    def seq_lens(self, dim: str) -> str: ...  # the int64 [batch] lengths
    def param(self, role: str) -> str: ...
    def helper(self, key: str) -> str: ...  # the module-level name of one of the op's `torch_helpers`
    # code of parameters only (a reordered weight), evaluated once per call of the method: its variable
    def once(self, expr: str, hint: str) -> str: ...
    def region(self, i: int) -> str: ...  # a local function computing the op's region i (`Op.regions`)


class EagerUnsupported(Exception):
    """Raised by an op's `eager` rule for what eager mode cannot run; the eager runtime locates it
    at the user's call (ops never import the runtime)."""


class EagerCtx(Protocol):
    training: bool

    def size(self, dim: str) -> int: ...
    def param(self, role: str) -> Any: ...


class OpDef:
    """Base class. Subclasses set `name`, define `api` (the user signature) and the four rules."""

    name: str = ""
    fn_name: str | None = None  # the DSL function name, if the op is called as a function
    tensors: tuple[str, ...] = ("x",)  # api parameters that take tensors (a `*args` one takes many)
    module: bool = False  # a parameterised module: `Linear(out_dim)(x)`; ctor args are attrs
    pure: bool = True  # same inputs, same result: may be moved out of loops (not so for dropout)
    # not pure, but each element drawn independently (dropout's elementwise mask): over a whole
    # sequence it draws what step by step it would, so per-frame work may run over the sequence
    # before or after the loop; once before the loop (an invariant) would reuse one draw per step
    frames_independent: bool = False
    # statistics over the batch's valid frames (BatchNorm in training): not in a loop body
    batch_statistics: bool = False
    # its results keep their shapes from step to step in a loop (not so for a state grown by
    # `cum_concat`): torch may run the loop as its `scan` operator (`scan_loops` pass)
    same_shape_each_step: bool = True
    # a state it grows (along `attrs["axis"]`, from no frames) can be a buffer as long as a beam
    # search's step limit, written at each step (`torch_preallocated`)
    preallocates: bool = False
    # it decides how its loop runs (`choice`: teacher forcing, the beam search): `dce` keeps it
    # also when nothing reads its result
    shapes_loop: bool = False
    # the part it plays in a kind of loop, one of `netc.ir.loopkinds.ROLES` (which passes and
    # emitters ask instead of matching op names): "grow_start" starts a grown state before its
    # loop (`empty`), "grow" grows that state by a frame per step (`cum_concat`), "choice" makes
    # its loop a search (`choice`); None: none
    loop_role: str | None = None
    # a module's parameters the source may name (`emb.weight`) and pass to another module of a
    # kind with the same (`Linear(vocab, weight=emb.weight)`): attribute and keyword -> role
    weights: dict[str, str] = {}
    # why its torch code is plain Python that TorchScript, torch.export and ONNX cannot capture
    # (`netc export` refuses it, located); None: they can
    python_only: str | None = None
    param_init: dict[str, str] = {}  # role -> "ones" | "zeros" | "glorot"; default: glorot for ≥2 dims, else zeros

    def api(self, x):  # noqa: D401 - the signature is the point
        """The user-facing signature."""

    def bind(self, args: tuple, kwargs: dict) -> tuple[list[Any], dict[str, Any]]:
        """Split a call's arguments into tensor arguments and attributes (raises TypeError)."""
        sig = signature(self.api)
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        tensors: list[Any] = []
        attrs: dict[str, Any] = {}
        for pname, val in bound.arguments.items():
            if pname in self.tensors:
                if sig.parameters[pname].kind is inspect.Parameter.VAR_POSITIONAL:
                    tensors.extend(val)
                else:
                    tensors.append(val)
            else:
                attrs[pname] = val
        return tensors, attrs

    def module_args(self, args: tuple, kwargs: dict) -> list[Any]:
        """A module's call arguments as its tensor args (raises TypeError): one tensor by default."""
        if len(args) != 1 or kwargs:
            raise TypeError(f"`{self.fn_name}(...)` is called with one tensor")
        return [args[0]]

    def module_call(self, args: tuple, kwargs: dict) -> tuple[list[Any], dict[str, Any]]:
        """A module call's tensor args and the attributes it adds to the constructor's (a
        `Conv1d`'s `axis`); raises TypeError. By default: `module_args`, no attributes."""
        return self.module_args(args, kwargs), {}

    def makes_dims(self, attrs: dict) -> list[str]:
        """Dynamic dims whose lengths this op defines (`max_pool`'s `out_axis`)."""
        return []

    def infer(self, dt: DimTable, args: list[Value], attrs: dict) -> list[OutType]:
        raise NotImplementedError

    def params(self, dt: DimTable, args: list[Value], attrs: dict) -> dict[str, tuple[str, ...]]:
        """Parameter roles and their dims (parameterised ops only)."""
        return {}

    def init_of(self, role: str, dims: tuple[str, ...]) -> str:
        """How parameter `role` with `dims` starts: `param_init`'s, else glorot for ≥2 dims, else zeros."""
        return self.param_init.get(role, "glorot" if len(dims) >= 2 else "zeros")

    def returnn(self, ctx: ReturnnCtx, op: Op) -> dict | None:
        """The op's layer; None only for a fused op (`Op.unfused`) with no native layer here: the
        nodes it was fused from are emitted instead."""
        raise NotImplementedError

    def returnn_helpers(self, op: Op) -> dict[str, str]:
        """Functions the op's RETURNN layers call (`eval`), defined in the config: name -> source."""
        return {}

    def returnn_outs(self, layer: str, op: Op) -> list[str]:
        """Layer references for each result (multi-result ops override)."""
        return [layer]

    def returnn_extra(
        self, ctx: ReturnnCtx, layer: str, own: dict, op: Op, fresh: Callable[[str], str]
    ) -> dict[int, tuple[str, dict]]:
        """Further layers next to the op's own (`layer`, its dict `own`, which may get options that
        name them) that give results, by result index: (name, layer), each name from `fresh(hint)`."""
        return {}

    def made_lengths(self, attrs: dict, lens: dict[str, list[int]]) -> dict[str, list[int]]:
        """For each dim in `makes_dims` whose lengths follow from `lens` (per sequence, by dim):
        its lengths (runners draw batches that suit the ops; e.g. CTC's labels fit its frames)."""
        return {}

    def eager_lengths(self, attrs: dict, outs: list[OutType], result: Any) -> dict[str, int]:
        """Eager mode: the lengths of dynamic dims this op's result sets other than by
        `makes_dims` (a state grown by `cum_concat`: its frames so far)."""
        return {}

    def torch_first(self, ctx: TorchCtx, op: Op) -> tuple[str, str] | None:
        """(hint, code) run before the dims the op makes, into a fresh variable that its
        `torch_made_dims` and `torch` read as `ctx.first` (a decoding whose lengths it finds)."""
        return None

    def torch_made_dims(self, ctx: TorchCtx, op: Op) -> dict[str, tuple[str, str]]:
        """For each dim in `makes_dims`: code for its int64 [batch] lengths and for its size
        (the emitter defines both before the op's code, which may then use `ctx.mask`)."""
        return {}

    def torch_preallocated(self, ctx: TorchCtx, op: Op, step: str) -> str:
        """An op that `preallocates`, in a beam search run as torch's `while_loop`: code writing
        step `step`'s (a tensor) frame into the state, a buffer as long as the step limit (the
        emitter defines the grown dim's lengths, the step + 1, and size, the limit)."""
        raise NotImplementedError

    def torch(self, ctx: TorchCtx, op: Op) -> str:
        raise NotImplementedError

    def torch_helpers(self, op: Op) -> dict[str, Callable[[str], str]]:
        """Module-level functions the op's torch code calls: key -> source given the name chosen."""
        return {}

    def eager(self, ctx: EagerCtx, args: list, attrs: dict, outs: list[OutType]):
        raise NotImplementedError

    def batch_coupled(self, attrs: dict) -> bool:
        """Whether its numbers outside training depend on the batch's other sequences
        (`BatchNorm(update_in_inference=True)`): eager mode, one sequence at a time, cannot run
        it, and `netc verify` compares the other backends against torch."""
        return False


def signature(method: Callable) -> inspect.Signature:
    """The signature of a bound method (`op.api`, `op.ctor`), worked out once per class."""
    return _signature(method.__func__)


@functools.cache
def _signature(fn: Callable) -> inspect.Signature:
    sig = inspect.signature(fn)
    return sig.replace(parameters=list(sig.parameters.values())[1:])  # without `self`


REGISTRY: dict[str, OpDef] = {}
BY_FN_NAME: dict[str, OpDef] = {}


def register(cls: Callable[[], OpDef]) -> Callable[[], OpDef]:
    op = cls()
    assert op.name and op.name not in REGISTRY, op.name
    REGISTRY[op.name] = op
    if op.fn_name:
        BY_FN_NAME[op.fn_name] = op
    return cls
