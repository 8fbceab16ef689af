"""`netc check`: do a project's models compile, are their generated files current, and (with
`--construct`) do those files really run? Facts only; `netc/check_report.py` renders them."""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Literal

from netc import tf_quiet
from netc.build import Cache, Compiled
from netc.progress import step
from netc.project import ConfigError, ModelJob


@dataclass
class Problem:
    kind: Literal["compile", "stale", "missing", "construct"]
    file: str
    message: str  # one line
    line: int | None = None  # 1-based, as are the columns
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None
    detail: str = ""  # the rendered compile error (source line, caret) or the unified diff


@dataclass
class TargetCheck:
    target: str
    path: str | None  # None: only compiled (a target may reject a model), nothing to compare
    status: Literal["ok", "stale", "missing", "unchecked"]
    construct: Literal["ok", "failed"] | None = None  # None: not constructed


@dataclass
class ModelCheck:
    source: str
    network: str | None
    cached: bool
    targets: list[TargetCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def status(self) -> Literal["ok", "stale", "error"]:
        if any(p.kind in ("compile", "construct") for p in self.problems):
            return "error"
        return "stale" if self.problems else "ok"


# how to regenerate one output: (job, target, path) -> a command line
RegenHint = Callable[[ModelJob, str, str], str]


def _first_difference(old: list[str], new: list[str]) -> int:
    """1-based line of the on-disk file where the fresh output first differs."""
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return i + 1
    return min(len(old), len(new)) + 1


def check_outputs(c: Compiled, regen: RegenHint) -> ModelCheck:
    job = c.job
    mc = ModelCheck(job.source, job.network, c.cached)
    if c.error is not None:
        s = c.error.span
        where = {} if s is None else {k: v for k, v in s.location().items() if k != "file"}
        mc.problems.append(Problem("compile", job.source, c.error.message, detail=c.error.render(), **where))
        return mc
    for target, path in job.outputs.items():
        if path is None:
            mc.targets.append(TargetCheck(target, None, "unchecked"))
            continue
        fresh = c.texts[target]
        if not os.path.exists(path):
            mc.targets.append(TargetCheck(target, path, "missing"))
            mc.problems.append(Problem("missing", path, f"missing; create it with `{regen(job, target, path)}`"))
            continue
        raw = Path(path).read_bytes()
        if raw == fresh.encode("utf-8"):
            mc.targets.append(TargetCheck(target, path, "ok"))
            continue
        old = raw.decode("utf-8", errors="replace").splitlines(keepends=True)  # a diff even of a broken file
        new = fresh.splitlines(keepends=True)
        diff = "".join(difflib.unified_diff(old, new, f"{path} (on disk)", f"{path} (from {job.source})"))
        mc.targets.append(TargetCheck(target, path, "stale"))
        mc.problems.append(
            Problem(
                "stale",
                path,
                f"stale; regenerate with `{regen(job, target, path)}`",
                line=_first_difference(old, new),
                detail=diff,
            )
        )
    return mc


def _runtime_versions() -> str:
    out = []
    for pkg in ("torch", "tensorflow-cpu", "tensorflow", "returnn"):
        try:
            out.append(f"{pkg}=={version(pkg)}")
        except PackageNotFoundError:
            pass
    return ",".join(out)


def construct_all(checks: list[ModelCheck], compiled: list[Compiled], cache: Cache) -> None:
    """Construct every current target in this one process (TensorFlow is imported once).
    A success is remembered in the cache by the hash of the file and the runtime versions."""
    tf_quiet.quiet()
    from netc.ir.json import graph_from_json

    targets = {tc.target for mc in checks for tc in mc.targets}
    needed = [
        "numpy",
        *(["tensorflow", "returnn"] if "returnn" in targets else []),
        *(["torch"] if "torch" in targets else []),
        *(["torch", "returnn"] if "returnn-torch" in targets else []),
    ]
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            None, f"--construct runs the files, which needs {', '.join(missing)}: pip install 'netc[run]'"
        )
    runtime = _runtime_versions()
    for mc, c in zip(checks, compiled):
        for tc in mc.targets:
            if tc.status not in ("ok", "unchecked"):
                continue  # stale or missing: already a failure, and not what would run
            text = c.texts[tc.target]
            what = {"construct": tc.target, "text": text, "runtime": runtime}
            key = "construct-" + hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()
            if cache.get(key) is not None:
                tc.construct = "ok"
                continue
            from netc_runtime.construct import construct
            from netc_runtime.failures import error_detail, error_line

            step(f"check: constructing {tc.target} of {mc.source}")
            try:
                construct(graph_from_json(c.graph_json), tc.target, text)
            except Exception as e:  # whatever RETURNN or torch raise: report it, go on with the others
                tc.construct = "failed"
                name = {
                    "returnn": "RETURNN could not construct the network",
                    "returnn-torch": "RETURNN (PyTorch) could not run the config",
                }.get(tc.target, "the torch module failed")
                mc.problems.append(
                    Problem("construct", tc.path or mc.source, f"{name}: {error_line(e)}", detail=error_detail(e))
                )
                continue
            tc.construct = "ok"
            cache.put(key, {"constructed": True})
