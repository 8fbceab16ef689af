"""Compiling a project's models: each in memory, many in parallel (a process pool), and none
whose inputs are unchanged since the last run (a content-hash cache).

The cache key of a model is the hash of everything its output depends on: its source, its
options (network, targets, base config and its contents) and the compiler itself (netc's
version and the contents of its own files, so an upgrade or a local edit invalidates it).
An entry holds the emitted texts (or the compile error) and the IR as JSON, one file
`<key>.json` in the cache directory (`.netc_cache/` next to pyproject.toml by default).
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from netc.errors import CompileError, Span
from netc.parser.source import read_text
from netc.project import ModelJob

CACHE_FORMAT = 1


@dataclass
class Compiled:
    job: ModelJob
    texts: dict[str, str]  # target -> emitted text (with the base config merged in)
    graph_json: str | None  # the optimised IR, for `--construct`
    error: CompileError | None
    cached: bool = False


def compiler_fingerprint() -> str:
    """netc's version and a hash of its own source files and templates."""
    h = hashlib.sha256(version("netc").encode())
    pkg = Path(__file__).resolve().parent
    for f in sorted(pkg.rglob("*")):
        if f.suffix in (".py", ".j2") and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _inputs(job: ModelJob) -> tuple[str, str | None]:
    """The texts a model's output depends on: its source and its base config, decoded as
    Python decodes source (raises a CompileError for a file that does not decode)."""
    base = read_text(job.base_config_file) if job.base_config_file else None
    return read_text(job.source), base


def cache_key(job: ModelJob, source: str, base: str | None, fingerprint: str) -> str:
    what = {
        "format": CACHE_FORMAT,
        "compiler": fingerprint,
        "source": source,
        "file_name": os.path.basename(job.source),  # emitted files name their source file
        "network": job.network,
        "targets": sorted(job.outputs),
        "base_config": [job.base_config, base],
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def _compile(job: ModelJob, source: str, base: str | None) -> dict:
    """One model, as a plain dict (what crosses the process boundary and lands in the cache)."""
    from netc.compiler import CONFIG_TARGETS, TARGETS, compile_graph
    from netc.emit_tf.merge import merge_base_config
    from netc.ir.json import graph_to_json

    try:
        g = compile_graph(job.source, source=source, network=job.network)
        texts = {t: TARGETS[t](g) for t in job.outputs}  # a target may reject a construct: located too
    except CompileError as e:
        span = None if e.span is None else {k: getattr(e.span, k) for k in ("line", "col", "end_line", "end_col")}
        return {"error": {"span": span, "message": e.message}}
    if base is not None:
        for t in CONFIG_TARGETS:
            if t in texts:
                texts[t] = merge_base_config(texts[t], base, job.base_config)
    return {"texts": texts, "graph": graph_to_json(g)}


def _compile_task(task: tuple[ModelJob, str, str | None]) -> dict:
    return _compile(*task)


def _result(job: ModelJob, entry: dict, cached: bool) -> Compiled:
    err = entry.get("error")
    if err is not None:
        span = None if err["span"] is None else Span(file=job.source, **err["span"])
        return Compiled(job, {}, None, CompileError(span, err["message"], file=job.source), cached)
    return Compiled(job, entry["texts"], entry["graph"], None, cached)


class Cache:
    def __init__(self, directory: Path | None):
        self.dir = directory

    def get(self, key: str) -> dict | None:
        if self.dir is None:
            return None
        try:
            return json.loads((self.dir / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent, or a half-written entry of a killed run: compile again

    def put(self, key: str, entry: dict) -> None:
        if self.dir is None:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        ignore = self.dir / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n", encoding="utf-8")  # the cache is never committed
        tmp = self.dir / f"{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(entry), encoding="utf-8")
        os.replace(tmp, self.dir / f"{key}.json")  # atomic: a parallel run never reads half an entry


def compile_all(jobs: list[ModelJob], cache_dir: Path | None = None, workers: int = 1) -> list[Compiled]:
    """Every model compiled (or taken from the cache), in the order given."""
    cache = Cache(cache_dir)
    fingerprint = compiler_fingerprint()
    results: dict[int, Compiled] = {}
    todo: list[tuple[int, str, tuple[ModelJob, str, str | None]]] = []
    for i, job in enumerate(jobs):
        try:
            source, base = _inputs(job)
        except CompileError as e:  # a file that cannot be read or decoded
            results[i] = Compiled(job, {}, None, e)
            continue
        key = cache_key(job, source, base, fingerprint)
        entry = cache.get(key)
        if entry is not None:
            results[i] = _result(job, entry, cached=True)
        else:
            todo.append((i, key, (job, source, base)))
    if len(todo) > 1 and workers > 1:
        # each worker imports the compiler once; chunks amortise the hand-over of small models
        with ProcessPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            chunk = max(1, len(todo) // (4 * workers))
            entries = list(pool.map(_compile_task, [t for _, _, t in todo], chunksize=chunk))
    else:
        entries = [_compile(*t) for _, _, t in todo]
    for (i, key, (job, _, _)), entry in zip(todo, entries):
        cache.put(key, entry)
        results[i] = _result(job, entry, cached=False)
    return [results[i] for i in range(len(jobs))]
