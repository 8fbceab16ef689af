"""Run one generated program on eager, torch and RETURNN in this process and classify it.

Eager mode is the oracle and does not depend on the pass options, so it runs once; the
emitted torch module runs under every option set (cheap), RETURNN under the default set,
`--no-hoist` and a third set chosen by the seed (building a TF graph is the cost). A program
with `choice` is also searched with the beam (eager, torch and RETURNN, default options).

Outcomes (the worst run decides): `agree`; `refused` (a located `CompileError`, e.g. a
documented RETURNN-target limitation); `traceback` (any other exception: backend,
exception type, first line); `mismatch` (a difference above 1e-4, other dims or lengths);
`timeout` (the program ran past its time limit: an `end` loop that never stops, a hang).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from netc.compiler import compile_graph
from netc.emit_torch.lowering import torch_options
from netc.errors import CompileError
from netc.passes.pipeline import PassOptions
from netc_runtime.backends import Result, run_eager, run_returnn, run_torch
from netc_runtime.verify import compare, eager_cannot_run, random_inputs, random_params

from .gen import Program
from .known import DOCUMENTED_EAGER_ERRORS, documented

OPTION_SETS: dict[str, PassOptions] = {
    "default": PassOptions(),
    "no_hoist": PassOptions(hoist=False),
    "no_fuse": PassOptions(fuse=False),
    "no_whole": PassOptions(whole_sequence=False),
    "scan": PassOptions(targets=torch_options("scan")),  # torch only: RETURNN has no other loop form
}
RANK = {"agree": 0, "refused": 1, "mismatch": 2, "traceback": 3, "timeout": 4}
MODE_RANK = {"agree": 0, "documented": 1, "refused": 2, "mismatch": 3, "traceback": 4, "timeout": 5}
TIME_LIMIT_S = 300  # generous: RETURNN compiles its native LSTM op on first use


class ProgramTimeout(Exception):
    pass


@dataclass
class Failure:
    kind: str  # refused | traceback | mismatch | timeout
    backend: str  # eager | torch | returnn | compile
    options: str  # an OPTION_SETS key, "+search" appended for beam searches
    detail: str  # exception type and first line, or output and difference

    @property
    def signature(self) -> str:
        """What identifies a bug class across programs: kind, backend, exception type and its
        first line with names and numbers blanked out (no option set: one bug shows under many)."""
        mode = " search" if self.search else ""
        if self.kind == "mismatch":
            return f"mismatch {self.backend}{mode}"
        text = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", "_", self.detail)
        text = re.sub(r"\(\(.*\)\)", "(...)", text)
        text = re.sub(r"\d+", "N", text)
        return f"{self.kind} {self.backend}{mode}: {text[:110]}"

    @property
    def search(self) -> bool:
        return "search" in self.options

    @property
    def counts_as(self) -> str:
        """The outcome this failure makes: a refusal of a documented limitation is `documented`."""
        return "documented" if self.kind == "refused" and documented(self.detail) else self.kind


@dataclass
class Report:
    seed: int
    outcome: str
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0
    features: frozenset[str] = frozenset()
    times: dict[str, float] = field(default_factory=dict)  # seconds per backend
    searched: bool = False  # has a `choice`: also checked as a beam search

    @property
    def signatures(self) -> list[str]:
        """Of every failure, not only the worst kind's (a traceback would hide a mismatch)."""
        return sorted({f.signature for f in self.failures})

    def mode_outcome(self, search: bool) -> str:
        """The worst outcome of training (`search=False`) or of the beam search: `agree`,
        `documented` (refused with a documented limitation), `refused` (another located error),
        `mismatch`, `traceback` or `timeout` (a timeout or a compiler failure counts for both)."""
        kinds = [f.counts_as for f in self.failures if f.search == search or f.backend in ("any", "compile")]
        return max(kinds, key=MODE_RANK.__getitem__, default="agree")


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """SIGALRM in the main thread (pytest's and the CLI's); elsewhere no limit."""
    import threading

    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return

    def handler(signum, frame):
        raise ProgramTimeout(f"ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _first_line(e: BaseException) -> str:
    """Type and first line; an empty message gets the innermost frame's function instead."""
    text = str(e).strip().splitlines()
    if text and text[0].startswith("Graph execution error"):  # TF: the cause stands above `[[{{node ...}}]]`
        cause = [t for t, n in zip(text, text[1:]) if t.strip() and n.strip().startswith("[[")]
        text = cause[:1] or [t for t in text if t.strip() and not t.strip().startswith(("[[", "File "))][-1:]
    if text:
        return f"{type(e).__name__}: {text[0]}"
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_frame.f_code.co_name}" if tb else ""
    return f"{type(e).__name__}: (no message) in {where}"


def lengths(g, prog: Program, rng: np.random.Generator, batch: int = 3, max_len: int = 6) -> dict[str, np.ndarray]:
    """Unequal lengths per dynamic input dim (the first sequence the longest); a dim the program
    derives from another (CTC labels: a third of the frames, so they can be aligned; RNN-T's labels+1
    dim: its labels' plus one) follows it; a `choice` target is cut to its loop's bound."""
    from netc.ir.interface import input_dyn_dims

    lens: dict[str, np.ndarray] = {}
    for k, d in enumerate(input_dyn_dims(g)):
        top = max_len + k
        lens[d] = np.asarray([top] + sorted(rng.integers(1, top, size=batch - 1).tolist(), reverse=True), np.int64)
    for d, (base, div, plus) in prog.derived_lens.items():
        if d in lens and base in lens:
            lens[d] = (np.maximum(1, lens[base] // div) + plus).astype(np.int64)
    for d, (base, scale, offset) in prog.bounded_lens.items():  # a `choice` target within its loop's bound
        if d in lens and (base is None or base in lens):
            cap = offset + (scale * lens[base] if base is not None else 0)
            lens[d] = np.maximum(1, np.minimum(lens[d], cap)).astype(np.int64)
    return lens


def _refusal(e: CompileError) -> str:
    where = f"{e.span.line}:{e.span.col}" if e.span is not None else "(no location)"
    return f"{where}: {e.message}"


def _compare(g, ref: Result, other: Result, backend: str, options: str, reference: str) -> list[Failure]:
    try:
        comps = compare(g, ref, other, backend, reference)
    except AssertionError as e:
        return [Failure("mismatch", backend, options, str(e).splitlines()[0])]
    return [
        Failure("mismatch", backend, options, f"{c.output}: max|diff| {c.max_abs_diff:.2e}") for c in comps if not c.ok
    ]


def check_program(
    prog: Program,
    directory: str | None = None,
    time_limit_s: int = TIME_LIMIT_S,
    backends: tuple[str, ...] = ("eager", "torch", "returnn"),
) -> Report:
    """Every backend and option set on one random padded batch; the worst outcome wins."""
    start = time.monotonic()
    directory = directory or tempfile.mkdtemp(prefix="diffgen_")
    path = os.path.join(directory, f"m{prog.seed}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(prog.source)
    failures: list[Failure] = []
    times: dict[str, float] = {}
    import returnn.tf.network  # noqa: F401 - imported outside the time limit (seconds, once)
    import torch  # noqa: F401

    try:
        with time_limit(time_limit_s), contextlib.redirect_stdout(sys.stderr):
            _check(prog, path, failures, times, backends)
    except ProgramTimeout as e:
        failures.append(Failure("timeout", "any", "", str(e)))
    outcome = max((f.kind for f in failures), key=RANK.__getitem__, default="agree")
    seconds = time.monotonic() - start
    return Report(prog.seed, outcome, failures, seconds, frozenset(prog.features), times, prog.search)


def _check(
    prog: Program, path: str, failures: list[Failure], times: dict[str, float], backends: tuple[str, ...]
) -> None:
    """Appends to `failures` as it goes, so a timeout keeps what was found before it."""
    graphs = {}
    t0 = time.monotonic()
    for name, opts in OPTION_SETS.items():
        try:
            graphs[name] = compile_graph(path, options=opts)
        except CompileError as e:
            failures.append(Failure("refused", "compile", name, _refusal(e)))
        except ProgramTimeout:
            raise
        except Exception as e:  # noqa: BLE001 - a compiler crash is what we look for
            failures.append(Failure("traceback", "compile", name, _first_line(e)))
    times["compile"] = time.monotonic() - t0
    if "default" not in graphs:
        return
    g = graphs["default"]
    rng = np.random.default_rng(prog.seed)
    lens = lengths(g, prog, rng)
    inputs = random_inputs(g, lens, rng)
    params = random_params(g, rng)
    # RETURNN's graph building is most of a program's time: a third option set every third seed
    returnn_sets = ["default", "no_hoist"] + (
        [["no_fuse", "no_whole"][prog.seed // 3 % 2]] if prog.seed % 3 == 0 else []
    )
    modes = [False, True] if prog.search else [False]
    # eager mode runs one sequence at a time: where the numbers depend on the whole batch
    # (`BatchNorm(update_in_inference=True)`), torch with the default options is the reference
    reference = "torch" if eager_cannot_run(g, path) else "eager"
    for search in modes:
        tag = "+search" if search else ""
        t0 = time.monotonic()
        try:
            if reference == "torch":
                ref = run_torch(g, inputs, lens, params, search=search)
            else:
                ref = run_eager(path, g, inputs, lens, params, search=search)
        except ProgramTimeout:
            raise
        except CompileError as e:  # eager's located errors of its documented limitations
            documented = "documented: " if any(d in e.message for d in DOCUMENTED_EAGER_ERRORS) else ""
            failures.append(Failure("refused", reference, "any" + tag, documented + _refusal(e)))
            continue
        except Exception as e:  # noqa: BLE001
            text = _first_line(e)
            if any(d in text for d in DOCUMENTED_EAGER_ERRORS):
                failures.append(Failure("refused", reference, "any" + tag, f"documented: {text}"))
            else:
                failures.append(Failure("traceback", reference, "any" + tag, text))
            continue
        finally:
            times[reference] = times.get(reference, 0.0) + time.monotonic() - t0
        # a dim a loop or an op made with no frame for any sequence of the batch (every `end` at
        # the first step): a target failing on it is the documented limitation (docs/language.md)
        empty = sorted({d for per in ref.lens.values() for d, ls in per.items() if d not in lens and not np.any(ls)})
        for name, gg in graphs.items():
            for backend in ("torch", "returnn"):
                if backend not in backends or backend == "returnn" and name not in returnn_sets:
                    continue
                if search and name != "default" or (backend, name) == (reference, "default"):
                    continue
                t0 = time.monotonic()
                try:
                    if backend == "torch":
                        res = run_torch(gg, inputs, lens, params, search=search)
                    else:
                        res = run_returnn(gg, inputs, lens, params, search=search)
                except ProgramTimeout:
                    raise
                except CompileError as e:
                    failures.append(Failure("refused", backend, name + tag, _refusal(e)))
                    continue
                except Exception as e:  # noqa: BLE001
                    if empty:
                        why = f"documented: no frame in the whole batch along {', '.join(empty)}"
                        failures.append(Failure("refused", backend, name + tag, why))
                    else:
                        failures.append(Failure("traceback", backend, name + tag, _first_line(e)))
                    continue
                finally:
                    times[backend] = times.get(backend, 0.0) + time.monotonic() - t0
                failures += _compare(gg, ref, res, backend, name + tag, reference)


def run_seeds(args: tuple[list[int], set[str] | None, int]) -> list[Report]:
    """One worker's share: generate and check each seed (a process-pool entry point)."""
    from .gen import generate

    seeds, features, limit = args
    out = []
    for seed in seeds:
        rep = check_program(generate(seed, features), time_limit_s=limit)
        print(f"seed {seed}: {rep.outcome} {rep.seconds:.1f}s {'; '.join(rep.signatures)}", file=sys.stderr, flush=True)
        out.append(rep)
    return out
