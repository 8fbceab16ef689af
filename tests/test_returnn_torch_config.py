"""The returnn-torch config itself, without training: its train_step and forward_step in RETURNN's
PyTorch backend agree with the module; its losses are normalised as RETURNN's TensorFlow engine
normalises the TF config's `as_is` losses; what it cannot feed is a located error; projects and
`netc check --construct` know the target."""

from __future__ import annotations

import json
import runpy
import shutil

import numpy as np
import pytest
from conftest import EXAMPLES, run_netc

from netc.compiler import compile_graph
from netc.emit_returnn_torch.emitter import emit_returnn_torch
from netc.emit_tf.emitter import emit_returnn
from netc_runtime.backends import run_torch
from netc_runtime.returnn_torch import returnn_batch, run_entry_points, run_returnn_torch
from netc_runtime.verify import random_inputs, random_lengths, random_params

HEAD = """\
from netc import Dim, Linear, Tensor, argmax, batch, end, mark_as_loss, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 3)
hidden = Dim("hidden", 4)
"""

# losses of every shape RETURNN normalises differently: by the frames of the first dynamic dim,
# or by the batch; the input is time-major, so the config permutes what RETURNN delivers
LOSSES = (
    HEAD
    + """

@network
def losses(x: Tensor[time, batch, feat]):
    h = tanh(Linear(hidden)(x))
    mark_as_loss(h, "frames_features")
    mark_as_loss(reduce_sum(h, axis=hidden), "frames")
    mark_as_loss(reduce_sum(h, axis=time), "per_seq_features")
    mark_as_loss(reduce_sum(reduce_sum(h, axis=time), axis=hidden), "per_seq")
    return {"h": h}
"""
)


def _batch(g, seed: int = 0):
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, batch=3, max_len=5, rng=rng)
    return random_inputs(g, lens, rng), lens, random_params(g, rng)


@pytest.mark.parametrize("model", ["elman.py", "greedy_decoder.py", "beam_search.py"])
def test_steps_agree_with_the_module(model):
    """forward_step's outputs (a search's for beam_search) with the dims and lengths the module
    gives, and train_step's losses."""
    g = compile_graph(str(EXAMPLES / model))
    inputs, lens, params = _batch(g)
    got = run_returnn_torch(g, inputs, lens, params)
    searching = model == "beam_search.py"
    want = run_torch(g, inputs, lens, params, search=searching)
    if searching:  # the losses come from training
        want.outputs.update({k: v for k, v in run_torch(g, inputs, lens, params).outputs.items() if k == "ce"})
    assert got.outputs.keys() == want.outputs.keys()
    for name, value in want.outputs.items():
        np.testing.assert_allclose(got.outputs[name], value, atol=1e-6, err_msg=name)
        want_lens = want.lens.get(name, {})  # a loss has none
        assert {d: v.tolist() for d, v in got.lens[name].items()} == {d: v.tolist() for d, v in want_lens.items()}


def _tf_loss_norms(g, inputs, lens) -> dict[str, float]:
    """The frames RETURNN's TF engine divides each `as_is` loss of the TF config by (its
    normalisation factor's inverse), on the same batch."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tf.network import TFNetwork

    tf.compat.v1.disable_eager_execution()
    cfg = Config()
    cfg.update(runpy.run_path(_write(emit_returnn(g))))
    with tf.Graph().as_default() as graph:
        net = TFNetwork(config=cfg, train_flag=False, eval_flag=True)
        net.construct_from_dict(cfg.typed_value("network"))
        holders, _, _ = net.get_losses_initialized()
        fetch = {loss.name: holders[loss.name].get_norm_factor() for loss in g.losses}
        feed = {net.extern_data.data["x"].placeholder: inputs["x"]}
        feed[cfg.typed_value("dim_time").dyn_size_ext.placeholder] = lens["time"].astype(np.int32)
        with tf.compat.v1.Session(graph=graph) as session:
            net.initialize_params(session)
            return {k: 1.0 / float(v) for k, v in session.run(fetch, feed_dict=feed).items()}


def _write(text: str) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    return f.name


def test_losses_are_normalised_as_the_tf_engine_normalises_as_is_losses(tmp_path):
    path = tmp_path / "losses.py"
    path.write_text(LOSSES)
    g = compile_graph(str(path))
    inputs, lens, params = _batch(g)
    found = run_entry_points(emit_returnn_torch(g), returnn_batch(g, inputs, lens), params)
    frames, seqs = float(lens["time"].sum()), float(len(lens["time"]))
    assert found.norms == {"frames_features": frames, "frames": frames, "per_seq_features": seqs, "per_seq": seqs}
    assert _tf_loss_norms(g, inputs, lens) == pytest.approx(found.norms, rel=1e-6)
    # the losses themselves are the module's (summed), the time-major input permuted on the way in
    want = run_torch(g, inputs, lens, params).outputs
    for loss in g.losses:
        np.testing.assert_allclose(found.losses[loss.name], want[loss.name], rtol=1e-6)
    np.testing.assert_allclose(found.outputs["h"], want["h"], atol=1e-6)


@pytest.mark.parametrize(
    "body, where, message",
    [
        (
            "@network\ndef two(x: Tensor[batch, time, Dim('other'), feat]):\n    return {'y': x}\n",
            "m.py:9:9",
            "returnn-torch target: input `x` has 2 dynamic dims (time, other); "
            "RETURNN's PyTorch data pipeline gives an input one",
        ),
        (
            """@network
def made(x: Tensor[batch, time, feat]):
    h = reduce_sum(x, axis=time)
    ys = []
    for _ in range(3):
        h = tanh(Linear(feat)(h))
        ys.append(h)
        if end(argmax(h, axis=feat) == 0):
            break
    mark_as_loss(ys, "l")
    return {"h": h}
""",
            "m.py:17:5",
            "returnn-torch target: loss `l` is summed over the frames of `ys_time`, which a loop makes",
        ),
    ],
)
def test_what_the_config_cannot_feed_or_normalise_is_a_located_error(tmp_path, body, where, message):
    path = tmp_path / "m.py"
    path.write_text(HEAD + "\n\n" + body)
    proc = run_netc("compile", "m.py", "--target", "returnn-torch", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"{where}: error: {message}"), proc.stderr


def test_train_step_of_a_model_without_loss_says_so():
    g = compile_graph(str(EXAMPLES / "elman.py"))
    config = runpy.run_path(_write(emit_returnn_torch(g)))
    with pytest.raises(ValueError, match="network elman has no loss \\(mark_as_loss\\): there is nothing to train"):
        config["train_step"](model=config["get_model"](epoch=1, step=0), extern_data=None)


def test_a_project_declares_the_target_and_check_construct_runs_it(tmp_path):
    (tmp_path / "models").mkdir()
    for name in ("elman", "broken"):
        shutil.copy(EXAMPLES / "elman.py", tmp_path / "models" / f"{name}.py")
    (tmp_path / "base.py").write_text("#!rnn.py\nnum_epochs = 3\n")
    (tmp_path / "broken_base.py").write_text('raise RuntimeError("no data set here")\n')
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.netc.models]]\nsource = "models/elman.py"\nreturnn-torch = "gen/elman.config"\nbase-config = "base.py"\n'
        '[[tool.netc.models]]\nsource = "models/broken.py"\nreturnn-torch = "gen/broken.config"\n'
        'base-config = "broken_base.py"\n'
    )
    run_netc("compile", "--all", cwd=tmp_path, check=True)
    text = (tmp_path / "gen" / "elman.config").read_text()
    assert (
        text.startswith("#!rnn.py\n# --- settings from base.py ---\nnum_epochs = 3\n") and 'backend = "torch"' in text
    )
    proc = run_netc("check", "--construct", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    report = {m["source"]: m for m in json.loads(proc.stdout)["models"]}
    assert [(t["target"], t["construct"]) for t in report["models/elman.py"]["targets"]] == [("returnn-torch", "ok")]
    broken = report["models/broken.py"]
    assert broken["targets"][0]["construct"] == "failed"
    problem = broken["problems"][0]
    assert problem["file"] == "gen/broken.config" and "RETURNN (PyTorch) could not run the config" in problem["message"]
    assert "no data set here" in problem["detail"]


def test_a_base_config_keeps_its_forward_callback(tmp_path):
    """netc's definitions win over the base's, except `forward_callback`: NetcForwardCallback is
    only the default."""
    model = EXAMPLES / "elman.py"
    for base_text, expected in [
        ("#!rnn.py\nforward_callback = 'mine'\nget_model = None\n", "mine"),
        ("#!rnn.py\nnum_epochs = 1\n", "NetcForwardCallback"),
    ]:
        base = tmp_path / "base.py"
        base.write_text(base_text)
        out = tmp_path / "cfg.py"
        run_netc("compile", model, "--target", "returnn-torch", "--base-config", base, "-o", out, check=True)
        config = runpy.run_path(str(out))
        callback = config["forward_callback"]
        assert (callback if isinstance(callback, str) else callback.__name__) == expected
        assert callable(config["get_model"]) and config["backend"] == "torch"
