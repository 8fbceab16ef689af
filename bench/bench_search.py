"""Beam search of the emitted torch module vs RETURNN's search of the emitted config, side by side.

    .venv/bin/python bench/bench_search.py [--model M] [--batch 16] [--enc 150] [--runs 5] [--device cpu|cuda] [--no-returnn]

The decoder is `search_model.py` by default (attention over the encoder, D512, vocabulary 1000,
beam 12, at most one step per encoder frame, ending at label 0), or the first network with `choice`
in any model file (`--model examples/conformer_aed.py`: a Transformer decoder; `examples/conformer_transducer.py`:
a transducer), at its own dims and beam. Both search from the same parameters (for the default
model the recurrent weights are scaled down: at D512 random weights make the recursion chaotic,
and the two engines' rounding would then pick other hypotheses) and the same random inputs, the
dynamic input dims' lengths spread from `--enc` frames down to half of it. Before timing, the best
hypotheses (labels and lengths) are checked identical and their scores equal. A search:
- torch: `model(x, enc_time_lens=..., search=True)` under `torch.no_grad()`, on 1 thread (CPU) or
  the GPU (`--device cuda`, synchronised)
- RETURNN: the config's `search_network` built by RETURNN with `search_flag` (what its search task
  builds), one `session.run` per search, TF on 1 intra-op and 1 inter-op thread
Medians of interleaved runs after a warm-up, milliseconds and sequences per second.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

import numpy as np
import torch
from bench_torch import device_name, device_option, report, timed
from check_cuda import network_names

from netc.compiler import compile_graph
from netc.ir.model import Op
from netc.ir.search import SCORES, search_plan
from netc.naming import lens_name
from netc_runtime.backends import load_torch_module, returnn_result, returnn_session
from netc_runtime.verify import random_inputs, random_lengths, random_params

MODEL = Path(__file__).with_name("search_model.py")


def search_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=MODEL, help="a model with `choice` (default: search_model.py)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--enc", type=int, default=150)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-returnn", action="store_true", help="leave RETURNN (TensorFlow) out")
    device_option(ap)
    args = ap.parse_args()
    torch.set_num_threads(1)
    return args


def bench_params(g, damp: bool) -> dict[str, np.ndarray]:
    """Seeded random parameters; with `damp`, search_model.py's recursion damped (see above)."""
    params = random_params(g, np.random.default_rng(0))
    for q in g.params if damp else ():
        if f"{q.path}/{q.role}" in ("s_2/W", "att/W"):
            params[q.name] = params[q.name] * 0.25
    return params


def same_hypotheses(ours: dict[str, np.ndarray], theirs, plan) -> None:
    """The torch module's best hypotheses are RETURNN's: the same lengths, labels (and other stacked
    outputs, to 1e-4) on valid frames, and scores (to float32 rounding)."""
    made = ours[plan.lens]
    assert (made == theirs.lens[plan.outputs[0]][plan.loop.axis]).all(), (made, theirs.lens)
    for name in plan.outputs:
        n = made.max()  # the buffers' padding beyond the longest hypothesis may differ
        got, want = ours[name][:, :n], theirs.outputs[name][:, :n]
        mask = (np.arange(n)[None, :] < made[:, None]).reshape(got.shape[:2] + (1,) * (got.ndim - 2))
        assert got.shape == want.shape, (name, got.shape, want.shape)
        assert np.abs(np.where(mask, got, 0) - want).max(initial=0) <= 1e-4, (name, got, want)  # labels: exact
    assert np.abs(ours[SCORES] - theirs.outputs[SCORES]).max() <= 1e-4 * np.abs(theirs.outputs[SCORES]).max()


def main() -> None:
    args = search_args()
    dev = args.device
    g = next(g for name in network_names(args.model) if search_plan(g := compile_graph(str(args.model), network=name)))
    plan = search_plan(g)
    beam = next(n.attrs["beam"] for n in plan.loop.body if isinstance(n, Op) and n.op == "choice")
    params = bench_params(g, args.model == MODEL)
    rng = np.random.default_rng(1)
    lens = {d: np.linspace(args.enc, args.enc // 2, args.batch).astype(np.int64) for d in plan.input_dims}
    every = {**random_lengths(g, args.batch, args.enc, rng), **lens}  # the targets' too, to draw the inputs
    inputs = {k: v for k, v in random_inputs(g, every, rng).items() if k in plan.inputs}

    model = load_torch_module(g).Model()
    model.load_returnn_params(params)
    model.eval().to(dev)
    args_torch = {k: torch.as_tensor(v, device=dev) for k, v in inputs.items()}
    args_torch.update({lens_name(d): torch.as_tensor(v, device=dev) for d, v in lens.items()})

    scripted = torch.jit.script(model)

    def torch_search(m=model):
        with torch.no_grad():
            return m(**args_torch, search=True)

    ours = {k: v.cpu().numpy() for k, v in torch_search().items()}
    lengths = ours[plan.lens]
    steps = {"netc torch module": torch_search, "netc, TorchScript": lambda: torch_search(scripted)}
    script_out = {k: v.cpu().numpy() for k, v in steps["netc, TorchScript"]().items()}
    for k, v in ours.items():  # the same hypotheses; scores to float32 rounding (TorchScript fuses ops)
        same = (
            np.allclose(script_out[k], v, rtol=1e-5, atol=1e-4) if v.dtype.kind == "f" else (script_out[k] == v).all()
        )
        assert same, f"the scripted module's {k} differs"
    with_returnn = not args.no_returnn
    with contextlib.ExitStack() as stack:
        if with_returnn:
            import tensorflow as tf

            threads = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
            built = stack.enter_context(returnn_session(g, inputs, lens, params, search=True, session_config=threads))
            steps["RETURNN (TensorFlow)"] = lambda: built.session.run(built.fetch, feed_dict=built.feed)
            theirs = returnn_result(g, steps["RETURNN (TensorFlow)"](), built.dims, built.lens)
            same_hypotheses(ours, theirs, plan)
        rows = timed(steps, args.runs, dev)
    print(
        f"best hypotheses: lengths {lengths.min()}..{lengths.max()} (mean {lengths.mean():.1f}) labels"
        + (", identical in both; scores equal" if with_returnn else "")
    )
    print("sequences per second: " + ", ".join(f"{n} {1000 * args.batch / ms:.1f}" for n, ms in rows.items()))
    title = (
        f"beam search of {args.model.name} (beam {beam}), batch {args.batch}, {args.enc} input frames "
        f"(down to {args.enc // 2}), {device_name(dev)}, median of {args.runs} runs"
    )
    base = "RETURNN (TensorFlow)" if with_returnn else "netc torch module"
    report(title, rows, base, "RETURNN" if with_returnn else "netc")


if __name__ == "__main__":
    main()
