"""How a failure of a backend (or of a framework running an emitted file) is told: one line with
the exception's type and the first line of its message, and on request the whole traceback."""

from __future__ import annotations

import contextlib
import traceback

from netc.errors import CompileError


class BackendError(Exception):
    """Backend `backend` (eager, torch, returnn) failed on a batch; `__cause__` is what it raised."""

    def __init__(self, backend: str, cause: BaseException):
        super().__init__(f"{backend} failed: {error_line(cause)}")
        self.backend = backend
        self.__cause__ = cause


@contextlib.contextmanager
def failing_as(backend: str):
    """What the block raises comes as a BackendError naming `backend`; a CompileError (a target
    refusing the model) stays the located error it is."""
    try:
        yield
    except (CompileError, BackendError):
        raise
    except Exception as e:
        raise BackendError(backend, e) from e


class Mismatch(AssertionError):
    """`netc verify`: a backend's results are not eager's in kind (missing, other dims or lengths)."""


class ForeignError(RuntimeError):
    """An exception raised in another process (RETURNN's PyTorch backend runs in one): its
    `error_line` there ("" when the process died without one) and that process' stderr."""

    def __init__(self, what: str, line: str, stderr: str):
        last = next((x for x in reversed(stderr.splitlines()) if x.strip()), "no output")
        super().__init__(f"{what}: {line or last.strip()}")
        self.line, self.stderr = line or f"{what}: {last.strip()}", stderr


def error_line(e: BaseException) -> str:
    """`Type: the message's first line`; a message-less exception also says where it was raised."""
    if isinstance(e, BackendError):
        return str(e)
    if isinstance(e, ForeignError):
        return e.line
    name, message = type(e).__name__, str(e)
    if isinstance(e, KeyError) and len(e.args) == 1:
        message = repr(e.args[0])  # as Python shows it: KeyError: 'split/2'
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    if first:
        return f"{name}: {first}"
    tb = traceback.extract_tb(e.__traceback__)
    return f"{name} at {tb[-1].filename}:{tb[-1].lineno}" if tb else name


def error_detail(e: BaseException) -> str:
    """The whole story: the traceback with its causes and notes; another process' stderr."""
    if isinstance(e, BackendError) and e.__cause__ is not None:
        e = e.__cause__  # the backend's own traceback
    if isinstance(e, ForeignError):
        return e.stderr  # its traceback there; how it was started here says nothing
    return "".join(traceback.format_exception(e))
