"""`netc export --streaming` (the real CLI) and `netc_runtime.stream_runner`: the step module run
step by step by the host runner (onnxruntime, torch.jit) = the whole-sequence torch module (as
compiled by default: hoisted, fused) = eager, on a padded batch with unequal lengths, within 1e-5
on valid frames; what cannot stream is a located error."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT, run_netc

from netc.compiler import compile_graph
from netc.stream import stream_options
from netc_runtime.backends import run_eager, run_torch, valid_mask
from netc_runtime.stream_runner import StepModule, run
from netc_runtime.verify import random_inputs, random_lengths, random_params

TOL = 1e-5
MODELS = ROOT / "tests" / "models"
# model -> the outputs streamed (None: all); stacked_rnn's `mean` over time cannot stream
STREAMED = {
    EXAMPLES / "lstm.py": None,
    EXAMPLES / "gru.py": None,
    EXAMPLES / "elman.py": None,
    EXAMPLES / "stacked_rnn.py": ["output", "h1", "h2"],
    MODELS / "stream_framewise.py": None,
    # a cache over another input's dynamic dim (sized from that input), its lengths an input of the step
    MODELS / "nested_state_from_inner_stack.py": None,
    MODELS / "state_in_out.py": ["out", "s"],  # a cache that starts from an input (its loss left out)
    # a teacher-forced attention decoder streamed over its labels: the encoder an input every step reads
    EXAMPLES / "attention.py": ["output", "state"],
}


def _params_npz(params: dict[str, np.ndarray], path) -> str:
    np.savez(path, **{f"param:{k}": v for k, v in params.items()})
    return str(path)


def _batch(g, seed: int = 3):
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, 3, 7, rng)
    return random_inputs(g, lens, rng), lens, random_params(g, rng)


def _close(g, name: str, dims: list[str], lens, ref: np.ndarray, got: np.ndarray, what: str) -> float:
    assert ref.shape == got.shape, f"{name}: {what} {got.shape}, reference {ref.shape}"
    valid = valid_mask(dims, lens, g, ref.shape) if dims else np.ones(ref.shape, dtype=bool)
    diff = float(np.abs(ref - got)[valid].max(initial=0.0))
    assert diff <= TOL, f"{name}: {what} differs by {diff:.3e}"
    return diff


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("path", STREAMED, ids=lambda p: p.stem)
def test_step_by_step_equals_whole_sequence(path, fmt, tmp_path):
    g = compile_graph(str(path))  # as `netc compile` has it: the whole-sequence module
    inputs, lens, params = _batch(g)
    npz = _params_npz(params, tmp_path / "p.npz")
    out = tmp_path / f"step.{fmt}"
    only = STREAMED[path]
    picked = ["--outputs", ",".join(only)] if only else []
    proc = run_netc("export", path, "--streaming", "--format", fmt, "-o", out, "--params", npz, *picked, check=True)
    assert "a step over `" in proc.stdout
    whole = run_torch(g, inputs, lens, params)
    eager = run_eager(str(path), g, inputs, lens, params)
    module = StepModule(out)
    assert [c["name"] for c in module.caches], "each of these networks streams with caches"
    streamed = run(module, inputs, lens)
    lengths = {o["name"] for o in module.outputs if o["kind"] == "lengths"}
    assert set(streamed) - lengths == set(only or whole.outputs)
    for name in set(streamed) - lengths:
        ref = whole.outputs[name]
        dims = whole.dims[name]
        _close(g, name, dims, lens, ref, eager.outputs[name], "eager")
        _close(g, name, dims, lens, ref, streamed[name], f"streamed ({fmt})")


def test_sidecar_and_caches(tmp_path):
    """The sidecar names each cache's input and output, dims, shape, dtype and initial value;
    a step fed by hand (the runner's `step`) carries them."""
    path = MODELS / "stream_framewise.py"
    g = compile_graph(str(path), options=stream_options())
    inputs, lens, params = _batch(g)
    out = tmp_path / "fw.onnx"
    run_netc(
        "export",
        path,
        "--streaming",
        "--format",
        "onnx",
        "-o",
        out,
        "--params",
        _params_npz(params, tmp_path / "p.npz"),
        check=True,
    )
    module = StepModule(out)
    caches = {c["name"]: c for c in module.caches}
    assert caches["h"]["input"] == "cache_h" and caches["h"]["output"] == "new_cache_h"
    assert caches["h"]["dims"] == ["batch", "hidden"] and caches["h"]["shape"] == [None, 8]
    assert caches["h"]["init"] == 0.5 and caches["s"]["init"] == 0.0 and caches["h"]["dtype"] == "float32"
    kinds = {o["name"]: o["kind"] for o in module.outputs}
    assert kinds == {"output": "frame", "last": "final", "sum": "final"}
    assert {i["name"]: i["kind"] for i in module.inputs} == {"x": "frame", "speaker": "const"}
    # two steps by hand, on sequences of at least two frames: the second step's state is the sum's
    full = np.ones((1, 6), dtype=np.float32)
    c0 = module.initial_caches(1)
    assert np.all(c0["cache_h"] == 0.5)
    spk = inputs["speaker"][:1]
    o1, c1 = module.step({"x": full, "speaker": spk}, c0)
    o2, c2 = module.step({"x": full, "speaker": spk}, c1)
    np.testing.assert_allclose(c2["cache_s"], c1["cache_h"] + c2["cache_h"], atol=1e-6)
    np.testing.assert_allclose(o2["sum"], c2["cache_s"], atol=1e-6)


# what cannot stream: the model, and where and what its error says
REFUSED = [
    (
        EXAMPLES / "stacked_rnn.py",
        "25:35",
        "cannot stream the output `mean`: `reduce_mean` works over the whole `time`",
    ),
    (EXAMPLES / "bidirectional.py", "23:5", "cannot stream: this loop runs backwards over the sequence"),
    (MODELS / "stream_reads_whole.py", "17:21", "cannot stream: the loop reads `enc` over all its `time` frames"),
    (MODELS / "stream_computed_state.py", "17:9", "cannot stream: the state `h` starts from a computed value"),
    (MODELS / "grow_self_attention.py", "18:16", "cannot stream: the state `keys` grows by a frame at each step"),
    (MODELS / "stream_future.py", "19:15", "cannot stream the output `centred`: `sub` combines a value after the last"),
]


@pytest.mark.parametrize("path,where,message", REFUSED, ids=lambda p: getattr(p, "stem", ""))
def test_refused_with_located_error(path, where, message, tmp_path):
    proc = run_netc("export", path, "--streaming", "--format", "onnx", "-o", tmp_path / "m.onnx")
    assert proc.returncode == 1
    assert f"{path.name}:{where}: error: {message}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--whole-encoder"], "error: --whole-encoder: `lstm` has no transducer_search"),
        (["--outputs", "output,hx"], "error: --outputs: `lstm` has no output 'hx'"),
        (["--format", "torch-export"], "--streaming writes --format onnx or torchscript"),
    ],
)
def test_option_mistakes_are_one_line(args, message, tmp_path):
    fmt = [] if "--format" in args else ["--format", "onnx"]
    proc = run_netc("export", EXAMPLES / "lstm.py", "--streaming", *fmt, *args, "-o", tmp_path / "m.onnx")
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_runner_imports_no_netc():
    """The host runner deploys without the compiler: importing it imports no `netc` module."""
    code = (
        "import sys, netc_runtime.stream_runner\n"
        "bad = sorted(m for m in sys.modules if m == 'netc' or m.startswith('netc.'))\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
