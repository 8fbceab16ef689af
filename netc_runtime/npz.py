"""`netc run`: npz in, npz out.

Input keys: `in:<input>` (batch-major, annotation order), `len:<dim>`, `param:<RETURNN name>`.
Output keys: `out:<output>`, `dims:<output>` (dim names, `batch` for the batch dim),
`outlen:<output>:<dim>` for each dynamic dim of an output.
"""

from __future__ import annotations

import numpy as np

from netc.ir.interface import input_dyn_dims
from netc.ir.model import Graph
from netc.ir.search import search_plan
from netc_runtime.backends import run_backend
from netc_runtime.failures import failing_as
from netc_runtime.verify import random_params


def _params(g: Graph, params_path: str | None, inputs_npz, seed: int) -> dict[str, np.ndarray]:
    params = random_params(g, np.random.default_rng(seed))
    known = set(params)
    for src in (inputs_npz, np.load(params_path) if params_path else None):
        if src is None:
            continue
        for k in src.files:
            if k.startswith("param:"):
                name = k[len("param:") :]
                if name not in known:
                    raise KeyError(f"unknown parameter {name!r} (known: {', '.join(sorted(known))})")
                params[name] = src[k]
    return params


def run_npz(
    model: str,
    g: Graph,
    backend: str,
    inputs_path: str,
    params_path: str | None,
    output: str,
    seed: int,
    search: bool = False,
) -> None:
    data = np.load(inputs_path)
    plan = search_plan(g) if search else None
    if search and plan is None:
        raise ValueError(f"{g.network} has no `choice`: there is nothing to search")
    inputs, lens = {}, {}
    for inp in g.inputs:
        key = f"in:{inp.name}"
        if plan is not None and inp.name in plan.targets:
            continue  # a search has no targets
        if key not in data.files:
            raise KeyError(f"{inputs_path} has no {key!r}")
        inputs[inp.name] = data[key]
    for d in plan.input_dims if plan else input_dyn_dims(g):
        key = f"len:{d}"
        if key not in data.files:
            raise KeyError(f"{inputs_path} has no {key!r}")
        lens[d] = data[key].astype(np.int64)
    params = _params(g, params_path, data, seed)
    with failing_as(backend):
        res = run_backend(backend, model, inputs, lens, params, g, search=search)
    out = {}
    for name, value in res.outputs.items():
        out[f"out:{name}"] = value
        out[f"dims:{name}"] = np.asarray(res.dims[name])
        for d, ls in res.lens[name].items():
            out[f"outlen:{name}:{d}"] = np.asarray(ls, dtype=np.int64)
    np.savez(output, **out)
