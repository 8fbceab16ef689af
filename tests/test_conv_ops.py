"""The Conformer's ops (`Conv1d`, `BatchNorm`, `glu`): misuse is a located error
(`file:line:col: error: ...`, compiled by the real CLI); `BatchNorm` in training mode (which
`netc verify` does not run) agrees between torch, RETURNN and a numpy reference, and torch
moves the running statistics as RETURNN's `batch_norm` does."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch
from conftest import ROOT, assert_located_error, run_netc

from netc.compiler import compile_graph
from netc.errors import CompileError
from netc_runtime.backends import _import_file, load_torch_module, run_returnn
from netc_runtime.verify import random_inputs, random_params

HEADER = """\
from netc import BatchNorm, Conv1d, Conv2d, Dim, Labels, Tensor, batch, glu, network, reduce_sum, split_dims
time = Dim("time")
frames = Dim("frames")
sub = Dim("sub")
feat = Dim("feat", 6)
hidden = Dim("hidden", 4)
half = Dim("half", 3)
vocab = Dim("vocab", 5)
chan = Dim("chan", 2)


def nc_split(x):
    return split_dims(x, axis=feat, dims=(half, chan))
"""
SIG = "def f(x: Tensor[batch, time, feat], y: Labels[batch, frames, vocab]):"

# (name, body lines, message part, its call's text)
CASES = [
    ("conv_static_axis", "return Conv1d(hidden, filter_size=3)(x, axis=feat)",
     "`Conv1d` needs `axis` to be a dynamic dim of [batch, time, feat]", "Conv1d("),
    ("conv_labels", "return Conv1d(hidden, filter_size=3)(y, axis=frames)",
     "`Conv1d` needs a float tensor, got int32", "Conv1d("),
    ("conv_no_time", "return Conv1d(hidden, filter_size=3)(reduce_sum(x, axis=time), axis=time)",
     "`Conv1d` needs `axis` to be a dynamic dim of [batch, feat]", "Conv1d("),
    ("conv_groups", "return Conv1d(hidden, filter_size=3, groups=4)(x, axis=time)",
     "`Conv1d` groups=4 must divide the input channels `feat` (6) and `out_dim` `hidden` (4)", "Conv1d("),
    ("conv_filter_zero", "return Conv1d(hidden, filter_size=0)(x, axis=time)",
     "`Conv1d` needs `filter_size` to be an int >= 1, got 0", "Conv1d("),
    ("conv_same_stride", "return Conv1d(hidden, filter_size=3, stride=2)(x, axis=time)",
     "`Conv1d` with padding 'same' takes stride 1", "Conv1d("),
    ("conv_same_out_axis", "return Conv1d(hidden, filter_size=3)(x, axis=time, out_axis=sub)",
     "`Conv1d` with padding 'same' keeps `axis`", "Conv1d("),
    ("conv_valid_no_out_axis", "return Conv1d(hidden, filter_size=3, padding='valid')(x, axis=time)",
     "`Conv1d` with padding 'valid' makes a new dynamic dim: pass `out_axis=`", "Conv1d("),
    ("conv_valid_onto_input_dim", "return Conv1d(hidden, filter_size=3, padding='valid')(x, axis=time, out_axis=frames)",
     "`frames` already has lengths", "Conv1d("),
    ("conv_valid_static_out_axis", "return Conv1d(hidden, filter_size=3, padding='valid')(x, axis=time, out_axis=half)",
     "`Conv1d` makes a dynamic dim; `half` is not one", "Conv1d("),
    ("conv_padding", "return Conv1d(hidden, filter_size=3, padding='full')(x, axis=time)",
     "`Conv1d` padding is 'same', 'causal' or 'valid', got 'full'", "Conv1d("),
    ("conv_causal_stride", "return Conv1d(hidden, filter_size=3, padding='causal', stride=2)(x, axis=time)",
     "`Conv1d` with padding 'causal' takes stride 1", "Conv1d("),
    ("conv_causal_out_axis", "return Conv1d(hidden, filter_size=3, padding='causal')(x, axis=time, out_axis=sub)",
     "`Conv1d` with padding 'causal' keeps `axis`", "Conv1d("),
    ("conv_call_args", "return Conv1d(hidden, filter_size=3)(x)",
     "missing a required argument: 'axis'", "Conv1d("),
    ("conv2d_no_channel", "return Conv2d(hidden, filter_size=(3, 3))(x, axis=time, feature_axis=feat)",
     "`Conv2d` convolves [batch, time, feat, channel], got [batch, time, feat]", "Conv2d("),
    ("conv2d_dynamic_feature_axis", "return Conv2d(hidden, filter_size=(3, 3))(x, axis=time, feature_axis=time)",
     "`Conv2d` needs `feature_axis` to be a static dim of [batch, time, feat]", "Conv2d("),
    ("conv2d_one_filter_size", "return Conv2d(hidden, filter_size=3)(nc_split(x), axis=time, feature_axis=half)",
     "`Conv2d` needs `filter_size` to be two ints >= 1 (time, feature), got 3", "Conv2d("),
    ("conv2d_groups", "return Conv2d(vocab, filter_size=(1, 1), groups=2)(nc_split(x), axis=time, feature_axis=half)",
     "`Conv2d` groups=2 must divide the input channels `chan` (2) and `out_dim` `vocab` (5)", "Conv2d("),
    ("conv2d_out_is_feature_axis", "return Conv2d(half, filter_size=(1, 1))(nc_split(x), axis=time, feature_axis=half)",
     "Conv2d output dim `half` is already a dim of its input", "Conv2d("),
    ("conv2d_stride_no_out_axis", "return Conv2d(vocab, filter_size=(3, 1), stride=(2, 1))(nc_split(x), axis=time, feature_axis=half)",
     "`Conv2d` with padding 'valid' or a time stride makes a new dynamic dim: pass `out_axis=`", "Conv2d("),
    ("conv2d_same_out_axis", "return Conv2d(vocab, filter_size=(3, 1))(nc_split(x), axis=time, feature_axis=half, out_axis=sub)",
     "`Conv2d` with padding 'same' and time stride 1 keeps `axis`", "Conv2d("),
    ("conv2d_stride_three", "return Conv2d(vocab, filter_size=(3, 1), stride=(2, 1, 1))(nc_split(x), axis=time, feature_axis=half)",
     "`Conv2d` needs `stride` to be an int >= 1 or two (time, feature), got [2, 1, 1]", "Conv2d("),
    ("conv2d_padding", "return Conv2d(vocab, filter_size=(3, 1), padding='full')(nc_split(x), axis=time, feature_axis=half)",
     "`Conv2d` padding is 'same' or 'valid', got 'full'", "Conv2d("),
    ("conv2d_feature_stride_no_dim", "return Conv2d(vocab, filter_size=(3, 1), stride=(1, 2))(nc_split(x), axis=time, feature_axis=half)",
     "`Conv2d` makes `half` (3) 2 long: pass `out_feature_axis=` (a Dim of size 2)", "Conv2d("),
    ("conv2d_feature_dim_size", "return Conv2d(vocab, filter_size=(3, 2), padding='valid')(nc_split(x), axis=time, feature_axis=half, out_axis=sub, out_feature_axis=hidden)",
     "`Conv2d` gives `feature_axis` 2 frames; `out_feature_axis` `hidden` has size 4", "Conv2d("),
    ("conv2d_filter_over_feature", "return Conv2d(vocab, filter_size=(1, 4), padding='valid')(nc_split(x), axis=time, feature_axis=half, out_axis=sub)",
     "`Conv2d` filter 4 is longer than `feature_axis` `half` (3)", "Conv2d("),
    ("conv2d_valid_onto_input_dim", "return Conv2d(vocab, filter_size=(2, 1), padding='valid')(nc_split(x), axis=time, feature_axis=half, out_axis=frames)",
     "`frames` already has lengths", "Conv2d("),
    ("glu_odd", "return glu(x, hidden)", "`glu` halves `feat` (6): `out_dim` `hidden` has size 4", "glu("),
    ("batch_norm_labels", "return BatchNorm()(y)", "`BatchNorm` needs a float tensor, got int32", "BatchNorm("),
    ("batch_norm_in_loop", "out = []\nfor x_t in x:\n    out.append(BatchNorm()(x_t))\nreturn out",
     "`BatchNorm` in a loop body: a step's batch holds sequences that already ended", "BatchNorm("),
    ("batch_norm_momentum", "return BatchNorm(momentum=2)(x)",
     "`BatchNorm` needs `momentum` to be a number in [0, 1], got 2", "BatchNorm("),
]  # fmt: skip


@pytest.mark.parametrize("name,line,message,call", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, netc, name, line, message, call):
    src = HEADER + "@network\n" + SIG + "\n" + textwrap.indent(line, "    ") + "\n"
    (tmp_path / f"{name}.py").write_text(src)
    proc = netc("compile", f"{name}.py", "--target", "returnn", cwd=tmp_path)
    at = next(i for i, text in enumerate(line.splitlines()) if call in text)  # the body line of the error
    assert_located_error(proc, src, f"{name}.py", HEADER.count("\n") + 3 + at, call, message)


def _reference(x: np.ndarray, lens, p: dict, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batch norm in training by hand: statistics of the valid frames only (biased variance)."""
    valid = np.concatenate([x[b, :n] for b, n in enumerate(lens)]).astype(np.float64)
    mean, var = valid.mean(0), valid.var(0)
    y = (x - mean) / np.sqrt(var + eps) * p["gamma"] + p["beta"]
    return y, mean, var


def test_batch_norm_training_mode(tmp_path):
    """Training mode: torch = RETURNN (train flag) = the reference on valid frames of a padded
    batch whose padded frames hold large values; torch's running statistics move by
    `momentum` towards the batch's (biased) ones, RETURNN's update rule."""
    path = tmp_path / "bn.py"
    path.write_text(
        "from netc import BatchNorm, Dim, Tensor, batch, network\n"
        'time = Dim("time")\nfeat = Dim("feat", 3)\n\n\n@network\n'
        "def bn(x: Tensor[batch, time, feat]):\n"
        '    return {"output": BatchNorm(eps=1e-3, momentum=0.25)(x)}\n'
    )
    g = compile_graph(str(path))
    rng = np.random.default_rng(3)
    lens = {"time": np.array([5, 2, 4])}
    inputs = random_inputs(g, lens, rng)
    x = inputs["x"]
    for b, n in enumerate(lens["time"]):
        x[b, n:] = 100.0  # a leak of padded frames into the statistics would show
    params = random_params(g, rng)
    names = {k.rsplit("/", 1)[1][len("v2_") :]: k for k in params}
    p = {k: params[v].astype(np.float64) for k, v in names.items()}
    want, mean, var = _reference(x.astype(np.float64), lens["time"], p, 1e-3)
    mask = np.arange(x.shape[1])[None, :, None] < lens["time"][:, None, None]

    r = run_returnn(g, inputs, lens, params, train_flag=True)
    assert np.abs(np.where(mask, r.outputs["output"] - want, 0.0)).max() < 1e-4

    model = load_torch_module(g).Model()
    model.load_returnn_params(params)
    model.train()
    out = model(x=torch.as_tensor(x), time_lens=torch.as_tensor(lens["time"]))["output"].detach().numpy()
    assert np.abs(np.where(mask, out - want, 0.0)).max() < 1e-4
    state = dict(model.named_parameters())
    moved = {k: state[v.replace("/batch_norm/", ".batch_norm_")].detach().numpy() for k, v in names.items()}
    np.testing.assert_allclose(moved["mean"], p["mean"] + (mean - p["mean"]) * 0.25, atol=1e-5)
    np.testing.assert_allclose(moved["variance"], p["variance"] + (var - p["variance"]) * 0.25, atol=1e-5)

    model.eval()  # inference: the running statistics, unchanged
    before = {k: t.clone() for k, t in state.items()}
    model(x=torch.as_tensor(x), time_lens=torch.as_tensor(lens["time"]))
    assert all(torch.equal(before[k], t) for k, t in model.named_parameters())

    # eager mode runs one sequence at a time: training mode is a located error at the call
    net = _import_file(str(path), "bn_model").bn
    net.load_returnn_params(params)
    net.train()
    with pytest.raises(CompileError, match="`BatchNorm` in training mode needs the whole batch") as e:
        net(x=torch.as_tensor(x), time_lens=torch.as_tensor(lens["time"]))
    assert (e.value.span.line, e.value.span.col) == (8, 22), e.value.span


def test_batch_norm_updated_in_inference(tmp_path):
    """`update_in_inference=True` (RETURNN's defaults before behavior version 12): in inference the
    running statistics first move `momentum` towards the valid frames' and are then used: torch =
    RETURNN (no train flag) = the reference, and torch's statistics moved; eager mode, one sequence
    at a time, cannot run it (located), and on [batch, feature] it is an error (RETURNN's fused
    batch norm there updates in training only)."""
    src = (
        "from netc import BatchNorm, Dim, Tensor, batch, network\n"
        'time = Dim("time")\nfeat = Dim("feat", 3)\n\n\n@network\n'
        "def bn(x: Tensor[batch, time, feat]):\n"
        '    return {"output": BatchNorm(eps=1e-3, momentum=0.25, update_in_inference=True)(x)}\n'
    )
    path = tmp_path / "bn.py"
    path.write_text(src)
    g = compile_graph(str(path))
    rng = np.random.default_rng(4)
    lens = {"time": np.array([5, 2, 4])}
    inputs = random_inputs(g, lens, rng)
    x = inputs["x"]
    for b, n in enumerate(lens["time"]):
        x[b, n:] = 100.0  # a leak of padded frames into the statistics would show
    params = random_params(g, rng)
    names = {k.rsplit("/", 1)[1][len("v2_") :]: k for k in params}
    p = {k: params[v].astype(np.float64) for k, v in names.items()}
    _, mean, var = _reference(x.astype(np.float64), lens["time"], p, 1e-3)
    moved_mean, moved_var = p["mean"] + (mean - p["mean"]) * 0.25, p["variance"] + (var - p["variance"]) * 0.25
    want = (x - moved_mean) / np.sqrt(moved_var + 1e-3) * p["gamma"] + p["beta"]
    mask = np.arange(x.shape[1])[None, :, None] < lens["time"][:, None, None]

    r = run_returnn(g, inputs, lens, params)
    assert np.abs(np.where(mask, r.outputs["output"] - want, 0.0)).max() < 1e-4

    model = load_torch_module(g).Model()
    model.load_returnn_params(params)
    model.eval()
    out = model(x=torch.as_tensor(x), time_lens=torch.as_tensor(lens["time"]))["output"].detach().numpy()
    assert np.abs(np.where(mask, out - want, 0.0)).max() < 1e-4
    state = dict(model.named_parameters())
    moved = state[names["mean"].replace("/batch_norm/", ".batch_norm_")].detach().numpy()
    np.testing.assert_allclose(moved, moved_mean, atol=1e-5)

    net = _import_file(str(path), "bn_model_moved").bn
    net.load_returnn_params(params)
    with pytest.raises(CompileError, match=r"`BatchNorm\(update_in_inference=True\)` needs the whole batch"):
        net(x=torch.as_tensor(x), time_lens=torch.as_tensor(lens["time"]))

    path.write_text(src.replace("x: Tensor[batch, time, feat]", "x: Tensor[batch, feat]"))
    with pytest.raises(CompileError, match=r"normalises \[batch, time, feature\] only"):
        compile_graph(str(path))


def test_batch_norm_moved_that_nothing_reads_is_verified_against_torch():
    """Eager mode runs every call the source makes, also a `BatchNorm(update_in_inference=True)`
    the compiled graph drops as unread: `netc verify` asks the source, not the compiled graph,
    whether eager can run it, and takes torch as the reference (the generator's seed 58811)."""
    proc = run_netc("verify", ROOT / "tests" / "models" / "batch_norm_moved_unused.py", check=True)
    assert "cannot run this model: `BatchNorm` here depends on the whole batch" in proc.stdout
    assert "torch vs returnn" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok"), proc.stdout
