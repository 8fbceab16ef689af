"""Progress lines on stderr for work that takes seconds to minutes: `verify`'s backends, each
model `check --construct` runs, RETURNN compiling a native op (once per machine). The library is
quiet; a command turns the lines on (`enable`)."""

from __future__ import annotations

from collections.abc import Callable

_write: Callable[[str], None] | None = None


def enable(write: Callable[[str], None]) -> None:
    global _write
    _write = write


def step(message: str) -> None:
    """One line saying what starts now (shown only when a command enabled progress)."""
    if _write is not None:
        _write(message)
