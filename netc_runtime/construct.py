"""`netc check --construct`: does an emitted file really run? The RETURNN config is loaded by
RETURNN and its network constructed and run; the torch module is imported and run forward; the
returnn-torch config's train_step and forward_step run in RETURNN's PyTorch backend; all on one
small padded batch with unequal lengths and random parameters."""

from __future__ import annotations

import numpy as np

from netc.ir.model import Graph
from netc.ir.search import search_plan
from netc_runtime.backends import run_returnn, run_torch
from netc_runtime.returnn_torch import run_returnn_torch
from netc_runtime.verify import random_inputs, random_lengths, random_params


def construct(g: Graph, target: str, text: str, seed: int = 0) -> None:
    """Raises whatever RETURNN or torch raises when `text` (the emitted `target` file) fails."""
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, batch=2, max_len=4, rng=rng)
    inputs = random_inputs(g, lens, rng)
    params = random_params(g, rng)
    if target == "returnn":
        result = run_returnn(g, inputs, lens, params, config_text=text)
    elif target == "returnn-torch":
        result = run_returnn_torch(g, inputs, lens, params, config_text=text)
    else:
        result = run_torch(g, inputs, lens, params, module_text=text)
    expected = [*g.outputs, *g.losses]
    if target == "returnn-torch" and search_plan(g) is not None:  # its forward_step searches
        expected = [o for o in g.outputs if o.name in search_plan(g).outputs] + list(g.losses)
    missing = [o.name for o in expected if o.name not in result.outputs]
    if missing:
        raise RuntimeError(f"no output {', '.join(missing)}")
