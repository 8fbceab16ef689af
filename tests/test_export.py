"""`torch.export` of the emitted module: the batch dim dynamic, the loops unrolled at the example
inputs' padded length (a Python `for` over time is traced step by step)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import EXAMPLES
from torch.export import Dim, export

from netc.compiler import compile_graph
from netc.ir.interface import interface
from netc_runtime.backends import load_torch_module
from netc_runtime.verify import random_inputs, random_lengths


def _setup(name: str):
    g = compile_graph(str(EXAMPLES / name))
    torch.manual_seed(0)
    model = load_torch_module(g).Model().eval()
    rng = np.random.default_rng(0)
    lens = random_lengths(g, 3, 6, rng)
    args = {k: torch.as_tensor(v) for k, v in random_inputs(g, lens, rng).items()}
    args.update({interface(g).input_lens[d]: torch.as_tensor(v, dtype=torch.int64) for d, v in lens.items()})
    batch_axis = {i.name: i.annotated_dims.index("batch") for i in g.inputs}
    batch_axis.update({interface(g).input_lens[d]: 0 for d in lens})
    return model, args, batch_axis


@pytest.mark.parametrize("name", ["elman.py", "attention.py", "lstm.py", "bidirectional.py", "beam_search.py"])
def test_export_with_a_dynamic_batch(name):
    model, args, batch_axis = _setup(name)
    batch = Dim("batch", min=1, max=64)
    program = export(model, (), args, dynamic_shapes={k: {batch_axis[k]: batch} for k in args})
    exported = program.module()
    for rows in ([0, 1, 2, 1, 0], [2, 0]):  # other batch sizes, unequal lengths
        index = torch.tensor(rows)
        other = {k: v.index_select(batch_axis[k], index) for k, v in args.items()}
        with torch.no_grad():
            ref, out = model(**other), exported(**other)
        assert set(out) == set(ref)
        for k, r in ref.items():
            assert out[k].shape == r.shape and out[k].dtype == r.dtype, k
            assert float((out[k].double() - r.double()).abs().max()) <= 1e-6, k


def test_export_fixes_the_length_a_loop_runs_over():
    """What is left: a dynamic time dim is specialised by the loop over it (docs/targets.md)."""
    model, args, _ = _setup("elman.py")
    batch, time = Dim("batch", min=1, max=64), Dim("time", min=2, max=1000)
    with pytest.raises(Exception, match="specialized it to be a constant"):
        export(model, (), args, dynamic_shapes={"x": {0: batch, 1: time}, "time_lens": {0: batch}})
