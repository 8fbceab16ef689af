"""Forward speed of a plain-ops GRU loop compiled by netc vs `nn.GRU`, side by side in one run.

    .venv/bin/python bench/bench_gru.py [--batch 16] [--time 100] [--runs 7] [--device cpu|cuda]

`gru_model.py` (80 -> 256, torch's GRU form) on the same inputs and weights, outputs checked
equal on valid frames first:
- netc: the emitted module (fused: one torch.gru call on the packed sequence)
- netc, no fusion: the loop after hoisting (input projection once, one step of plain ops per frame)
- netc GruCell: the same GRU as a loop over netc's one-step `GruCell` (`gru_cell_model.py`),
  fused, and without fusion (one `torch.gru_cell` per frame)
- nn.GRU: torch's native GRU on a packed sequence (a fused kernel; the bar to reach)
Medians of interleaved runs after a warm-up, 1 thread, milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from bench_torch import device_name, module_with, params_by_path, report, sequence_args, timed, tolerance

from netc.compiler import compile_graph
from netc.passes.pipeline import PassOptions
from netc_runtime.backends import load_torch_module

MODEL = str(Path(__file__).with_name("gru_model.py"))
CELL_MODEL = str(Path(__file__).with_name("gru_cell_model.py"))


def native_gru(p, n_in: int, n: int) -> torch.nn.GRU:
    """torch.nn.GRU with the loop's weights (gate blocks r, z, n in both)."""
    gru = torch.nn.GRU(n_in, n, batch_first=True)
    with torch.no_grad():
        gru.weight_ih_l0.copy_(p["cell/ff_linear/W"].T)
        gru.weight_hh_l0.copy_(p["cell/rec_linear/W"].T)
        gru.bias_ih_l0.copy_(p["cell/ff_linear/b"])
        gru.bias_hh_l0.copy_(p["cell/rec_linear/b"])
    return gru


def main() -> None:
    args = sequence_args()

    dev = args.device
    g = compile_graph(MODEL)
    p = {k: v.to(dev) for k, v in params_by_path(g).items()}
    model = module_with(g, p)
    loop = load_torch_module(compile_graph(MODEL, options=PassOptions(fuse=False))).Model()  # not fused
    loop.load_state_dict(model.state_dict())
    loop.eval().to(dev)
    gru = native_gru(p, 80, 256).to(dev)
    cells = {}
    for name, fuse in (("netc GruCell", True), ("netc GruCell, no fusion", False)):
        cell_g = compile_graph(CELL_MODEL, options=PassOptions(fuse=fuse))
        cells[name] = load_torch_module(cell_g).Model()
        # the cell's parameters are the plain-ops GRU's: the same layout (kernels [in, 3*out], blocks r, z, n)
        roles = {"ih/W": "ff_linear/W", "ih/b": "ff_linear/b", "hh/W": "rec_linear/W", "hh/b": "rec_linear/b"}
        cells[name].load_returnn_params({q.name: p[f"cell/{roles[q.role]}"].cpu().numpy() for q in cell_g.params})
        cells[name].eval().to(dev)
    x = torch.randn(args.batch, args.time, 80).to(dev)
    lens = torch.as_tensor(np.linspace(args.time, args.time // 2, args.batch).astype(np.int64)).to(dev)

    def run_native():
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lens.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = gru(packed)
        return torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=args.time)[0]

    variants = {
        "netc": lambda: model(x, time_lens=lens)["output"],
        "netc, no fusion": lambda: loop(x, time_lens=lens)["output"],
        **{name: (lambda m=m: m(x, time_lens=lens)["output"]) for name, m in cells.items()},
        "nn.GRU (native)": run_native,
    }
    with torch.no_grad():
        mask = (torch.arange(args.time, device=dev)[None, :] < lens[:, None])[:, :, None]
        for name in ("netc, no fusion", *cells, "nn.GRU (native)"):
            diff = ((variants["netc"]() - variants[name]()).abs() * mask).max().item()
            assert diff < tolerance(dev), (name, diff)
        rows = timed(variants, args.runs, dev)
    title = (
        f"GRU forward, batch {args.batch}, {args.time} frames, 80 -> 256, {device_name(dev)}, "
        f"median of {args.runs} runs"
    )
    report(title, rows, "nn.GRU (native)", "nn.GRU")


if __name__ == "__main__":
    main()
