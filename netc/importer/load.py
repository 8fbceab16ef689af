"""Loading a RETURNN config: RETURNN's own `Config` in a subprocess (`_child.py`), which gives
back plain data (the network dict, the inputs, dim tags by name, kind and size). With `no_exec`
the file is not run: `noexec` evaluates the values from its syntax and the subprocess only makes
RETURNN's `Tensor`s and dim tags of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

from netc import tf_quiet
from netc.errors import CompileError, Span

_MARK = "\n@@netc-import@@\n"


@dataclass
class DimTag:
    id: int
    name: str
    kind: str  # "batch", "dynamic" or "static"
    size: int | None


@dataclass
class InputSpec:
    dims: list[int]  # dim tag ids, RETURNN's order
    sparse_dim: int | None
    dtype: str


@dataclass
class LoadedConfig:
    path: str
    network: dict
    inputs: dict[str, InputSpec]
    dims: dict[int, DimTag]
    task: str = "train"
    sets: list[tuple[str, str]] = field(default_factory=list)
    behavior_version: int = 0  # RETURNN's `behavior_version` of the config
    default_target: str = "classes"  # the target of a loss without `target` (RETURNN's config `target`)
    notes: list[str] = field(default_factory=list)  # how it was loaded, for the user (one line each)
    no_exec: bool = False  # read with --no-exec (asked for, or the fallback)
    values: dict = field(default_factory=dict)  # the config's names bound to plain numbers/strings, as loaded


def load_config(
    path: str,
    sets: list[tuple[str, str]] = (),
    network: str = "network",
    python: str | None = None,
    no_exec: bool | None = None,
) -> LoadedConfig:
    """The config at `path` as RETURNN loads it, `sets` as `++name value` options; a config that
    fails to load is a `CompileError` at the failing line of the config (or about the file).
    `no_exec`: the file is not run; its values are evaluated from its syntax (`noexec`). None:
    run it, and where that fails, read it so (with a note saying why)."""
    if no_exec is None:
        try:
            return _load(path, sets, network, python, False)
        except CompileError as run_error:
            try:
                loaded = _load(path, sets, network, python, True)
            except CompileError as e:  # the error of running it, at its line; why --no-exec cannot help
                where = f"line {e.span.line}: " if e.span else ""
                run_error.message += f" (and --no-exec cannot read it either: {where}{e.message})"
                run_error.args = (run_error.message,)
                raise run_error from None
            loaded.notes.insert(0, f"the config fails to load here ({_first_line(run_error)}): read with --no-exec")
            return loaded
    return _load(path, sets, network, python, no_exec)


def _first_line(e: CompileError) -> str:
    where = f"line {e.span.line}: " if e.span else ""
    return where + e.message.removeprefix("the config fails to load: ")


def _load(path: str, sets, network: str, python: str | None, no_exec: bool) -> LoadedConfig:
    req = {"path": os.path.abspath(path), "set": list(sets), "network": network}
    if no_exec:
        from netc.importer.noexec import evaluate_config

        req["data"] = evaluate_config(path, list(sets), network)
    request = json.dumps(req)
    proc = subprocess.run(
        [python or sys.executable, "-m", "netc.importer._child"],
        input=request,
        capture_output=True,
        text=True,
        env=tf_quiet.env(),
    )  # the request on stdin: --no-exec's values may be larger than a command line takes
    if _MARK not in proc.stdout:
        tail = (tf_quiet.strip_notices(proc.stderr).strip().splitlines() or ["no output"])[-1]
        raise CompileError(None, f"RETURNN could not load the config: {tail}", file=path)
    data = json.loads(proc.stdout.split(_MARK, 1)[1])
    if "error" in data:
        err = data["error"]
        message = err["message"] if err.get("plain") else f"the config fails to load: {err['message']}"
        if err.get("line") is None:
            raise CompileError(None, message, file=path)
        line_text = _line(path, err["line"])
        col = min(err.get("col") or 0, len(line_text))
        end_col = err.get("end_col") or len(line_text)
        raise CompileError(Span(file=path, line=err["line"], col=col, end_line=err["line"], end_col=end_col), message)
    dims = {d["id"]: DimTag(**d) for d in data["dims"]}
    inputs = {k: InputSpec(**v) for k, v in data["inputs"].items()}
    for spec in inputs.values():  # references -> ids
        spec.dims = [d["__dim__"] for d in spec.dims]
        spec.sparse_dim = spec.sparse_dim["__dim__"] if spec.sparse_dim else None
    notes = []
    if answered := data.get("answered"):
        notes.append(
            f"the config ran with its checks of files that are not here answered True ({_listed(answered)}), "
            "as on the machines it was written for; datasets are never built"
        )
    if absent := data.get("absent"):
        what = "the module" if len(absent) == 1 else "the modules"
        notes.append(
            f"the config imports {what} {_listed(absent)}, which only its cluster has: placeholders here "
            "(a layer that reads one is refused)"
        )
    if commands := data.get("commands"):
        what = "the command" if len(commands) == 1 else "the commands"
        notes.append(f"the config runs {what} {_listed(commands)}, which only its cluster has: empty output here")
    if files := data.get("files"):
        what = "the file" if len(files) == 1 else "the files"
        notes.append(
            f"the config reads {what} {_listed(files)}, which only its cluster has: placeholders here "
            "(a layer that reads one is refused)"
        )
    if unset := data.get("unset"):
        what = "value" if len(unset) == 1 else "values"
        notes.append(
            f"the config fails to load without the command-line {what} {_listed(unset)} (`config.value(name, None)`, "
            "not given): loaded with placeholder strings (`<name: not given>`) as a path would be; give the real "
            "ones with --set name=value"
        )
    if data.get("network_note"):
        notes.append(data["network_note"])
    return LoadedConfig(
        path,
        data["network"],
        inputs,
        dims,
        data.get("task", "train"),
        list(sets),
        data.get("behavior_version", 0),
        data.get("default_target", "classes"),
        notes,
        no_exec,
        data.get("values", {}),
    )


def _listed(items: list[str]) -> str:
    return ", ".join(repr(p) for p in items[:2]) + (f" and {len(items) - 2} more" if len(items) > 2 else "")


def _line(path: str, line: int) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    return lines[line - 1] if 1 <= line <= len(lines) else ""
