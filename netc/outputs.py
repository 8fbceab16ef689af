"""Files a command writes (`-o`): the folder made where it is missing, and one line naming the
file where it cannot be written (not the OS's bare `[Errno 17] File exists`)."""

from __future__ import annotations

import os
from pathlib import Path


class OutputError(ValueError):
    """`cannot write PATH: why`."""


def prepare(path: str | os.PathLike) -> Path:
    """`path`'s folder, made where missing; an OutputError where a file is in its way."""
    out = Path(path)
    for folder in reversed(out.parents):
        if folder.exists() and not folder.is_dir():
            raise OutputError(f"cannot write {path}: {folder} is a file, not a folder")
    if out.is_dir():
        raise OutputError(f"cannot write {path}: it is a folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from e
    return out


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    out = prepare(path)
    try:
        out.write_bytes(data)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from e


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))
