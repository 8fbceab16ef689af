"""What the parser knows about a file's names beyond its IR, for the language server's hovers:
the dims module-level names hold, and the values modules' attributes were assigned."""

from __future__ import annotations

from dataclasses import dataclass

from netc.errors import CompileError
from netc.ir.model import DimDef
from netc.ops import REGISTRY
from netc.parser import values as V
from netc.parser.source import read_source
from netc.parser.symbols import describe
from netc.parser.tracer import Tracer


def module_dims(path: str, source: str) -> dict[str, DimDef]:
    """The dims module-level names hold, as the parser evaluates them (`time = Dim("time")`,
    `enc = lstm + lstm`, `half, pieces = Dim("half", 16), Dim("pieces", 2)`), for the language
    server's hovers; a statement that fails is left out (the compile reports it)."""
    tracer = Tracer(read_source(path, source))
    try:
        for stmt in tracer.module.body:
            try:
                tracer.module_stmt(stmt)
            except CompileError:
                continue
        return {k: tracer.dims[v.name] for k, v in tracer.globals.items() if isinstance(v, V.DimRef)}
    finally:
        tracer.close()


@dataclass(frozen=True)
class AttrValue:
    """What one module instance's `self.<name> = ...` holds (`module_attributes`)."""

    instance: str  # the instance's path (`block1/self_att`)
    text: str  # the value, as messages describe it (`dim `kv_time1``, `Linear` ...)
    dim: str | None = None  # a dim: its name
    param_path: str | None = None  # a layer (`Linear(...)`): its parameters' path


def module_attributes(path: str, source: str, network: str | None) -> dict[tuple[int, int], list[AttrValue]]:
    """For the language server's hovers: the values each `self.<name> = ...` of the file's
    modules assigned while `network` was traced, by the place of its target (`Span.key`), one
    per module instance; up to a compile error, what ran before it."""
    tracer = Tracer(read_source(path, source))
    tracer.attr_log = {}
    try:
        tracer.trace(network)
    except CompileError:
        pass
    finally:
        tracer.close()
    out: dict[tuple[int, int], list[AttrValue]] = {}
    for key, assigned in tracer.attr_log.items():
        for inst, v in assigned:
            if isinstance(v, V.OpModule):
                fn = REGISTRY[v.op].fn_name or v.op
                value = AttrValue(inst.path, f"`{fn}`", param_path=v.path)
            elif isinstance(v, V.ModuleInstance):
                value = AttrValue(inst.path, f"module `{v.cls.node.name}` (`{v.path}`)")
            else:
                value = AttrValue(inst.path, describe(v), dim=v.name if isinstance(v, V.DimRef) else None)
            out.setdefault(key, []).append(value)
    return out
