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


class ReturnnCtx(Protocol):
    def src(self, i: int) -> str: ...  # layer reference of arg i
    def in_dims(self, i: int) -> tuple[str, ...]: ...
    def dim(self, name: str) -> Code: ...  # the config's variable for a dim
    def is_dynamic(self, name: str) -> bool: ...


class TorchCtx(Protocol):
    training: str  # code for "is the module training" (`self.training`)
    float_dtype: str  # code for the float dtype of the computation (float32 in the IR)
    device: str  # code for the device every created tensor goes to

    def arg(self, i: int) -> str: ...
    def in_dims(self, i: int) -> tuple[str, ...]: ...
    def is_dynamic(self, name: str) -> bool: ...
    def aligned(self, i: int, dims: tuple[str, ...]) -> str: ...
    def axis(self, i: int, dim: str) -> int: ...
    def size(self, dim: str) -> str: ...
    def mask(self, dim: str, dims: tuple[str, ...]) -> str: ...
    def lens(self, dim: str, dims: tuple[str, ...]) -> str: ...  # float lengths aligned to dims
    def seq_lens(self, dim: str) -> str: ...  # the int64 [batch] lengths
    def param(self, role: str) -> str: ...


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

    def infer(self, dt: DimTable, args: list[Value], attrs: dict) -> list[OutType]:
        raise NotImplementedError

    def params(self, dt: DimTable, args: list[Value], attrs: dict) -> dict[str, tuple[str, ...]]:
        """Parameter roles and their dims (parameterised ops only)."""
        return {}

    def returnn(self, ctx: ReturnnCtx, op: Op) -> dict:
        raise NotImplementedError

    def returnn_outs(self, layer: str, op: Op) -> list[str]:
        """Layer references for each result (multi-result ops override)."""
        return [layer]

    def torch(self, ctx: TorchCtx, op: Op) -> str:
        raise NotImplementedError

    def eager(self, ctx: EagerCtx, args: list, attrs: dict, outs: list[OutType]):
        raise NotImplementedError


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
