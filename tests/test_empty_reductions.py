"""Reductions over a dim along which a sequence has no frame (a valid convolution longer than
the sequence): 0 for that sequence on every target (eager, torch, RETURNN), for sum, mean,
max and logsumexp, over that dim alone or with a static one; torch's gradients stay finite."""

from __future__ import annotations

import numpy as np
import torch

from netc.compiler import compile_graph
from netc_runtime.backends import load_torch_module, run_eager, run_returnn, run_torch
from netc_runtime.verify import random_inputs, random_params

SRC = """\
import netc as nc
from netc import batch
time = nc.Dim("time")
feat = nc.Dim("feat", 3)
model = nc.Dim("model", 2)
ctime = nc.Dim("ctime")


@nc.network
def net(x: nc.Tensor[batch, time, feat]):
    c = nc.Conv1d(model, filter_size=4, padding="valid")(x, axis=time, out_axis=ctime)
    return {
        "sum": nc.reduce_sum(c, axis=ctime),
        "mean": nc.reduce_mean(c, axis=ctime),
        "max": nc.reduce_max(c, axis=ctime),
        "lse": nc.logsumexp(c, axis=ctime),
        "max_both": nc.reduce_max(c, axis=[ctime, model]),
        "mean_both": nc.reduce_mean(c, axis=[model, ctime]),
    }
"""
OUTS = ("sum", "mean", "max", "lse", "max_both", "mean_both")


def test_reductions_over_no_frame_are_zero_on_every_target(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text(SRC)
    g = compile_graph(str(path))
    rng = np.random.default_rng(4)
    lens = {"time": np.array([7, 3, 5])}  # conv lengths 4, 0, 2
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    got = {
        "eager": run_eager(str(path), g, inputs, lens, params),
        "torch": run_torch(g, inputs, lens, params),
        "returnn": run_returnn(g, inputs, lens, params),
    }
    for name in OUTS:
        want = got["torch"].outputs[name]
        assert np.isfinite(want).all(), (name, want)
        assert not want[1].any(), (name, want)  # the sequence with no frame
        assert want[0].any() and want[2].any(), (name, want)
        for target, r in got.items():
            np.testing.assert_allclose(r.outputs[name], want, atol=1e-5, err_msg=f"{name}: {target}")

    model = load_torch_module(g).Model()
    model.load_returnn_params(params)
    out = model(
        x=torch.as_tensor(inputs["x"], dtype=torch.float32).requires_grad_(), time_lens=torch.tensor(lens["time"])
    )
    sum(out[k].sum() for k in OUTS).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
