"""Latency per step and real-time factor of a streamed step module (`netc export --streaming`).

    .venv/bin/python bench/bench_streaming.py [--model bench/lstm_model.py] [--time 100] [--batch 1]
        [--frame-ms 10] [--runs 5]

The model's step module is exported with the real CLI, as ONNX and as TorchScript, and run by
the host runner (`netc_runtime.stream_runner.Stream`) one frame at a time on `--batch` streams
of `--time` frames, each frame `--frame-ms` of audio (10 ms: the usual feature shift). The
streamed outputs are checked against the whole-sequence torch module (as `netc compile` writes
it: hoisted, fused) first (1e-4). Per format: the median and 90th percentile latency of one step (a `feed`: the
module call and the host's cache bookkeeping), and the real-time factor: the time to stream
the whole sequence over its audio's duration (below 1: faster than real time). Beside them the
whole-sequence torch module on the same batch (one call: what streaming gives up for latency).
1 thread (torch and onnxruntime); medians of `--runs` interleaved runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from netc.compiler import compile_graph
from netc_runtime.backends import load_torch_module, run_torch
from netc_runtime.stream_runner import StepModule, Stream
from netc_runtime.verify import random_inputs, random_params

NETC = Path(sys.executable).with_name("netc")


def _export(model: str, fmt: str, directory: Path, params: Path) -> Path:
    out = directory / f"step.{fmt}"
    cmd = [str(NETC), "export", model, "--streaming", "--format", fmt, "-o", str(out), "--params", str(params)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"netc export --streaming failed:\n{proc.stdout}{proc.stderr}")
    return out


def _stream(module: StepModule, x: np.ndarray, consts: dict) -> tuple[np.ndarray, list[float], float]:
    """x [batch, time, ...] fed frame by frame: the stacked first output, each step's seconds, the total."""
    stream = Stream(module, x.shape[0], consts)
    name = module.outputs[0]["name"]
    outs, steps = [], []
    start = time.perf_counter()
    for t in range(x.shape[1]):
        s = time.perf_counter()
        outs.append(stream.feed({"x": x[:, t]})[name])
        steps.append(time.perf_counter() - s)
    return np.stack(outs, axis=1), steps, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(Path(__file__).with_name("lstm_model.py")))
    ap.add_argument("--time", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--frame-ms", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    g = compile_graph(args.model)
    rng = np.random.default_rng(0)
    lens = {"time": np.full(args.batch, args.time, dtype=np.int32)}
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    whole = run_torch(g, inputs, lens, params)
    name = next(iter(whole.outputs))
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "params.npz"
        np.savez(npz, **{f"param:{k}": v for k, v in params.items()})
        modules = {
            fmt: StepModule(_export(args.model, fmt, Path(tmp), npz), threads=1) for fmt in ("onnx", "torchscript")
        }
        consts = {k: v for k, v in inputs.items() if k != "x"}
        for fmt, module in modules.items():
            got, _, _ = _stream(module, inputs["x"], consts)
            diff = float(np.abs(got - whole.outputs[name]).max())
            if diff > 1e-4:
                sys.exit(f"{fmt}: the streamed `{name}` differs from the whole-sequence module by {diff:.3e}")
        model = load_torch_module(g).Model()
        model.load_returnn_params(params)
        x, x_lens = torch.as_tensor(inputs["x"]), torch.as_tensor(lens["time"], dtype=torch.int64)
        step_times: dict[str, list[float]] = {fmt: [] for fmt in modules}
        worst: dict[str, list[float]] = {fmt: [] for fmt in modules}
        totals: dict[str, list[float]] = {fmt: [] for fmt in [*modules, "whole"]}
        for _ in range(args.runs + 1):  # the first run warms up
            for fmt, module in modules.items():
                _, steps, total = _stream(module, inputs["x"], consts)
                step_times[fmt].append(float(np.median(steps)))
                worst[fmt].append(float(np.percentile(steps, 90)))
                totals[fmt].append(total)
            with torch.no_grad():
                s = time.perf_counter()
                model(x=x, time_lens=x_lens)
                totals["whole"].append(time.perf_counter() - s)
    audio = args.time * args.frame_ms / 1000
    print(
        f"{Path(args.model).name}: batch {args.batch}, {args.time} frames of {args.frame_ms:g} ms ({audio:g} s), "
        f"1 thread, medians of {args.runs} runs; streamed = whole-sequence torch (≤1e-4)"
    )
    print("| what | latency per step (median, 90th percentile) | whole sequence | real-time factor |")
    print("|---|---|---|---|")
    for fmt in modules:
        total = float(np.median(totals[fmt][1:]))
        step = float(np.median(step_times[fmt][1:])) * 1000
        p90 = float(np.median(worst[fmt][1:])) * 1000
        row = f"{step:.3f} ms, {p90:.3f} ms | {total * 1000:.1f} ms | {total / audio:.4f}"
        print(f"| step module, {fmt} (host runner) | {row} |")
    total = float(np.median(totals["whole"][1:]))
    print(f"| whole-sequence torch module (one call) | — | {total * 1000:.1f} ms | {total / audio:.4f} |")


if __name__ == "__main__":
    main()
