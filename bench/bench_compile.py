"""`torch.compile` of the emitted module: compile time at two sequence lengths, and speed against
the module run eagerly, with loops as Python `for` (the default) and as torch's `scan`
(`--loops scan`), side by side in one run.

    .venv/bin/python bench/bench_compile.py [--model examples/elman.py] [--lengths 50,200] [--runs 7]

For each form and length: the time of the first call of `torch.compile(model)` (compiling,
after `torch._dynamo.reset()`), then the median of `--runs` calls of the compiled and of the
eager module on a batch of 8 with unequal lengths (outputs checked equal to the eager default
module first). A Python loop is unrolled by compiling: its compile time grows with the length
and each new length compiles again; a scan is one operator of any length. 1 thread.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from netc.compiler import compile_graph
from netc.emit_torch.lowering import torch_options
from netc.naming import lens_name
from netc.passes.pipeline import PassOptions
from netc_runtime.backends import load_torch_module
from netc_runtime.verify import random_inputs, random_lengths, random_params


def _median_ms(fn, feed: dict, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(**feed)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="examples/elman.py")
    ap.add_argument("--lengths", default="50,200")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    graphs = {
        form: compile_graph(args.model, options=PassOptions(targets=torch_options(form))) for form in ("python", "scan")
    }
    rng = np.random.default_rng(0)
    params = random_params(graphs["python"], rng)
    print(f"{args.model}, batch 8, torch {torch.__version__}, 1 thread, medians of {args.runs}")
    print("| loops | length | compile (first call) | compiled | eager | speed-up |")
    print("|---|---|---|---|---|---|")
    for length in map(int, args.lengths.split(",")):
        g = graphs["python"]
        lens = random_lengths(g, 8, length, np.random.default_rng(length))
        lens = {d: np.maximum(v, 1) for d, v in lens.items()}
        feed = {k: torch.as_tensor(v) for k, v in random_inputs(g, lens, np.random.default_rng(1)).items()}
        feed.update({lens_name(d): torch.as_tensor(v, dtype=torch.int64) for d, v in lens.items()})
        reference = None
        for form, gg in graphs.items():
            model = load_torch_module(gg).Model()
            model.load_returnn_params(params)
            model.eval()
            with torch.no_grad():
                eager = model(**feed)
                reference = reference or eager
                torch._dynamo.reset()
                compiled = torch.compile(model, fullgraph=True)
                t0 = time.perf_counter()
                out = compiled(**feed)
                compile_s = time.perf_counter() - t0
                for k, v in reference.items():
                    assert torch.allclose(out[k], v, rtol=1e-4, atol=1e-4), (form, k)  # summed losses: relative
                fast = _median_ms(compiled, feed, args.runs)
                slow = _median_ms(model, feed, args.runs)
            print(f"| {form} | {length} | {compile_s:.1f} s | {fast:.2f} ms | {slow:.2f} ms | {slow / fast:.2f}× |")


if __name__ == "__main__":
    main()
