"""Every example and test model's emitted torch module on CUDA against the same module on the CPU.

    python bench/check_cuda.py [--device cuda] [--models examples/x.py ...]

Not a benchmark: the check that the emitted modules run on a GPU (they create every tensor on
their inputs' device) and compute what they compute on the CPU. Per model: one random padded
batch with unequal lengths and random parameters, the module's outputs and losses (and, for a
model with `choice`, its beam search) on both devices, compared on valid frames as `netc verify`
compares backends (<= 1e-4), and the gradients of the summed losses. TF32 is switched off (cuDNN convolutions use it by default), so the
GPU computes in float32 as the CPU does. Prints one line per model and a summary; exits 1 if any
model differs or fails.
"""

from __future__ import annotations

import argparse
import ast
import sys
import traceback
from pathlib import Path

import numpy as np
import torch

from netc.compiler import compile_graph
from netc.ir.model import Loop
from netc.ir.search import search_plan
from netc.naming import lens_name
from netc.parser.source import network_functions
from netc_runtime.backends import load_torch_module, run_torch
from netc_runtime.verify import compare, random_inputs, random_lengths, random_params

ROOT = Path(__file__).resolve().parent.parent


def network_names(path: Path) -> list[str]:
    """The @network functions of a model file, in source order."""
    return [fn.name for fn in network_functions(ast.parse(path.read_text(encoding="utf-8")))]


def first_network(path: Path) -> str | None:
    """The first @network function of a file with several (the training network), else None."""
    names = network_names(path)
    return names[0] if len(names) > 1 else None


def op_names(nodes) -> set[str]:
    """The ops of a graph's body, its loops' bodies included."""
    return {name for n in nodes for name in (op_names(n.body) if isinstance(n, Loop) else {n.op})}


def gradients(g, inputs, lens, params, device: str) -> dict[str, np.ndarray]:
    """The gradient of the sum of the module's losses by parameter, in training mode (a fused
    LSTM's cuDNN backward needs it, as nn.LSTM's does) unless the model has dropout (whose masks
    the two devices draw differently: eval mode, without cuDNN)."""
    model = load_torch_module(g).Model()
    model.load_returnn_params(params)
    training = "dropout" not in op_names(g.body)
    model.train(training).to(device)
    api_lens = {lens_name(d): torch.as_tensor(v, device=device) for d, v in lens.items()}
    # cuDNN's RNN back-propagates only what a training-mode forward kept (as for nn.LSTM): in eval
    # mode torch's own CUDA kernels run instead
    with torch.backends.cudnn.flags(enabled=training):
        outs = model(**{k: torch.as_tensor(v, device=device) for k, v in inputs.items()}, **api_lens)
        sum(outs[name] for name in model.losses).backward()
    return {k: p.grad.cpu().numpy() for k, p in model.named_parameters() if p.grad is not None}


def check(path: Path, device: str) -> str:
    """One model on `device` against the CPU: a line saying what was compared, the largest difference."""
    g = compile_graph(str(path), network=first_network(path))
    rng = np.random.default_rng(0)
    lens = random_lengths(g, 3, 7, rng)
    inputs = random_inputs(g, lens, rng)
    params = random_params(g, rng)
    said = []
    for search in (False, True) if search_plan(g) else (False,):
        cpu = run_torch(g, inputs, lens, params, search=search)
        gpu = run_torch(g, inputs, lens, params, search=search, device=device)
        comps = compare(g, cpu, gpu, device)
        worst = max(comps, key=lambda c: c.max_abs_diff / c.scale)
        bad = [c for c in comps if not c.ok]
        if bad:
            raise AssertionError(", ".join(f"{c.name}: max|Δ| = {c.max_abs_diff:.3e}" for c in bad))
        said.append(f"{'search' if search else 'forward'} {len(comps)} results, max|Δ| = {worst.max_abs_diff:.1e}")
    if g.losses:
        cpu, gpu = gradients(g, inputs, lens, params, "cpu"), gradients(g, inputs, lens, params, device)
        assert cpu.keys() == gpu.keys(), sorted(cpu.keys() ^ gpu.keys())
        worst = max((np.abs(cpu[k] - gpu[k]).max() / max(1.0, np.abs(cpu[k]).max()) for k in cpu), default=0.0)
        assert worst <= 1e-4, f"gradients: max relative |Δ| = {worst:.3e}"
        said.append(f"gradients of {len(cpu)} parameters, max rel.|Δ| = {worst:.1e}")
    return "; ".join(said)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", nargs="*", type=Path)
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    models = args.models or sorted((ROOT / "examples").glob("*.py")) + sorted((ROOT / "tests" / "models").glob("*.py"))
    failed = []
    for path in models:
        try:
            print(f"ok    {path.name}: {check(path, args.device)}", flush=True)
        except Exception as e:  # noqa: BLE001 - every model's outcome is reported, then the summary
            failed.append(path.name)
            print(f"FAIL  {path.name}: {type(e).__name__}: {e}".splitlines()[0], flush=True)
            traceback.print_exc(limit=3, file=sys.stdout)
    print(f"{len(models) - len(failed)} of {len(models)} models agree on {args.device} and cpu")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
