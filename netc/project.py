"""A project's models, as declared under `[tool.netc]` in its pyproject.toml.

```toml
[[tool.netc.models]]
source = "models/elman.py"
returnn = "generated/elman_config.py"
torch = "generated/elman_torch.py"

[[tool.netc.models]]
source = "models/lm_*.py"                  # a glob: one model per file
torch = "generated/{stem}_torch.py"        # {stem}: the source's file name without .py
base-config = "training/base.py"           # merged into each RETURNN config (needs `returnn` or `returnn-torch`)
```

Paths are relative to the pyproject.toml. Mistakes in the table are `ConfigError`s (exit 2).
"""

from __future__ import annotations

import glob
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from netc.compiler import CONFIG_TARGETS, TARGETS

PYPROJECT = "pyproject.toml"


class ConfigError(Exception):
    """A mistake in `[tool.netc]` or a usage mistake: reported as `file: error: ...`, exit code 2."""

    def __init__(self, file: str | None, message: str):
        super().__init__(message)
        self.file, self.message = file, message

    def render(self) -> str:
        return f"{self.file}: error: {self.message}" if self.file else f"error: {self.message}"


class _ModelTable(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    source: str
    network: str | None = None
    returnn: str | None = None
    torch: str | None = None
    returnn_torch: str | None = Field(None, alias="returnn-torch")
    base_config: str | None = Field(None, alias="base-config")


class _NetcTable(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    models: list[_ModelTable] = Field(min_length=1)
    cache_dir: str = Field(".netc_cache", alias="cache-dir")


@dataclass(frozen=True)
class ModelJob:
    """One model to compile: its source, its @network and each target's output file (None: compile
    only, to see that the target accepts the model). Paths are as the user sees them."""

    source: str
    network: str | None
    outputs: dict[str, str | None]  # target -> output path
    base_config: str | None = None  # path, as declared (it is named in the emitted config)
    base_config_file: str | None = None  # the same file, to read


@dataclass(frozen=True)
class Project:
    pyproject: Path
    root: Path
    cache_dir: Path
    models: list[ModelJob]


def find_pyproject(start: Path) -> Path:
    """The nearest pyproject.toml with a `[tool.netc]` table, from `start` upward."""
    for d in [start, *start.parents]:
        p = d / PYPROJECT
        if p.is_file() and "netc" in _read_toml(p).get("tool", {}):
            return p
    raise ConfigError(None, f"no {PYPROJECT} with a [tool.netc] table in {start} or above it")


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(str(path), f"not valid TOML: {e}") from None


def _where(loc: tuple) -> str:
    out = "tool.netc"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def load_project(pyproject: Path, cwd: Path | None = None) -> Project:
    """Read and check `[tool.netc]`; output and source paths are given relative to `cwd`."""
    cwd = cwd or Path.cwd()
    shown = display_path(pyproject, cwd)
    try:
        table = _NetcTable.model_validate(_read_toml(pyproject).get("tool", {}).get("netc", {}))
    except ValidationError as e:
        err = e.errors()[0]
        what = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise ConfigError(shown, f"{_where(err['loc'])}: {what}") from None
    root = pyproject.parent.resolve()
    jobs: list[ModelJob] = []
    owner: dict[str, str] = {}  # output path -> the source that writes it
    for k, m in enumerate(table.models):
        where = f"tool.netc.models[{k}]"
        declared = {t: getattr(m, t.replace("-", "_")) for t in TARGETS}  # `returnn-torch` is `returnn_torch`
        outputs = {t: path for t, path in declared.items() if path is not None}
        if not outputs:
            raise ConfigError(shown, f"{where}: give an output path for at least one target ({', '.join(TARGETS)})")
        if m.base_config and not set(outputs) & set(CONFIG_TARGETS):
            raise ConfigError(
                shown,
                f"{where}: `base-config` applies to the RETURNN targets (`returnn`, `returnn-torch`), which have no path",
            )
        sources = sorted(glob.glob(m.source, root_dir=root)) if glob.has_magic(m.source) else [m.source]
        if not sources:
            raise ConfigError(shown, f"{where}: `source = {m.source!r}` matches no file")
        if len(sources) > 1 and any("{stem}" not in p for p in outputs.values()):
            raise ConfigError(shown, f"{where}: `source` is a glob, so output paths need `{{stem}}`")
        base_file = None
        if m.base_config:
            base_file = root / m.base_config
            if not base_file.is_file():
                raise ConfigError(shown, f"{where}: `base-config = {m.base_config!r}` is not a file")
        for src in sources:
            if not (root / src).is_file():
                raise ConfigError(shown, f"{where}: `source = {src!r}` is not a file")
            stem = Path(src).stem
            outs = {t: display_path(root / p.replace("{stem}", stem), cwd) for t, p in outputs.items()}
            for p in outs.values():
                if p in owner:
                    raise ConfigError(shown, f"{where}: {p} is also the output of {owner[p]}")
                owner[p] = src
            jobs.append(
                ModelJob(
                    source=display_path(root / src, cwd),
                    network=m.network,
                    outputs=outs,
                    base_config=m.base_config,
                    base_config_file=None if base_file is None else display_path(base_file, cwd),
                )
            )
    return Project(pyproject, root, root / table.cache_dir, jobs)


def display_path(path: Path, cwd: Path) -> str:
    """`path` relative to `cwd` (CI annotations want paths relative to where the check runs)."""
    return os.path.relpath(Path(path).resolve(), cwd.resolve())
