"""`netc export --streaming` of chunked loops (`for c in chunks(x, chunk):`), through the real
CLI: the step module takes one chunk of frames (and their valid lengths) and the caches, and
gives the chunk's per-frame outputs; the host runner cuts each sequence into chunks (its last
shorter). onnxruntime chunk by chunk = torch.jit chunk by chunk = the whole-sequence torch
module = eager, within 1e-5 on valid frames of a padded batch whose lengths are not multiples
of the chunk size, one shorter than a chunk."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT, run_netc
from test_streaming import _close, _params_npz

from netc.compiler import compile_graph
from netc_runtime.backends import run_eager, run_torch
from netc_runtime.stream_runner import StepModule, Stream, run
from netc_runtime.verify import random_inputs, random_params

MODELS = ROOT / "tests" / "models"
# (model, network) -> (input frames per chunk, its caches, the sidecar's chunk dims beyond the loop's)
CHUNKED = {
    (MODELS / "chunked_rnn.py", None): (3, ["h"], []),
    (MODELS / "chunked_window_state.py", None): (4, ["mem"], []),
    (EXAMPLES / "chunked_encoder.py", None): (4, ["state"], []),
    # a pool of pairs of frames before the loop: chunks of 3 pooled frames are 6 input frames
    (MODELS / "chunked_pooled.py", None): (6, ["h"], ["chunk_time"]),
    # the streaming Conformer: keys, values and the convolution's frames cached per block, a pool
    # of pairs before the loop (chunks of 4 encoder frames are 8 input frames)
    (EXAMPLES / "conformer_streaming.py", "conformer_streaming_chunked"): (
        8,
        ["k1", "v1", "conv1", "k2", "v2", "conv2", "valid"],
        ["chunk_time"],
    ),
}


def _batch(g, n: int, seed: int = 5):
    rng = np.random.default_rng(seed)
    # 2n+1, max(n-3, 1) (shorter than a chunk; with a pool of pairs, than a pooled chunk), n+2:
    # no length a multiple of n, the last chunks differ
    lens = {d.name: np.array([2 * n + 1, max(n - 3, 1), n + 2]) for d in g.dims if d.kind == "dynamic"}
    lens = {k: v for k, v in lens.items() if any(k in i.annotated_dims for i in g.inputs)}
    if "label_time" in lens:
        lens["label_time"] = np.array([3, 1, 2])
    return random_inputs(g, lens, rng), lens, random_params(g, rng)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("model", CHUNKED, ids=lambda m: m[1] or m[0].stem)
def test_chunk_by_chunk_equals_whole_sequence(model, fmt, tmp_path):
    n, caches, frames = CHUNKED[model]
    path, network = model
    g = compile_graph(str(path), network=network)  # the whole-sequence module, as `netc compile` has it
    inputs, lens, params = _batch(g, n)
    out = tmp_path / f"step.{fmt}"
    npz = _params_npz(params, tmp_path / "p.npz")
    named = ["--network", network] if network else []
    proc = run_netc("export", path, *named, "--streaming", "--format", fmt, "-o", out, "--params", npz, check=True)
    assert "a step over `" in proc.stdout and "_chunks`" in proc.stdout
    module = StepModule(out)
    dim = frames[0] if frames else "chunk"  # the step's input frames
    chunk = {"axis": "time", "size": n, "dim": dim, "lengths": f"{dim}_lens", "frames": sorted(["chunk", *frames])}
    chunk["chunk_size"] = n // 2 if frames else n
    assert module.meta["chunk"] == chunk
    assert module.meta["step_dims"] == [dim]
    assert [c["name"] for c in module.caches] == caches
    whole = run_torch(g, inputs, lens, params)
    eager = run_eager(str(path), g, inputs, lens, params)
    streamed = run(module, inputs, lens["time"])
    lengths = {o["name"] for o in module.outputs if o["kind"] == "lengths"}  # a pool's in the step
    assert set(streamed) - lengths == {o.name for o in g.outputs}  # every output streams (losses are training's)
    for name in set(streamed) - lengths:
        dims = whole.dims[name]
        valid = {**lens, **whole.lens[name]}  # the lengths of dims ops make (the chunks, a pool's)
        _close(g, name, dims, valid, whole.outputs[name], eager.outputs[name], "eager")
        _close(g, name, dims, valid, whole.outputs[name], streamed[name], f"chunk by chunk ({fmt})")


def test_chunks_fed_by_hand(tmp_path):
    """A stream fed chunk by chunk as frames arrive (`Stream.feed`): 3 frames, then 3, then the
    last 1 of a 7-frame sequence, filled up to the chunk's 3 frames (the sidecar's shape), its
    valid frames in `chunk_lens`; the step's outputs are over the chunk's frames."""
    path = MODELS / "chunked_rnn.py"
    g = compile_graph(str(path))
    inputs, lens, params = _batch(g, 3)
    out = tmp_path / "step.onnx"
    npz = _params_npz(params, tmp_path / "p.npz")
    run_netc("export", path, "--streaming", "--format", "onnx", "-o", out, "--params", npz, check=True)
    module = StepModule(out)
    assert next(r for r in module.inputs if r["name"] == "x")["shape"] == [None, 3, 4]
    x = inputs["x"][:1]  # the first sequence: 7 frames
    stream = Stream(module, 1)
    frames = []
    for start in (0, 3, 6):
        chunk = x[:, start : start + 3]
        n = chunk.shape[1]
        filled = np.concatenate([chunk, np.full((1, 3 - n, 4), 9.0, dtype=np.float32)], axis=1)
        outs = stream.feed({"x": filled, "chunk_lens": np.array([n])})
        assert outs["frames"].shape == (1, 3, 5)
        frames.append(outs["frames"][:, :n])
    whole = run_torch(g, inputs, lens, params)
    np.testing.assert_allclose(np.concatenate(frames, axis=1), whole.outputs["frames"][:1, :7], atol=1e-5)
    np.testing.assert_allclose(stream.finals()["h"], whole.outputs["h"][:1], atol=1e-5)


def test_whole_sequence_output_after_chunks_is_refused(tmp_path):
    """An output that needs every chunk (a mean over `time` after the loop) is a located error;
    left out (`--outputs`), the per-frame one streams."""
    path = MODELS / "stream_chunk_whole.py"
    proc = run_netc("export", path, "--streaming", "--format", "onnx", "-o", tmp_path / "m.onnx")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    where = f"{path.name}:21:39: error: cannot stream the output `mean`: `reduce_mean` works over the whole `time`"
    assert where in proc.stderr, proc.stderr
    assert not (tmp_path / "m.onnx").exists()
    args = ("--outputs", "frames", "--axis", "time")  # `time`: the dim the loop cuts into chunks
    proc = run_netc("export", path, "--streaming", "--format", "onnx", "-o", tmp_path / "m.onnx", *args, check=True)
    assert "a step over `time_chunks`" in proc.stdout
    assert [o["name"] for o in StepModule(tmp_path / "m.onnx").outputs] == ["frames"]


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_streaming_conformer_equals_its_masked_whole_sequence_form(fmt, tmp_path):
    """The issue's case: `examples/conformer_streaming.py`'s chunked network exported and run chunk
    by chunk (onnxruntime, TorchScript) gives what its whole-sequence network (self-attention
    limited by the chunk mask, in parallel) gives with the same parameters, within 1e-5."""
    path = EXAMPLES / "conformer_streaming.py"
    chunked = compile_graph(str(path), network="conformer_streaming_chunked")
    whole_g = compile_graph(str(path), network="conformer_streaming")
    inputs, lens, params = _batch(chunked, 8)
    # one checkpoint serves both: the same module paths and roles (RETURNN names differ by the loop)
    by_path = {(p.path, p.role): params[p.name] for p in chunked.params}
    assert {(p.path, p.role) for p in whole_g.params} == set(by_path)
    whole_params = {p.name: by_path[p.path, p.role] for p in whole_g.params}
    out = tmp_path / f"step.{fmt}"
    npz = _params_npz(params, tmp_path / "p.npz")
    named = ["--network", "conformer_streaming_chunked"]
    run_netc("export", path, *named, "--streaming", "--format", fmt, "-o", out, "--params", npz, check=True)
    streamed = run(StepModule(out), inputs, lens["time"])
    whole = run_torch(whole_g, inputs, lens, whole_params)
    for name in ("output", "encoder"):
        _close(whole_g, name, whole.dims[name], {**lens, **whole.lens[name]}, whole.outputs[name], streamed[name], fmt)
