"""Forward speed of the emitted torch module vs hand-written PyTorch, side by side in one run.

    .venv/bin/python bench/bench_torch.py [--batch 16] [--time 100] [--runs 7] [--device cpu|cuda]

Compares, on the same inputs and weights (outputs checked equal first):
- netc: the emitted module (hoisted and fused: one torch.lstm call)
- netc, no fusion: the same, the loop left as a loop (the input projection runs once over the sequence)
- netc, no hoisting: the same IR without the hoisting pass (one projection per step)
- hand loop: a hand-written PyTorch LSTM loop with the projection hoisted and length masking
- netc Lstm op: the same LSTM written as netc's native `Lstm(dim)(x)` (one `torch.lstm` call)
- netc LstmCell: a loop over netc's one-step `LstmCell(dim)(x_t, (h, c))` (`lstm_cell_model.py`),
  fused, and without fusion (one `torch.lstm_cell` per frame)
- nn.LSTM: torch's native LSTM on a packed sequence (a different kernel; the bar to reach)
Reports the median of several timed runs after a warm-up, in milliseconds. On CUDA (`--device cuda`)
nn.LSTM runs cuDNN's kernel, and every timed call ends with `torch.cuda.synchronize()`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from netc.compiler import compile_graph
from netc.passes.pipeline import PassOptions
from netc_runtime.backends import load_torch_module
from netc_runtime.verify import random_params

MODEL = str(Path(__file__).with_name("lstm_model.py"))
NATIVE_MODEL = str(Path(__file__).with_name("lstm_native_model.py"))
CELL_MODEL = str(Path(__file__).with_name("lstm_cell_model.py"))
CPU = torch.device("cpu")


def hand_loop(p, x, lens):
    """What a PyTorch user writes by hand: projection hoisted, state frozen past each length."""
    w_ff, b_ff, w_rec = p["cell/ff_linear/W"], p["cell/ff_linear/b"], p["cell/rec_linear/W"]
    batch, steps, _ = x.shape
    n = w_rec.shape[0]
    proj = x @ w_ff + b_ff
    h = x.new_zeros(batch, n)
    c = x.new_zeros(batch, n)
    ys = []
    for t in range(steps):
        gates = proj[:, t] + h @ w_rec
        i, g, f, o = gates.split(n, dim=-1)
        c_new = c * torch.sigmoid(f) + torch.tanh(i) * torch.sigmoid(g)
        h_new = torch.tanh(c_new) * torch.sigmoid(o)
        valid = (t < lens)[:, None]
        c = torch.where(valid, c_new, c)
        h = torch.where(valid, h_new, h)
        ys.append(h_new)
    return torch.stack(ys, 1)


def native_lstm(p, n_in: int, n: int) -> torch.nn.LSTM:
    """torch.nn.LSTM with the same weights (its gate order is i, f, g, o; netc's split is in, g_in, forget, out)."""
    lstm = torch.nn.LSTM(n_in, n, batch_first=True)
    w_ff, w_rec, b = p["cell/ff_linear/W"].T, p["cell/rec_linear/W"].T, p["cell/ff_linear/b"]

    def reorder(w):
        """torch's gate order (input, forget, cell, output) from netc's split (cell, input, forget, output)."""
        parts = w.split(n, dim=0)
        return torch.cat([parts[1], parts[2], parts[0], parts[3]], dim=0)

    with torch.no_grad():
        lstm.weight_ih_l0.copy_(reorder(w_ff))
        lstm.weight_hh_l0.copy_(reorder(w_rec))
        lstm.bias_ih_l0.copy_(reorder(b[:, None])[:, 0])
        lstm.bias_hh_l0.zero_()
    return lstm


def cell_params(p, n: int) -> dict[str, np.ndarray]:
    """The loop's weights for `LstmCell`: one kernel [in + out, 4*out] in TF's gate order (i, g, f, o)
    from netc's split (g, i, f, o), and the bias less the cell's fixed forget bias 1.0."""

    def reorder(w):
        parts = w.split(n, dim=-1)
        return torch.cat([parts[1], parts[0], parts[2], parts[3]], dim=-1)

    bias = reorder(p["cell/ff_linear/b"]).clone()
    bias[2 * n : 3 * n] -= 1.0
    kernel = torch.cat([reorder(p["cell/ff_linear/W"]), reorder(p["cell/rec_linear/W"])], dim=0)
    return {"ys/rec/cell/lstm_cell/kernel": kernel.numpy(), "ys/rec/cell/lstm_cell/bias": bias.numpy()}


def synced(fn, device: torch.device):
    """`fn` that returns once the device has finished its work (CUDA runs asynchronously)."""
    if device.type != "cuda":
        return fn

    def run():
        out = fn()
        torch.cuda.synchronize(device)
        return out

    return run


def timed(fns: dict, runs: int, device: torch.device = CPU) -> dict[str, float]:
    """Median milliseconds per variant; runs are interleaved so that load drifts hit all alike."""
    fns = {name: synced(fn, device) for name, fn in fns.items()}
    for fn in fns.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: 1000 * statistics.median(ts) for name, ts in times.items()}


def params_by_path(g) -> dict[str, torch.Tensor]:
    """Seeded random parameters of graph `g` by module path and role (`cell/ff_linear/W`):
    RETURNN names depend on where layers stand, which hoisting and fusion change."""
    params = random_params(g, np.random.default_rng(0))
    return {f"{q.path}/{q.role}": torch.as_tensor(params[q.name]) for q in g.params}


def module_with(g, p: dict[str, torch.Tensor]) -> torch.nn.Module:
    """The torch module emitted for graph `g`, in eval mode, with parameters `p` (by module path),
    on `p`'s device."""
    m = load_torch_module(g).Model()
    m.load_returnn_params({q.name: p[f"{q.path}/{q.role}"].cpu().numpy() for q in g.params})
    return m.eval().to(next(iter(p.values())).device)


def tolerance(device: torch.device) -> float:
    """How far the variants' outputs may differ: cuDNN's RNNs compute with TF32 by default (as
    nn.LSTM does on a GPU), the loops of plain ops in float32."""
    return 2e-3 if device.type == "cuda" else 1e-4


def device_option(ap: argparse.ArgumentParser) -> None:
    """`--device`: where tensors and modules live (cpu, cuda); the default is cpu."""
    ap.add_argument("--device", type=torch.device, default=CPU, help="cpu (default) or cuda")


def device_name(device: torch.device) -> str:
    """The device for a title: `1 thread` on CPU, the GPU's name on CUDA."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "1 thread"


def sequence_args() -> argparse.Namespace:
    """`--batch`, `--time`, `--runs` of a sequence benchmark; torch on 1 thread, seeded."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--time", type=int, default=100)
    ap.add_argument("--runs", type=int, default=7)
    device_option(ap)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    return args


def report(title: str, rows: dict[str, float], base: str, against: str) -> None:
    """The title, then each variant's milliseconds and its ratio to `base`'s."""
    print(title)
    for name, ms in rows.items():
        print(f"  {name:<24} {ms:8.2f} ms   {ms / rows[base]:5.2f}x {against}")


def main() -> None:
    args = sequence_args()

    full = compile_graph(MODEL)
    no_fuse = compile_graph(MODEL, options=PassOptions(fuse=False))  # the loop, hoisted
    no_hoist = compile_graph(MODEL, options=PassOptions(hoist=False))
    dev = args.device
    p = {k: v.to(dev) for k, v in params_by_path(full).items()}
    x = torch.randn(args.batch, args.time, 80).to(dev)
    lens = torch.as_tensor(np.linspace(args.time, args.time // 2, args.batch).astype(np.int64)).to(dev)

    models = {
        name: module_with(g, p)
        for name, g in (("netc", full), ("netc, no fusion", no_fuse), ("netc, no hoisting", no_hoist))
    }
    lstm = native_lstm(p, 80, 256).to(dev)
    # netc's native `Lstm` op: RETURNN's gate order is netc's split order, so the loop's weights carry over
    native_g = compile_graph(NATIVE_MODEL)
    native = load_torch_module(native_g).Model()
    native.load_returnn_params(
        {
            "lstm/W": p["cell/ff_linear/W"].cpu().numpy(),
            "lstm/W_re": p["cell/rec_linear/W"].cpu().numpy(),
            "lstm/b": p["cell/ff_linear/b"].cpu().numpy(),
        }
    )
    native.eval().to(dev)
    cell_g = compile_graph(CELL_MODEL)
    cell = load_torch_module(cell_g).Model()
    cell.load_returnn_params(cell_params({k: v.cpu() for k, v in p.items()}, 256))
    cell.eval().to(dev)
    cell_loop = load_torch_module(compile_graph(CELL_MODEL, options=PassOptions(fuse=False))).Model()
    cell_loop.load_state_dict(cell.state_dict())
    cell_loop.eval().to(dev)

    def run_native():
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lens.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = lstm(packed)
        return torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=args.time)[0]

    with torch.no_grad():
        ref = models["netc"](x, time_lens=lens)["output"]
        mask = (torch.arange(args.time, device=dev)[None, :] < lens[:, None])[:, :, None]
        for name, out in (
            ("netc, no fusion", models["netc, no fusion"](x, time_lens=lens)["output"]),
            ("netc, no hoisting", models["netc, no hoisting"](x, time_lens=lens)["output"]),
            ("hand loop", hand_loop(p, x, lens)),
            ("netc Lstm op", native(x, time_lens=lens)["output"]),
            ("netc LstmCell", cell(x, time_lens=lens)["output"]),
            ("netc LstmCell, no fusion", cell_loop(x, time_lens=lens)["output"]),
            ("nn.LSTM", run_native()),
        ):
            diff = ((out - ref).abs() * mask).max().item()
            assert diff < tolerance(dev), (name, diff)
        rows = timed(
            {
                "netc": lambda: models["netc"](x, time_lens=lens),
                "netc, no fusion": lambda: models["netc, no fusion"](x, time_lens=lens),
                "netc, no hoisting": lambda: models["netc, no hoisting"](x, time_lens=lens),
                "hand loop": lambda: hand_loop(p, x, lens),
                "netc Lstm op": lambda: native(x, time_lens=lens),
                "netc LstmCell": lambda: cell(x, time_lens=lens),
                "netc LstmCell, no fusion": lambda: cell_loop(x, time_lens=lens),
                "nn.LSTM (native)": run_native,
            },
            args.runs,
            dev,
        )
    title = (
        f"LSTM forward, batch {args.batch}, {args.time} frames, 80 -> 256, {device_name(dev)}, "
        f"median of {args.runs} runs"
    )
    report(title, rows, "hand loop", "hand loop")


if __name__ == "__main__":
    main()
