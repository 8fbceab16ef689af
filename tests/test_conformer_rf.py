"""examples/conformer_ctc.py's encoder is RETURNN frontend's `rf.ConformerEncoder` (on rf's
PyTorch backend): rf's parameters, all drawn at random (also the batch norm's running
statistics, layer norm scales and biases), loaded into netc's eager mode and torch module give
rf's encoder output on every valid frame of a padded batch with unequal lengths.

rf is configured as the example is written: a `ConformerConvSubsample` front end with 3x3
convolutions, "same" padding and a 2x2 max pool after the first; the default
`RelPosSelfAttention` (with its position biases u and v: netc's `Bias`); no dropout; masked convolutions and pools (`rf_use_mask`, the default from behavior version 23:
padded frames are zeros before a convolution and never win a max pool)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, returnn_frontend_torch

from netc.compiler import compile_graph
from netc_runtime.backends import run_eager, run_torch

MODEL = EXAMPLES / "conformer_ctc.py"
FEAT, MODEL_DIM, HEADS, HEAD = 16, 16, 2, 8
CHANNELS, KERNEL, LAYERS = 4, 7, 2


def _rf_encoder(x: np.ndarray, lens: np.ndarray, seed: int):
    """rf's ConformerEncoder on x [batch, time, feat]: its output [batch, enc_time, model], its
    lengths, and its parameters under netc's names."""
    import returnn.frontend as rf
    from returnn.config import Config, global_config_ctx
    from returnn.frontend.encoder.conformer import ConformerConvSubsample, ConformerEncoder
    from returnn.tensor import Dim, Tensor

    rf.set_random_seed(seed)
    batch_dim = Dim(len(lens), name="batch")
    time = Dim(Tensor("time_lens", [batch_dim], dtype="int32", raw_tensor=torch.tensor(lens, dtype=torch.int32)))
    feat, model = Dim(FEAT, name="feat"), Dim(MODEL_DIM, name="model")
    with global_config_ctx(Config({"rf_use_mask": True})):
        enc = ConformerEncoder(
            feat,
            model,
            num_layers=LAYERS,
            input_layer=ConformerConvSubsample(
                feat,
                out_dims=[Dim(CHANNELS, name="chan1"), Dim(CHANNELS, name="chan2")],
                filter_sizes=[(3, 3), (3, 3)],
                pool_sizes=[(2, 2)],
            ),
            ff_dim=Dim(4 * MODEL_DIM, name="ff"),
            dropout=0.0,
            att_dropout=0.0,
            input_dropout=0.0,
            conv_kernel_size=KERNEL,
            num_heads=HEADS,
        )
        rng = np.random.default_rng(seed)
        for name, p in enc.named_parameters():
            v = (
                rng.uniform(0.5, 1.5, p.raw_tensor.shape)
                if "variance" in name
                else rng.normal(0, 0.3, p.raw_tensor.shape)
            )
            p.raw_tensor = torch.tensor(v, dtype=torch.float32)
        src = Tensor("x", [batch_dim, time, feat], dtype="float32", raw_tensor=torch.tensor(x))
        out, enc_time = enc(src, in_spatial_dim=time)
        out = out.copy_transpose([batch_dim, enc_time, model]).raw_tensor.detach().numpy()
        enc_lens = enc_time.dyn_size_ext.raw_tensor.numpy()

    def raw(p, *dims) -> np.ndarray:
        return (p.copy_transpose(list(dims)) if dims else p).raw_tensor.detach().numpy()

    params = {}
    for i, conv in enumerate(enc.input_layer.conv_layers):
        # rf's filter [out, in, kt, kf]; netc's [kt, kf, in, out]
        params[f"frontend/conv{i + 1}/W"] = raw(conv.filter).transpose(2, 3, 1, 0)
        params[f"frontend/conv{i + 1}/bias"] = raw(conv.bias)
    params["frontend/proj/W"] = raw(enc.input_projection.weight)
    for i, layer in enumerate(enc.layers):
        pre = f"block{i + 1}"
        for part in ("ffn1", "ffn2"):
            ff = getattr(layer, part)
            for lin in ("linear_ff", "linear_out"):
                params[f"{pre}/{part}/{lin}/W"] = raw(getattr(ff, lin).weight)
                params[f"{pre}/{part}/{lin}/b"] = raw(getattr(ff, lin).bias)
        for norm in (
            "ffn1_layer_norm",
            "self_att_layer_norm",
            "conv_layer_norm",
            "ffn2_layer_norm",
            "final_layer_norm",
        ):
            params[f"{pre}/{norm}/scale"] = raw(getattr(layer, norm).scale)
            params[f"{pre}/{norm}/bias"] = raw(getattr(layer, norm).bias)
        att = layer.self_att
        # rf's qkv kernel is [model, heads, (q, k, v), head]; netc has one Linear each for q, k, v
        w = raw(att.qkv.weight).reshape(MODEL_DIM, HEADS, 3, HEAD)
        b = raw(att.qkv.bias).reshape(HEADS, 3, HEAD)
        for j, name in enumerate(("query", "key", "value")):
            params[f"{pre}/self_att/{name}/W"] = w[:, :, j].reshape(MODEL_DIM, MODEL_DIM)
            params[f"{pre}/self_att/{name}/b"] = b[:, j].reshape(MODEL_DIM)
        params[f"{pre}/self_att/linear_pos/W"] = raw(att.linear_pos.weight)
        params[f"{pre}/self_att/pos_bias_u/b"] = raw(att.pos_bias_u)  # [heads, head]
        params[f"{pre}/self_att/pos_bias_v/b"] = raw(att.pos_bias_v)
        params[f"{pre}/self_att/proj/W"] = raw(att.proj.weight)
        params[f"{pre}/self_att/proj/b"] = raw(att.proj.bias)
        conv = layer.conv_block
        for lin in ("positionwise_conv1", "positionwise_conv2"):
            params[f"{pre}/conv_block/{lin}/W"] = raw(getattr(conv, lin).weight)
            params[f"{pre}/conv_block/{lin}/b"] = raw(getattr(conv, lin).bias)
        # depthwise: rf's filter [out, 1, k]; netc's [k, 1, out]
        params[f"{pre}/conv_block/depthwise_conv/W"] = raw(conv.depthwise_conv.filter).transpose(2, 1, 0)
        params[f"{pre}/conv_block/depthwise_conv/bias"] = raw(conv.depthwise_conv.bias)
        bn = f"{pre}/conv_block/norm/batch_norm/v2_"
        params[bn + "mean"] = raw(conv.norm.running_mean)
        params[bn + "variance"] = raw(conv.norm.running_variance)
        params[bn + "gamma"] = raw(conv.norm.gamma)
        params[bn + "beta"] = raw(conv.norm.beta)
    return out, enc_lens, params


@pytest.mark.parametrize("lens", [[9, 6, 3], [4, 11, 1]])
def test_conformer_encoder_is_rfs(lens):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((len(lens), max(lens), FEAT)).astype(np.float32)
    lens = np.array(lens)
    with returnn_frontend_torch():
        want, enc_lens, params = _rf_encoder(x, lens, 5)
    assert list(enc_lens) == [(n + 1) // 2 for n in lens]
    g = compile_graph(str(MODEL), network="conformer_ctc")
    # all but the CTC output layer, which rf's encoder does not have
    params["logits/W"] = rng.standard_normal((MODEL_DIM, 11)).astype(np.float32)
    params["logits/b"] = np.zeros(11, np.float32)
    assert {p.name for p in g.params} == set(params)
    inputs = {"x": x, "y": np.zeros((len(lens), 1), np.int32)}
    lengths = {"time": lens, "label_time": np.ones(len(lens), np.int64)}
    for got in (run_eager(str(MODEL), g, inputs, lengths, params), run_torch(g, inputs, lengths, params)):
        out = got.outputs["encoder"]
        assert out.shape[:2] == want.shape[:2]
        for b, n in enumerate(enc_lens):
            np.testing.assert_allclose(out[b, :n], want[b, :n], atol=1e-4)
