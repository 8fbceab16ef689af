"""Chunked loops (`for c in chunks(x, chunk)`) beyond `netc verify` (tests/test_models.py): a
per-frame Linear run chunk by chunk equals it over the whole sequence on every target, and a loss
through a chunked loop trains: RETURNN's gradients = the torch module's, finite also where a
sequence's chunks ended (a step with no valid frame of its chunk)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import ROOT

from netc.compiler import compile_graph
from netc_runtime.backends import load_torch_module, run_eager, run_returnn, run_torch
from netc_runtime.verify import random_inputs, random_params

MODELS = ROOT / "tests" / "models"


def test_chunk_by_chunk_equals_whole_sequence():
    path = str(MODELS / "chunked_window_state.py")
    g = compile_graph(path)
    rng = np.random.default_rng(7)
    lens = {"time": np.array([9, 5, 2, 4, 8])}  # chunks of 4: a short last chunk, one shorter than 4, exact
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    for name, r in [
        ("eager", run_eager(path, g, inputs, lens, params)),
        ("torch", run_torch(g, inputs, lens, params)),
        ("returnn", run_returnn(g, inputs, lens, params)),
    ]:
        per_frame, whole = r.outputs["per_frame"], r.outputs["whole"]
        assert per_frame.shape == whole.shape, name
        for b, n in enumerate(lens["time"]):
            np.testing.assert_allclose(per_frame[b, :n], whole[b, :n], atol=1e-5, err_msg=name)


@pytest.mark.parametrize(
    ("model", "pairs"),
    [
        ("chunk_cache_attention.py", [("chunked", "whole"), ("frames_back", "h")]),
        ("chunk_cache_conv.py", [("chunked", "whole")]),
    ],
)
def test_caches_equal_the_whole_sequence(model, pairs):
    """Chunk by chunk with caches (`join_chunk`, `slice_static`, `to_chunk`) = the whole sequence:
    attention over a cache of the 2 chunks before = `chunk_mask`'s form; a causal convolution over
    the cached last frames and the chunk = the causal convolution of the sequence. Lengths: one
    chunk of 1 frame, short last chunks (5, 7: 2 and 1 frames), exact (6, 9), 4 chunks (11)."""
    path = str(MODELS / model)
    g = compile_graph(path)
    rng = np.random.default_rng(5)
    lens = {"time": np.array([11, 5, 1, 6, 7, 9])}
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    for name, r in [
        ("eager", run_eager(path, g, inputs, lens, params)),
        ("torch", run_torch(g, inputs, lens, params)),
        ("returnn", run_returnn(g, inputs, lens, params)),
    ]:
        for got, want in pairs:
            for b, n in enumerate(lens["time"]):
                np.testing.assert_allclose(
                    r.outputs[got][b, :n], r.outputs[want][b, :n], atol=1e-5, err_msg=f"{name} {got}"
                )


def test_gradients_through_a_chunked_loop():
    g = compile_graph(str(MODELS / "chunked_rnn.py"))
    rng = np.random.default_rng(3)
    lens = {"time": np.array([8, 6, 2, 1])}  # chunks of 3
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    want = run_returnn(g, inputs, lens, params, grads=True).grads
    assert set(want) == set(params)
    module = load_torch_module(g).Model()
    module.load_returnn_params(params)
    args = {k: torch.as_tensor(v) for k, v in inputs.items()}
    args.update({f"{d}_lens": torch.as_tensor(v, dtype=torch.int64) for d, v in lens.items()})
    module(**args)["frames_sum"].backward()
    for name, attr in module.returnn_param_names.items():
        grad = module.get_parameter(attr).grad.numpy()
        assert np.isfinite(grad).all() and np.abs(grad).max() > 0, name
        np.testing.assert_allclose(grad, want[name], atol=1e-4, err_msg=name)


def test_the_streaming_conformer_trains_chunk_by_chunk(tmp_path):
    """A CTC loss through the chunked loop of examples/conformer_streaming.py (two blocks with
    their key/value and convolution caches): RETURNN's gradients = the torch module's. Dropout
    off (each backend draws its own masks)."""
    src = (ROOT / "examples" / "conformer_streaming.py").read_text()
    assert src.count("DROPOUT = 0.1") == 1
    path = tmp_path / "conformer_streaming.py"
    path.write_text(src.replace("DROPOUT = 0.1", "DROPOUT = 0.0"))
    g = compile_graph(str(path), network="conformer_streaming_chunked")
    rng = np.random.default_rng(4)
    lens = {"time": np.array([21, 8, 3, 13]), "label_time": np.array([3, 2, 1, 2])}  # 11, 4, 2, 7 encoder frames
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    want = run_returnn(g, inputs, lens, params, grads=True).grads
    assert set(want) == set(params)
    module = load_torch_module(g).Model()
    module.load_returnn_params(params)
    args = {k: torch.as_tensor(v) for k, v in inputs.items()}
    args.update({f"{d}_lens": torch.as_tensor(v, dtype=torch.int64) for d, v in lens.items()})
    module.train()
    module(**args)["ctc"].backward()
    for name, attr in module.returnn_param_names.items():
        grad = module.get_parameter(attr).grad.numpy()
        assert np.isfinite(grad).all() and np.abs(grad).max() > 0, name
        np.testing.assert_allclose(grad, want[name], atol=1e-4, err_msg=name)
