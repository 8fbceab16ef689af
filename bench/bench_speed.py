"""Issue 8's speed numbers in one run, written as a Markdown table (bench/RESULTS.md).

    .venv/bin/python bench/bench_speed.py [--runs 5] [--statements 100,1000,10000] [--out bench/RESULTS.md]

Every comparison runs its variants interleaved (one run of each, then the next round) and
reports medians; torch runs on 1 thread. Variants are checked equal before anything is timed.
- LSTM forward (batch 16, 100 frames, 80 -> 256): the plain-ops LSTM loop compiled by netc,
  fused and not, the same without hoisting, a hand loop, netc's `Lstm` op, a loop over netc's
  `LstmCell` (fused and not) and `nn.LSTM` (`bench_torch.py`'s variants)
- GRU forward (the same sizes): a plain-ops GRU loop in torch's form and a loop over netc's
  `GruCell`, each fused and not, against `nn.GRU` (`bench_gru.py`)
- the attention decoder forward (batch 16, 150/40 frames, D512, the key projection written in
  the loop): netc, netc without hoisting, a naive and a hoisted hand loop (`bench_attention.py`)
- compile time in-process (parse, passes, both targets) of generated models of N statements
  (`compile_model.py`), and `netc compile examples/attention.py` as a command
- one training step (forward, backward, Adam) of the attention decoder with its cross entropy:
  the torch module against RETURNN on TensorFlow, both on 1 thread (`bench_train.py`)
- RETURNN (TensorFlow) building the emitted attention config for training, hoisted and not,
  and what RETURNN itself still moves out of its rec unit
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))


def median_ms(fns: dict, runs: int) -> dict[str, float]:
    from bench_torch import timed

    return timed(fns, runs)


def script_ms(script: str, runs: int) -> dict[str, float]:
    """Run a side-by-side benchmark of this directory (it checks its variants equal first and
    prints a title, then `name  ms  ratio` per variant): milliseconds by variant."""
    out = subprocess.run(
        [sys.executable, str(HERE / script), "--runs", str(runs)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    start = next(i for i, line in enumerate(out) if "1 thread" in line)  # TF may print before the title
    rows = [line.strip().rsplit(" ms", 1)[0].rsplit(None, 1) for line in out[start + 1 :]]
    return {name.strip(): float(v) for name, v in rows}


def lstm_rows(runs: int) -> list[tuple[str, str]]:
    """Forward of the plain-ops LSTM, `LstmCell` and `Lstm`: `bench_torch.py`'s variants."""
    ms = script_ms("bench_torch.py", runs)
    base = ms["nn.LSTM (native)"]
    return [(f"LSTM forward: {name}", f"{v:.1f} ms ({v / base:.2f}× nn.LSTM)") for name, v in ms.items()]


def gru_rows(runs: int) -> list[tuple[str, str]]:
    """Forward of the plain-ops GRU in torch's form and of `GruCell` against `nn.GRU`: `bench_gru.py`."""
    ms = script_ms("bench_gru.py", runs)
    base = ms["nn.GRU (native)"]
    return [(f"GRU forward: {name}", f"{v:.1f} ms ({v / base:.2f}× nn.GRU)") for name, v in ms.items()]


def attention_rows(runs: int) -> list[tuple[str, str]]:
    """The attention decoder: `bench_attention.py`'s variants."""
    ms = script_ms("bench_attention.py", runs)
    hand, naive = ms["hoisted hand loop"], ms["naive hand loop"]
    return [
        (
            f"attention decoder forward: {name}",
            f"{v:.1f} ms ({v / hand:.2f}× hoisted hand loop, {naive / v:.1f}× faster than naive)",
        )
        for name, v in ms.items()
    ]


def train_rows(runs: int) -> list[tuple[str, str]]:
    """One training step of the attention decoder, torch module against RETURNN: `bench_train.py`."""
    ms = script_ms("bench_train.py", runs)
    base = ms["RETURNN (TensorFlow)"]
    return [(f"attention training step: {name}", f"{v:.0f} ms ({v / base:.2f}× RETURNN)") for name, v in ms.items()]


def compile_rows(statements: list[int], runs: int) -> list[tuple[str, str]]:
    from compile_model import model

    from netc.compiler import TARGETS, compile_graph

    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n in statements:
            path = Path(d) / f"m{n}.py"
            path.write_text(model(n), encoding="utf-8")
            first = {t: TARGETS[t](compile_graph(str(path))) for t in TARGETS}  # warm-up; same bytes each time
            fns = {t: (lambda t=t, path=path: TARGETS[t](compile_graph(str(path)))) for t in TARGETS}
            for t, text in first.items():
                assert fns[t]() == text, "compiling twice gives other text"
            ms = median_ms(fns, runs if n <= 1000 else 1)
            rows += [(f"compile {n:,} statements → {t}", f"{v / 1000:.3f} s") for t, v in ms.items()]
    cli = [
        str(Path(sys.executable).with_name("netc")),
        "compile",
        str(ROOT / "examples" / "attention.py"),
        "-o",
        os.devnull,
    ]
    subprocess.run(cli, check=True)
    ms = median_ms({"cli": lambda: subprocess.run(cli, check=True)}, runs)["cli"]
    rows.append(("`netc compile examples/attention.py` (the command, wall)", f"{ms / 1000:.2f} s"))
    return rows


def returnn_rows(runs: int) -> list[tuple[str, str]]:
    """Each construction in a fresh process (TF keeps state per process)."""
    code = (
        "import sys\n"
        "from netc.compiler import compile_file\n"
        "from netc.passes.pipeline import PassOptions\n"
        "from netc_runtime.returnn_loops import _construct\n"
        "text = compile_file(sys.argv[1], 'returnn', options=PassOptions(hoist=sys.argv[2] == 'on'))\n"
        "moved, s = _construct(text, True)\n"
        "print(s, sum(len(m.inputs) + len(m.outputs) for m in moved.values()))\n"
    )
    model = str(ROOT / "examples" / "attention.py")
    times: dict[str, list[float]] = {"on": [], "off": []}
    moved: dict[str, int] = {}
    for _ in range(runs):
        for hoist in times:
            out = subprocess.run(
                [sys.executable, "-c", code, model, hoist], capture_output=True, text=True, check=True
            ).stdout.split()
            times[hoist].append(float(out[-2]))
            moved[hoist] = int(out[-1])
    return [
        (
            f"RETURNN builds attention for training, hoisting {hoist}",
            f"{statistics.median(ts):.2f} s; RETURNN moves {moved[hoist]} layers out of the loop",
        )
        for hoist, ts in times.items()
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--statements", default="100,1000,10000")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    ap.add_argument("--no-returnn", action="store_true")
    ap.add_argument("--no-attention", action="store_true", help="Skip the attention decoder (the slowest row).")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    started = time.time()
    rows: list[tuple[str, str]] = []
    parts = [("LSTM", lambda: lstm_rows(args.runs)), ("GRU", lambda: gru_rows(args.runs))]
    if not args.no_attention:
        parts.append(("attention", lambda: attention_rows(args.runs)))
    parts.append(("compile", lambda: compile_rows([int(s) for s in args.statements.split(",")], args.runs)))
    if not args.no_returnn:
        if not args.no_attention:
            parts.append(("training step", lambda: train_rows(args.runs)))
        parts.append(("RETURNN", lambda: returnn_rows(args.runs)))
    for what, part in parts:
        t0 = time.time()
        rows += part()
        print(f"{what}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, torch {torch.__version__}"
    )
    text = (
        "# Speed (issue 8)\n\n"
        f"`bench/bench_speed.py --runs {args.runs} --statements {args.statements}`: {machine}; torch on 1 thread; "
        f"medians of {args.runs} interleaved runs (10,000 statements: one run); "
        f"{time.time() - started:.0f} s in all. A shared machine: compare rows of one run.\n\n"
        "| what | result |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)
    )
    out = Path(args.out)
    if out.exists():  # sections below the table (a benchmark's analysis, written by hand) stay
        old = out.read_text(encoding="utf-8")
        text += old[old.index("\n## ") :] if "\n## " in old else ""
    out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
