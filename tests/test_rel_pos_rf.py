"""tests/models/ops_rel_pos_attention.py is RETURNN frontend's `RelPosSelfAttention` (sinusoidal
relative positions, linear position projection, per-head encoding, no position biases): the
same weights give rf's numbers (rf on its PyTorch backend, over a padded batch) on every valid
frame, through eager mode and the torch module."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import ROOT, returnn_frontend_torch

from netc.compiler import compile_graph
from netc_runtime.backends import run_eager, run_torch

MODEL = ROOT / "tests" / "models" / "ops_rel_pos_attention.py"
HEADS, HEAD_FEAT, FEAT = 2, 3, 6


def _rf_attention(x: np.ndarray, lens: np.ndarray, seed: int):
    """rf's RelPosSelfAttention on x [batch, time, feat]; its output and its weights, as netc params."""
    import returnn.frontend as rf
    from returnn.tensor import Dim, Tensor

    rf.set_random_seed(seed)
    batch_dim = Dim(len(lens), name="batch")
    time = Dim(Tensor("time_lens", [batch_dim], dtype="int32", raw_tensor=torch.tensor(lens, dtype=torch.int32)))
    feat = Dim(FEAT, name="feat")
    att = rf.RelPosSelfAttention(
        feat,
        feat,
        key_dim_total=feat,
        value_dim_total=feat,
        num_heads=HEADS,
        with_bias=True,
        with_linear_pos=True,
        with_pos_bias=False,
        learnable_pos_emb=False,
        separate_pos_emb_per_head=True,
        att_dropout=0.0,
    )
    src = Tensor("x", [batch_dim, time, feat], dtype="float32", raw_tensor=torch.tensor(x))
    out = att(src, axis=time).copy_transpose([batch_dim, time, feat]).raw_tensor.detach().numpy()

    def raw(p) -> np.ndarray:
        return p.raw_tensor.detach().numpy()

    # rf's qkv kernel is [feat, heads, (q, k, v), head_feat]; netc has one Linear each for q, k, v
    w = raw(att.qkv.weight).reshape(FEAT, HEADS, 3, HEAD_FEAT)
    b = raw(att.qkv.bias).reshape(HEADS, 3, HEAD_FEAT)
    params = {}
    for i, name in enumerate("qkv"):
        params[f"{name}/W"] = w[:, :, i].reshape(FEAT, FEAT)
        params[f"{name}/b"] = b[:, i].reshape(FEAT)
    params["pos/W"] = raw(att.linear_pos.weight)
    params["linear/W"] = raw(att.proj.weight)
    params["linear/b"] = raw(att.proj.bias)
    return out, params


@pytest.mark.parametrize("lens", [[7, 6, 2], [5, 1, 3]])
def test_rel_pos_attention_is_rfs(lens):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((len(lens), max(lens), FEAT)).astype(np.float32)
    lens = np.array(lens)
    with returnn_frontend_torch():
        want, params = _rf_attention(x, lens, 3)
    g = compile_graph(str(MODEL))
    assert {p.name for p in g.params} == set(params)
    inputs = {"x": x}
    for got in (run_eager(str(MODEL), g, inputs, {"time": lens}, params), run_torch(g, inputs, {"time": lens}, params)):
        out = got.outputs["output"]
        for b, n in enumerate(lens):
            np.testing.assert_allclose(out[b, :n], want[b, :n], atol=1e-5)
