"""Where runs put files: a command leaves `$TMPDIR` as it found it.

Emitted modules and configs are written to one directory per process (imported modules keep
their file, so tracebacks show real lines), removed when the process ends. RETURNN caches the
native ops it compiles (`nativelstm2`) under its cache dir, which defaults to `$TMPDIR`: netc
points it at the user's cache instead (unless `RETURNN_CACHE_DIR` is set), so the one-time
compile is kept across runs and `$TMPDIR` stays clean.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path

from netc.progress import step


@cache
def scratch_dir() -> str:
    path = tempfile.mkdtemp(prefix="netc_")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def scratch_file(name: str, text: str) -> str:
    """`text` written to a fresh file `name` (made unique) in the process' scratch directory."""
    fd, path = tempfile.mkstemp(prefix=Path(name).stem + "_", suffix="".join(Path(name).suffixes), dir=scratch_dir())
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def returnn_cache_dir() -> str:
    """RETURNN's cache (compiled native ops): `RETURNN_CACHE_DIR`, else the user's cache; set
    in the environment, so RETURNN processes started from here use it too."""
    if "RETURNN_CACHE_DIR" not in os.environ:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        os.environ["RETURNN_CACHE_DIR"] = os.path.join(base, "netc", "returnn")
    os.makedirs(os.environ["RETURNN_CACHE_DIR"], exist_ok=True)
    return os.environ["RETURNN_CACHE_DIR"]


@cache
def prepare_returnn() -> None:
    """Before RETURNN runs here: its cache dir (`returnn_cache_dir`), and a progress line when
    it compiles a native op (a minute, once per machine and RETURNN version)."""
    cache_dir = returnn_cache_dir()
    from returnn.util.native_code_compiler import NativeCodeCompiler

    compile_inner = NativeCodeCompiler._maybe_compile_inner

    def compiling(self):
        step(f"compiling RETURNN native op {self.base_name} (one-time; cached in {cache_dir})")
        return compile_inner(self)

    NativeCodeCompiler._maybe_compile_inner = compiling


class CurrentStdout:
    """Writes to whatever `sys.stdout` is at the time: RETURNN's `OpMaker.log_stream` is the
    stdout of import time, so its compiler command lines would escape `redirect_stdout`."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()
