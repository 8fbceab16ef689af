"""The oracle: eager = torch = RETURNN on one padded batch with unequal sequence lengths."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netc.ir.interface import input_dyn_dims
from netc.ir.model import Graph
from netc.ir.search import search_plan
from netc_runtime.backends import BACKENDS, Result, run_backend, valid_mask
from netc_runtime.failures import Mismatch, failing_as

TOLERANCE = 1e-4


def random_lengths(g: Graph, batch: int, max_len: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Unequal lengths per dynamic input dim; the first sequence is the longest."""
    lens = {}
    dyn = input_dyn_dims(g)
    for k, d in enumerate(dyn):
        top = max_len + k
        ls = [top] + sorted(rng.integers(1, top, size=batch - 1).tolist(), reverse=True)
        lens[d] = np.asarray(ls, dtype=np.int64)
    return lens


def random_inputs(g: Graph, lens: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random inputs whose padded frames hold garbage, so that any leak of padding shows."""
    sizes = {d.name: d.size for d in g.dims}
    out = {}
    for inp in g.inputs:
        shape = [
            len(next(iter(lens.values()))) if d == "batch" else int(lens[d].max()) if sizes[d] is None else sizes[d]
            for d in inp.annotated_dims
            if d != inp.value.sparse_dim
        ]
        if inp.value.sparse_dim:
            x = rng.integers(0, sizes[inp.value.sparse_dim], size=shape).astype(np.int32)
        else:
            x = rng.standard_normal(shape).astype(np.float32)
            valid = valid_mask([d for d in inp.annotated_dims if d != inp.value.sparse_dim], lens, g, shape)
            x = np.where(valid, x, np.float32(3.0) + rng.standard_normal(shape).astype(np.float32))
        out[inp.name] = x
    return out


def random_params(g: Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Glorot-uniform weights; biases small but non-zero, so that a dropped bias shows."""
    sizes = {d.name: d.size for d in g.dims}
    params = {}
    for p in g.params:
        shape = [sizes[d] for d in p.dims]
        if len(shape) >= 2:
            limit = np.sqrt(6.0 / (shape[0] + shape[-1]))
            params[p.name] = rng.uniform(-limit, limit, size=shape).astype(np.float32)
        else:
            params[p.name] = (0.1 * rng.standard_normal(shape)).astype(np.float32)
    return params


@dataclass
class Comparison:
    output: str
    backend: str
    max_abs_diff: float
    valid_frames: int


def compare(g: Graph, ref: Result, other: Result, backend: str) -> list[Comparison]:
    """Every result of `ref` (outputs and losses, or what a search returns) against `other`'s."""
    out = []
    for name, dims in ref.dims.items():
        if name not in other.outputs:
            raise Mismatch(f"{backend}: gave no {name!r}, eager did")
        a, b = np.asarray(ref.outputs[name]), np.asarray(other.outputs[name])
        if other.dims[name] != dims:
            raise Mismatch(f"{backend}: output {name} has dims {other.dims[name]}, eager {dims}")
        for d, ls in ref.lens[name].items():
            if not np.array_equal(np.asarray(ls), np.asarray(other.lens[name][d])):
                raise Mismatch(f"{backend}: output {name} lengths of {d} differ: {other.lens[name][d]} vs {ls}")
        shape = tuple(min(x, y) for x, y in zip(a.shape, b.shape))
        for ax, d in enumerate(dims):
            if d in ref.lens[name] and shape[ax] < int(np.max(ref.lens[name][d], initial=0)):
                raise Mismatch(f"{backend}: output {name} is shorter than its lengths along {d}")
        a = a[tuple(slice(0, n) for n in shape)]
        b = b[tuple(slice(0, n) for n in shape)]
        mask = valid_mask(dims, ref.lens[name], g, shape)
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        diff = np.where(mask, diff, 0.0)
        bad = np.isnan(b) & mask
        worst = float("inf") if bad.any() else float(diff.max(initial=0.0))
        out.append(Comparison(name, backend, worst, int(mask.sum())))
    return out


def verify(
    model_path: str,
    g: Graph,
    backends=BACKENDS,
    seed: int = 0,
    batch: int = 3,
    max_len: int = 7,
    search: bool = False,
    params: dict[str, np.ndarray] | None = None,
):
    """The oracle on one random padded batch: eager against every other backend. `search=True`
    compares beam searches (the best labels, their lengths and scores). A backend that fails
    raises a BackendError naming it; results unlike eager's in kind, a Mismatch."""
    if search and search_plan(g) is None:
        raise ValueError(f"{g.network} has no `choice`: there is nothing to search")
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, batch, max_len, rng)
    inputs = random_inputs(g, lens, rng)
    params = {**random_params(g, rng), **(params or {})}
    results = {}
    for b in backends:
        with failing_as(b):
            results[b] = run_backend(b, model_path, inputs, lens, params, g, search=search)
    ref = results[backends[0]]
    comps = []
    for b in backends[1:]:
        comps += compare(g, ref, results[b], b)
    return comps, lens
