"""examples/conformer_aed.py's decoder is RETURNN frontend's `rf.TransformerDecoder` (on rf's
PyTorch backend), teacher-forced: rf's parameters, all drawn at random (layer norm scales and
biases too), loaded into netc's eager mode and torch module give rf's logits on every valid
frame of a padded batch with unequal lengths, on the same encoder output (and so does the
emitted RETURNN config on TensorFlow).

netc runs tests/models/transformer_decoder.py, the example's decoder code (checked here to be
the example's, character for character) with the encoder output as an input. rf is configured
as the example is written: 2 pre-norm layers (causal self-attention, cross-attention, a ReLU
feed-forward of 4 * model), 2 heads, the sinusoidal positional encoding of the steps, the
embedding scaled by sqrt(model), a final layer norm, logits without a bias whose weight is the
embedding's (`share_embedding=True`: netc's `Linear(vocab, weight=input_embedding.weight)`, one
parameter), and no dropout."""

from __future__ import annotations

import ast

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, ROOT, returnn_frontend_torch

from netc.compiler import compile_graph
from netc_runtime.backends import run_eager, run_returnn, run_torch

EXAMPLE = EXAMPLES / "conformer_aed.py"
MODEL = ROOT / "tests" / "models" / "transformer_decoder.py"
MODEL_DIM, HEADS, HEAD, VOCAB, LAYERS, EOS = 16, 2, 8, 10, 2, 0
# the example's decoder: what the model must have as the example has it
SHARED = ("MODEL_SIZE", "LOG_STEP", "DEC_LOG_STEP", "EOS", "heads_of", "abs_pos_encoding", "DecoderLayer")


def _top_level(path) -> dict[str, str]:
    text = path.read_text()
    found = {}
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found[node.name] = ast.get_source_segment(text, node)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in t.elts if isinstance(t, ast.Tuple) else [t]:
                    found[n.id] = ast.get_source_segment(text, node)
    return found


def _decoder_loop(path) -> str:
    """The network's decoder: from its first layer to the loss."""
    text = path.read_text()
    return text[text.index("    layer1 = DecoderLayer(") : text.index("    mark_as_loss(")]


def test_model_is_the_examples_decoder():
    example, model = _top_level(EXAMPLE), _top_level(MODEL)
    for name in SHARED:
        assert model[name] == example[name], name
    loop = _decoder_loop(EXAMPLE).replace("2 * x.max_seq_len", "2 * encoder.max_seq_len")
    assert _decoder_loop(MODEL) == loop


def _rf_decoder(enc: np.ndarray, enc_lens, labels: np.ndarray, lens, seed: int):
    """rf's TransformerDecoder teacher-forced on labels [batch, dec_time] (EOS first, then each
    reference label but the last) over enc [batch, enc_time, model]: its logits
    [batch, dec_time, vocab] and its parameters under the paths of netc's modules."""
    import returnn.frontend as rf
    from returnn.frontend.decoder.transformer import TransformerDecoder
    from returnn.tensor import Dim, Tensor

    rf.set_random_seed(seed)
    batch_dim = Dim(len(lens), name="batch")

    def dyn(name, ns):
        return Dim(Tensor(f"{name}_lens", [batch_dim], dtype="int32", raw_tensor=torch.tensor(ns, dtype=torch.int32)))

    enc_time, dec_time = dyn("enc_time", enc_lens), dyn("dec_time", lens)
    model, vocab = Dim(MODEL_DIM, name="model"), Dim(VOCAB, name="vocab")
    dec = TransformerDecoder(
        model,
        vocab,
        model,
        num_layers=LAYERS,
        ff_dim=Dim(4 * MODEL_DIM, name="ff"),
        ff_activation=rf.relu,
        num_heads=HEADS,
        dropout=0.0,
        att_dropout=0.0,
        input_dropout=0.0,
        input_embedding_scale=MODEL_DIM**0.5,
        share_embedding=True,
    )
    assert dec.logits.weight is dec.input_embedding.weight
    rng = np.random.default_rng(seed)
    for _, p in dec.named_parameters():
        p.raw_tensor = torch.tensor(rng.normal(0, 0.3, p.raw_tensor.shape), dtype=torch.float32)
    encoder = Tensor("enc", [batch_dim, enc_time, model], dtype="float32", raw_tensor=torch.tensor(enc))
    source = Tensor(
        "labels",
        [batch_dim, dec_time],
        dtype="int32",
        sparse_dim=vocab,
        raw_tensor=torch.tensor(labels, dtype=torch.int32),
    )
    logits, _ = dec(
        source,
        spatial_dim=dec_time,
        state=dec.default_initial_state(batch_dims=[batch_dim]),
        encoder=dec.transform_encoder(encoder, axis=enc_time),
    )
    logits = logits.copy_transpose([batch_dim, dec_time, vocab]).raw_tensor.detach().numpy()

    def raw(p, *dims) -> np.ndarray:
        return (p.copy_transpose(list(dims)) if dims else p).raw_tensor.detach().numpy()

    params = {"input_embedding/W": raw(dec.input_embedding.weight, vocab, model)}  # also the logits'
    params["scores/scale"] = raw(dec.final_layer_norm.scale)
    params["scores/bias"] = raw(dec.final_layer_norm.bias)
    for i, (_, layer) in enumerate(dec.layers.items()):
        pre = f"layer{i + 1}"
        for norm in ("self_att_layer_norm", "cross_att_layer_norm", "ff_layer_norm"):
            params[f"{pre}/{norm}/scale"] = raw(getattr(layer, norm).scale)
            params[f"{pre}/{norm}/bias"] = raw(getattr(layer, norm).bias)
        att = layer.self_att
        # rf's qkv is [model, heads, (q, k, v), head]; netc's [model, (q, k, v), heads, head]
        w = raw(att.qkv.weight).reshape(MODEL_DIM, HEADS, 3, HEAD).transpose(0, 2, 1, 3)
        params[f"{pre}/self_att_qkv/W"] = w.reshape(MODEL_DIM, 3 * MODEL_DIM)
        params[f"{pre}/self_att_qkv/b"] = raw(att.qkv.bias).reshape(HEADS, 3, HEAD).transpose(1, 0, 2).reshape(-1)
        params[f"{pre}/self_att_proj/W"] = raw(att.proj.weight)
        params[f"{pre}/self_att_proj/b"] = raw(att.proj.bias)
        ca = layer.cross_att
        params[f"{pre}/cross_att_query/W"] = raw(ca.q.weight)
        params[f"{pre}/cross_att_query/b"] = raw(ca.q.bias)
        # rf's kv is [model, heads, (k, v), head]; netc has one Linear each
        w = raw(ca.kv.weight).reshape(MODEL_DIM, HEADS, 2, HEAD)
        b = raw(ca.kv.bias).reshape(HEADS, 2, HEAD)
        for j, name in enumerate(("key", "value")):
            params[f"{pre}/cross_att_{name}/W"] = w[:, :, j].reshape(MODEL_DIM, MODEL_DIM)
            params[f"{pre}/cross_att_{name}/b"] = b[:, j].reshape(MODEL_DIM)
        params[f"{pre}/cross_att_proj/W"] = raw(ca.proj.weight)
        params[f"{pre}/cross_att_proj/b"] = raw(ca.proj.bias)
        params[f"{pre}/ff_in/W"] = raw(layer.ff.linear_ff.weight)
        params[f"{pre}/ff_in/b"] = raw(layer.ff.linear_ff.bias)
        params[f"{pre}/ff_out/W"] = raw(layer.ff.linear_out.weight)
        params[f"{pre}/ff_out/b"] = raw(layer.ff.linear_out.bias)
    return logits, params


def _netc_logits(enc, enc_lens, y, lens, params_by_path):
    """netc's logits [batch, dec_time, vocab], teacher-forced on y: eager, torch, RETURNN (TF)."""
    g = compile_graph(str(MODEL))
    params = {p.name: params_by_path[f"{p.path}/{p.role}"] for p in g.params}
    assert len(params) == len(params_by_path)
    inputs = {"encoder": enc, "y": y}
    lengths = {"enc_time": np.asarray(enc_lens), "dec_time": np.asarray(lens)}
    got = []
    for res in (
        run_eager(str(MODEL), g, inputs, lengths, params),
        run_torch(g, inputs, lengths, params),
        run_returnn(g, inputs, lengths, params),
    ):
        dims = res.dims["logits"]
        got.append(res.outputs["logits"].transpose([dims.index(d) for d in ("batch", "dec_time", "vocab")]))
    return got


def _batch(enc_lens, lens, seed):
    rng = np.random.default_rng(seed)
    enc = rng.standard_normal((len(lens), max(enc_lens), MODEL_DIM)).astype(np.float32)
    y = rng.integers(1, VOCAB, (len(lens), max(lens))).astype(np.int32)
    for b, n in enumerate(lens):
        y[b, n - 1 :] = EOS  # EOS last
    fed = np.concatenate([np.full((len(lens), 1), EOS, np.int32), y[:, :-1]], axis=1)  # what each step sees
    return enc, y, fed


# (the decoder's loop is bounded by twice the encoder's frames, per sequence: the labels fit)
@pytest.mark.parametrize(("enc_lens", "lens"), [([7, 4, 2], [5, 3, 1]), ([3, 8, 2], [2, 6, 4])])
def test_transformer_decoder_is_rfs(enc_lens, lens):
    enc, y, fed = _batch(enc_lens, lens, 7)
    with returnn_frontend_torch():
        want, params = _rf_decoder(enc, enc_lens, fed, lens, 7)
    for got in _netc_logits(enc, enc_lens, y, lens, params):
        assert got.shape == want.shape
        for b, n in enumerate(lens):
            np.testing.assert_allclose(got[b, :n], want[b, :n], rtol=0, atol=1e-5)
