"""examples/conformer_aed.py's front end is RETURNN frontend's `ConformerConvSubsample` with a
strided convolution (`strides=[(1, 1), (2, 1)]`, `pool_sizes=[(1, 2)]`) and the encoder's input
projection (on rf's PyTorch backend, `rf_use_mask`): rf's parameters, drawn at random, in
netc's eager mode, torch module and RETURNN config give rf's output on every valid frame.

The example's own code is compiled: its dims, `FrontEnd` and `reduce_max_pairs` (taken from the
file with `ast`) under a network that returns the front end's output.

rf (as TF) pads a "same" convolution with a time stride by the batch's padded length; netc pads
each sequence by its own length. So a batch agrees with rf's where every length is congruent to
the longest modulo the stride (2), and each sequence of any batch agrees with rf run on it alone.
"""

from __future__ import annotations

import ast

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, returnn_frontend_torch

from netc.compiler import compile_graph
from netc_runtime.backends import run_eager, run_returnn, run_torch

FEAT, CHANNELS, MODEL_DIM = 16, 4, 16
NETWORK = """

@network
def frontend_only(x: Tensor[batch, time, feat]):
    frontend = FrontEnd()
    return {"output": frontend(x)}
"""


def _frontend_model(tmp_path) -> str:
    src = (EXAMPLES / "conformer_aed.py").read_text()
    keep = []
    for node in ast.parse(src).body:
        named = getattr(node, "name", None) in ("FrontEnd", "reduce_max_pairs")
        if named or isinstance(node, ast.ImportFrom | ast.Assign):
            keep.append(ast.get_source_segment(src, node))
    path = tmp_path / "aed_frontend.py"
    path.write_text("\n\n".join(keep) + NETWORK)
    return str(path)


def _rf_frontend(x: np.ndarray, lens: np.ndarray, seed: int):
    """rf's ConformerConvSubsample and input projection on x [batch, time, feat]: the output
    [batch, enc_time, model], its lengths, and the parameters under netc's names."""
    import returnn.frontend as rf
    from returnn.config import Config, global_config_ctx
    from returnn.frontend.encoder.conformer import ConformerConvSubsample
    from returnn.tensor import Dim, Tensor

    rf.set_random_seed(seed)
    batch_dim = Dim(len(lens), name="batch")
    time = Dim(Tensor("time_lens", [batch_dim], dtype="int32", raw_tensor=torch.tensor(lens, dtype=torch.int32)))
    feat, model = Dim(FEAT, name="feat"), Dim(MODEL_DIM, name="model")
    with global_config_ctx(Config({"rf_use_mask": True})):
        sub = ConformerConvSubsample(
            feat,
            out_dims=[Dim(CHANNELS, name="chan1"), Dim(CHANNELS, name="chan2")],
            filter_sizes=[(3, 3), (3, 3)],
            strides=[(1, 1), (2, 1)],
            pool_sizes=[(1, 2)],
        )
        proj = rf.Linear(sub.out_dim, model, with_bias=False)
        rng = np.random.default_rng(seed)
        for p in [*(p for _, p in sub.named_parameters()), proj.weight]:
            p.raw_tensor = torch.tensor(rng.normal(0, 0.3, p.raw_tensor.shape), dtype=torch.float32)
        src = Tensor("x", [batch_dim, time, feat], dtype="float32", raw_tensor=torch.tensor(x))
        h, enc_time = sub(src, in_spatial_dim=time)
        out = proj(h).copy_transpose([batch_dim, enc_time, model]).raw_tensor.detach().numpy()
        enc_lens = enc_time.dyn_size_ext.raw_tensor.numpy()
    params = {}
    for i, conv in enumerate(sub.conv_layers):  # rf's filter [out, in, kt, kf]; netc's [kt, kf, in, out]
        params[f"frontend/conv{i + 1}/W"] = conv.filter.raw_tensor.detach().numpy().transpose(2, 3, 1, 0)
        params[f"frontend/conv{i + 1}/bias"] = conv.bias.raw_tensor.detach().numpy()
    params["frontend/proj/W"] = proj.weight.copy_transpose([sub.out_dim, model]).raw_tensor.detach().numpy()
    return out, enc_lens, params


def _netc(model: str, x: np.ndarray, lens: np.ndarray, params: dict) -> list[np.ndarray]:
    g = compile_graph(model)
    assert {p.name for p in g.params} == set(params)
    inputs, lengths = {"x": x}, {"time": lens}
    runs = [run_eager(model, g, inputs, lengths, params), run_torch(g, inputs, lengths, params)]
    runs.append(run_returnn(g, inputs, lengths, params))
    return [r.outputs["output"] for r in runs]


@pytest.mark.parametrize("lens", [[9, 7, 3, 1], [8, 6, 2, 4]])
def test_frontend_is_rfs_on_congruent_lengths(tmp_path, lens):
    """Lengths congruent to the longest modulo 2: rf's batch, frame by frame."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((len(lens), max(lens), FEAT)).astype(np.float32)
    lens = np.array(lens)
    with returnn_frontend_torch():
        want, enc_lens, params = _rf_frontend(x, lens, 3)
    assert list(enc_lens) == [(n + 1) // 2 for n in lens]
    for out in _netc(_frontend_model(tmp_path), x, lens, params):
        for b, n in enumerate(enc_lens):
            np.testing.assert_allclose(out[b, :n], want[b, :n], atol=1e-5)


def test_frontend_is_rfs_per_sequence(tmp_path):
    """Lengths of both parities: each sequence of netc's batch is what rf gives it alone."""
    lens = np.array([9, 6, 5, 2, 1])
    rng = np.random.default_rng(4)
    x = rng.standard_normal((len(lens), max(lens), FEAT)).astype(np.float32)
    with returnn_frontend_torch():
        alone = [_rf_frontend(x[b : b + 1, :n], np.array([n]), 4) for b, n in enumerate(lens)]
    params = alone[0][2]
    outs = _netc(_frontend_model(tmp_path), x, lens, params)
    for b, (want, (m,), _) in enumerate(alone):
        assert m == (lens[b] + 1) // 2
        for out in outs:
            np.testing.assert_allclose(out[b, :m], want[0], atol=1e-5)
