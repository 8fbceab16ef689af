"""`netc verify --same-as OTHER`: two networks of one file compute the same (a streaming model's
chunk-by-chunk network against its whole-sequence one with the equivalent mask).

Both run on one random padded batch (the first network's inputs and lengths) with one parameter
set: the first network's, given to the other by module path and role (its RETURNN variable names
may differ by the loops its modules are called in). On every backend, each output both return
(the losses too) must agree on the valid frames within SAME_TOLERANCE."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netc.ir.model import Graph
from netc.progress import step
from netc_runtime.backends import BACKEND_NAMES, Result, run_backend, valid_mask
from netc_runtime.failures import failing_as
from netc_runtime.verify import abs_diff, random_inputs, random_lengths, random_params

SAME_TOLERANCE = 1e-5


@dataclass(frozen=True)
class SameComparison:
    output: str
    backend: str
    max_abs_diff: float
    valid_values: int
    scale: float  # 1 for values; max(1, |loss|) for a loss, as `verify`'s

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= SAME_TOLERANCE * self.scale


def shared_params(a: Graph, b: Graph, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`a`'s parameters under `b`'s RETURNN names (matched by module path and role)."""
    by_path = {(p.path, p.role): params[p.name] for p in a.params}
    missing = [f"{p.path}.{p.role}" for p in b.params if (p.path, p.role) not in by_path]
    if missing:
        raise ValueError(f"{b.network} has parameters {a.network} lacks: {', '.join(missing[:5])}")
    out = {}
    for p in b.params:
        v = by_path[(p.path, p.role)]
        want = tuple(next(d.size for d in b.dims if d.name == n) for n in p.dims)
        if v.shape != want:
            raise ValueError(
                f"parameter {p.path}.{p.role}: {a.network}'s is {list(v.shape)}, {b.network}'s {list(want)}"
            )
        out[p.name] = v
    return out


def verify_same(
    model_path: str, a: Graph, b: Graph, backends: tuple[str, ...], seed: int, batch: int, max_len: int
) -> tuple[list[SameComparison], dict[str, np.ndarray]]:
    """Both networks on each backend; their common outputs compared (see the module doc)."""
    rng = np.random.default_rng(seed)
    lens = random_lengths(a, batch, max_len, rng)
    inputs = random_inputs(a, lens, rng)
    missing = [i.name for i in b.inputs if i.name not in inputs]
    if missing:
        raise ValueError(f"{b.network} takes inputs {a.network} does not: {', '.join(missing)}")
    params_a = random_params(a, rng)
    params_b = shared_params(a, b, params_a)
    inputs_b = {i.name: inputs[i.name] for i in b.inputs}
    losses = {loss.name for loss in a.losses}
    comps = []
    for backend in backends:
        name = BACKEND_NAMES.get(backend, backend)
        step(f"verify: running {name}: {a.network}, then {b.network}")
        with failing_as(backend):
            ra = run_backend(backend, model_path, inputs, lens, params_a, a)
            rb = run_backend(backend, model_path, inputs_b, lens, params_b, b)
        comps += _compare(a, ra, rb, backend, losses)
    if not comps:
        raise ValueError(f"{a.network} and {b.network} return no output of the same name to compare")
    return comps, lens


def _compare(g: Graph, ra: Result, rb: Result, backend: str, losses: set[str]) -> list[SameComparison]:
    out = []
    for name, dims in ra.dims.items():
        if name not in rb.outputs:
            continue
        if rb.dims[name] != dims:
            raise ValueError(f"output {name!r}: dims {dims} in one network, {rb.dims[name]} in the other")
        x, y = np.asarray(ra.outputs[name], np.float64), np.asarray(rb.outputs[name], np.float64)
        shape = tuple(min(p, q) for p, q in zip(x.shape, y.shape))
        for ax, d in enumerate(dims):
            if d in ra.lens[name] and shape[ax] < int(np.max(ra.lens[name][d], initial=0)):
                raise ValueError(f"output {name!r} on {backend}: shorter than its lengths along {d}")
        cut = tuple(slice(0, n) for n in shape)
        mask = valid_mask(dims, ra.lens[name], g, shape)
        diff = np.where(mask, abs_diff(x[cut], y[cut]), 0.0)
        worst = float("inf") if (np.isnan(y[cut]) & mask).any() else float(diff.max(initial=0.0))
        scale = max(1.0, float(np.abs(x).max(initial=0.0))) if name in losses else 1.0
        out.append(SameComparison(name, backend, worst, int(mask.sum()), scale))
    return out
