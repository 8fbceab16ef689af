"""What the `netc` commands share: how they fail (located errors, one line for a failing
backend), write their output, compile a model and take the pass options. Its own module so that
commands in other files (`cli_export`) need not import `netc.cli`, which imports them."""

from __future__ import annotations

import contextlib
import sys

import click

from netc.errors import CompileError
from netc.outputs import OutputError, write_text

_TARGETS = ("returnn", "torch", "returnn-torch")


def _fail(e: CompileError, as_json: bool = False) -> None:
    """A located error, exit code 1; `as_json` (commands whose output tools read): as JSON on
    stdout, `{"ok": false, "errors": [{"message", "file", "line", "col", ...}]}`."""
    if as_json:
        import json

        where = e.span.location() if e.span is not None else {"file": e.file}
        error = {"message": e.message, **where, "rendered": e.render()}
        click.echo(json.dumps({"ok": False, "errors": [error]}, indent=1))
    else:
        click.echo(e.render(), err=True)
    sys.exit(1)


@contextlib.contextmanager
def _one_line(command: str, verbose: bool, user_errors: tuple[type[Exception], ...] = ()):
    """Whatever fails in the block ends `command` with exit code 1 and one line on stderr: a
    located CompileError as the compiler renders it, a mistake in the user's files (`user_errors`)
    as `error: ...`, a failing backend as `<command>: <backend> failed: <Type>: <message's first
    line>`, anything else as `<command> failed: ...`. `verbose`: the traceback before that line."""
    from netc_runtime.failures import BackendError, Mismatch, error_detail, error_line

    try:
        yield
    except CompileError as e:
        _fail(e)
    except Exception as e:
        if verbose:
            click.echo(error_detail(e), err=True, nl=False)
        if isinstance(e, BackendError):
            line = f"{command}: {e}"
        elif isinstance(e, OSError):  # a file the command reads or writes: its name and why
            line = f"error: {e.filename}: {e.strerror}" if e.filename and e.strerror else f"error: {e}"
        elif isinstance(e, user_errors):
            line = f"error: {e.args[0] if e.args else e}"
        elif isinstance(e, Mismatch):
            line = f"{command} failed: {e}"
        else:
            line = f"{command} failed: {error_line(e)}"
        click.echo(line, err=True)
        sys.exit(1)


def _verbose(f):
    return click.option(
        "-v", "--verbose", is_flag=True, help="On a failure, also the traceback (of the backend, framework or netc)."
    )(f)


def _graph(
    model: str,
    network: str | None,
    hoist: bool = True,
    whole_sequence: bool = True,
    fuse: bool = True,
    as_json: bool = False,
    loops: str = "python",
):
    from netc.compiler import compile_graph
    from netc.emit_torch.lowering import torch_options
    from netc.passes.pipeline import PassOptions

    try:
        targets = torch_options(loops)
        options = PassOptions(hoist=hoist, whole_sequence=whole_sequence, fuse=fuse, targets=targets)
        return compile_graph(model, network=network, options=options)
    except CompileError as e:
        _fail(e, as_json)


def _pass_options(f):
    f = click.option(
        "--fuse/--no-fuse",
        default=True,
        show_default=True,
        help="A loop that is an LSTM or GRU runs as one native op (torch.lstm/gru, RETURNN nativelstm2).",
    )(f)
    f = click.option(
        "--whole-sequence/--no-whole-sequence",
        default=True,
        show_default=True,
        help="Hoisting that keeps whole sequences in memory: per-frame work over the sequence before a "
        "loop, shifted states, work feeding only stacks after it.",
    )(f)
    return click.option(
        "--hoist/--no-hoist", default=True, show_default=True, help="Move work out of loops (off: as written)."
    )(f)


def _loops_option(f):
    return click.option(
        "--loops",
        type=click.Choice(["python", "scan"]),
        default="python",
        show_default=True,
        help="torch: loops as Python `for` (scripts with TorchScript) or torch's `scan` operator "
        "(torch.export and torch.compile keep it a loop of any length; docs/targets.md).",
    )(f)


def _project_options(f):
    f = click.option("--no-cache", is_flag=True, help="Compile every model, ignoring the cache.")(f)
    return click.option(
        "-j", "--jobs", type=click.IntRange(min=1), help="Models compiled in parallel [default: CPU count]."
    )(f)


def _write(output: str | None, text: str) -> None:
    """`-o FILE` (its folder made if missing), or stdout for no `-o` or `-o -`."""
    if output is None or output == "-":
        click.echo(text, nl=False)
        return
    try:
        write_text(output, text)
    except OutputError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)


def _progress_on() -> None:
    """Before a command runs models: netc's progress lines on stderr."""
    from netc import progress

    progress.enable(lambda message: click.echo(f"netc: {message}", err=True))
