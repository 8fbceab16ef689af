"""A training step of the streaming Conformer CTC encoder, chunk by chunk against whole sequence:
the two networks of examples/conformer_streaming.py as netc's torch modules, on one batch.

    .venv/bin/python bench/bench_chunked_training.py [--batch 8] [--time 200] [--labels 20] [--runs 7]

`conformer_streaming` (the whole sequence, `chunk_mask`) and `conformer_streaming_chunked` (a
chunked loop of 4 encoder frames, caches of the last 8 keys and values and the convolution's last
4 frames per block) from one source, the same parameters (loaded by torch name). Before timing, in
evaluation mode (dropout off), their CTC losses are checked equal (<= 1e-4 relative). A step:
forward, backward, `torch.optim.Adam.step()`, in training mode (dropout on). torch on 1 thread,
CPU; medians of interleaved runs after a warm-up, milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from netc.compiler import compile_graph
from netc_runtime.backends import load_torch_module

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "conformer_streaming.py"
NETWORKS = ("conformer_streaming", "conformer_streaming_chunked")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--time", type=int, default=200)
    ap.add_argument("--labels", type=int, default=20)
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    models = {n: load_torch_module(compile_graph(str(EXAMPLE), network=n)).Model() for n in NETWORKS}
    state = models[NETWORKS[0]].state_dict()
    models[NETWORKS[1]].load_state_dict(state)  # one set of parameters, by torch name
    lens = np.sort(rng.integers(a.time // 2, a.time + 1, size=a.batch))[::-1].copy()
    lens[0] = a.time
    enc = (lens + 1) // 2
    label_lens = np.minimum(enc // 2, a.labels)
    batch = {
        "x": torch.as_tensor(rng.standard_normal((a.batch, a.time, 16)), dtype=torch.float32),
        "y": torch.as_tensor(rng.integers(0, 10, size=(a.batch, int(label_lens.max()))), dtype=torch.int32),
        "time_lens": torch.as_tensor(lens, dtype=torch.int64),
        "label_time_lens": torch.as_tensor(label_lens, dtype=torch.int64),
    }
    losses = {}
    for n, m in models.items():
        m.eval()
        with torch.no_grad():
            losses[n] = float(m(**batch)["ctc"])
    w, c = losses.values()
    assert abs(w - c) <= 1e-4 * max(1.0, abs(w)), losses
    opts = {n: torch.optim.Adam(m.parameters(), lr=1e-4) for n, m in models.items()}
    times: dict[str, list[float]] = {n: [] for n in NETWORKS}
    for r in range(a.runs + 1):  # the first: warm-up
        for n, m in models.items():
            m.train()
            t0 = time.perf_counter()
            opts[n].zero_grad()
            m(**batch)["ctc"].backward()
            opts[n].step()
            if r:
                times[n].append(time.perf_counter() - t0)
    base = statistics.median(times[NETWORKS[0]])
    print(
        f"batch {a.batch}, time {a.time} (encoder frames {int(enc.max())}, {-(-int(enc.max()) // 4)} chunks), "
        f"torch {torch.__version__}, 1 thread, median of {a.runs}; losses (eval) {w:.4f} / {c:.4f}"
    )
    for n in NETWORKS:
        med = statistics.median(times[n])
        print(f"| training step: {n} (torch module) | {1000 * med:.1f} ms ({med / base:.2f}× whole sequence) |")


if __name__ == "__main__":
    main()
