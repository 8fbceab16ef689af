"""TensorFlow's start-up notices kept off netc's stderr, in netc's process and the ones it starts.

Some TensorFlow builds print, when imported on some processors, lines that no log level stops:
absl's `WARNING: All log messages before absl::InitializeLog() ...`, the oneDNN notice
(`port.cc] oneDNN custom operations are on ...`), and on GPU machines the CUDA plugins'
`Unable to register cuDNN factory` lines. A command's stderr is netc's own, so `quiet()`:

- sets `TF_CPP_MIN_LOG_LEVEL=3` and `TF_ENABLE_ONEDNN_OPTS=0` where the user has not set them
  (inherited by the RETURNN and checkpoint-reading processes netc starts). oneDNN's custom CPU
  kernels are chosen by the processor (on by default only on some), so turning them off also
  makes RETURNN's numbers the same on every machine; the difference is float round-off;
- catches file descriptor 2 while `tensorflow` is first imported and writes back what is not a
  known notice (a notice in C++ code bypasses Python's `sys.stderr`).

`TF_CPP_MIN_LOG_LEVEL=0` (or 1) set by the user keeps every line TensorFlow prints.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile
from types import ModuleType

ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}

# absl's format: severity, mmdd, time, thread, file:line]
_ABSL = r"[IWEF]\d{4} \d+:\d+:\d+\.\d+\s+\d+ \S+:\d+\] "
_NOTICES = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    rf"|{_ABSL}oneDNN custom operations are on"
    rf"|{_ABSL}This TensorFlow binary is optimized to use available CPU instructions"
    r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags\."
    rf"|{_ABSL}Unable to register cu\w+ factory"
    rf"|{_ABSL}computation placer already registered"
    rf"|{_ABSL}Could not find cuda drivers on your machine"
    rf"|{_ABSL}failed call to cuInit"
)


def is_notice(line: str) -> bool:
    """A line TensorFlow prints when imported that says nothing about the user's model."""
    return _NOTICES.match(line.strip()) is not None


def strip_notices(text: str) -> str:
    """`text` (a process's stderr) without TensorFlow's start-up notices."""
    return "".join(line for line in text.splitlines(keepends=True) if not is_notice(line))


def env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a process netc starts that may import TensorFlow: `base` (default:
    this process's) with the quiet settings where it has none of its own."""
    out = dict(os.environ if base is None else base)
    for key, value in ENV.items():
        out.setdefault(key, value)
    return out


def quiet() -> None:
    """For this process and those it starts: TensorFlow's notices off (see the module's doc).
    Cheap, and idempotent; TensorFlow is not imported here."""
    for key, value in ENV.items():
        os.environ.setdefault(key, value)
    if os.environ["TF_CPP_MIN_LOG_LEVEL"] in ("0", "1") or "tensorflow" in sys.modules:
        return
    if not any(isinstance(f, _QuietImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietImport())


class _QuietImport(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as the other finders do, with a loader that imports it with fd 2 caught
    (a `find_spec` that only asks whether it is installed imports nothing)."""

    finding = False

    def find_spec(self, fullname, path, target=None):
        if fullname != "tensorflow" or self.finding:
            return None
        self.finding = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.finding = False
        if spec is not None and spec.loader is not None:
            spec.loader = _CaughtLoader(spec.loader)
        return spec


class _CaughtLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # the real one, for importlib.resources
        with _caught_stderr():
            self.loader.exec_module(module)


class _caught_stderr:
    """File descriptor 2 into a temporary file for the block; then what is not a notice, back."""

    def __enter__(self) -> None:
        sys.stderr.flush()
        self.saved = os.dup(2)
        self.file = tempfile.TemporaryFile()
        os.dup2(self.file.fileno(), 2)

    def __exit__(self, *exc) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        text = strip_notices(self.file.read().decode("utf-8", "replace"))
        self.file.close()
        if text:
            sys.stderr.write(text)
            sys.stderr.flush()
