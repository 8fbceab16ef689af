"""RETURNN itself loads what netc emits: its own config loader, TFNetwork, real checkpoints.

TensorFlow is imported once per test process; each test builds its own graph.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES, example_network

from netc.compiler import compile_graph
from netc.emit_tf.emitter import emit_returnn
from netc_runtime.backends import load_torch_module, run_eager, run_returnn, run_torch
from netc_runtime.checkpoint import read_tf_checkpoint
from netc_runtime.verify import random_inputs, random_lengths, random_params

MODELS = sorted(p.name for p in EXAMPLES.glob("*.py"))


def _batch(g, seed=0):
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, 3, 6, rng)
    return random_inputs(g, lens, rng), lens, random_params(g, rng)


@pytest.mark.parametrize("model", MODELS)
def test_every_dim_is_declared_by_netc(model):
    """No dim is left for RETURNN to invent: every layer's dims are the config's own objects."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tensor import batch_dim
    from returnn.tf.native_op import OpMaker
    from returnn.tf.network import TFNetwork

    OpMaker.with_cuda = False  # as the runner does: `nativelstm2` compiles for the CPU
    g = compile_graph(str(EXAMPLES / model), network=example_network(EXAMPLES / model))
    cfg = Config()
    cfg.load_file(_write(emit_returnn(g)))
    declared = [batch_dim] + [v for k, v in cfg.typed_dict.items() if k.startswith("dim_")]
    tf.compat.v1.disable_eager_execution()
    with tf.Graph().as_default():
        net = TFNetwork(config=cfg, train_flag=False)
        net.construct_from_dict(cfg.typed_value("network"))
        folded = cfg.typed_value("netc_output_layers") or {}  # outputs that are a loss's layer
        for o in g.outputs:
            for tag in net.get_layer(folded.get(o.name, o.name)).output.dim_tags:
                assert any(tag is d for d in declared), (o.name, tag)


def _write(text: str) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    return f.name


@pytest.mark.parametrize("model", ["elman.py", "lstm.py"])
def test_checkpoint_moves_from_returnn_to_torch_and_eager(tmp_path, model):
    """Save a real RETURNN checkpoint, load it into the torch module and eager mode by name."""
    path = str(EXAMPLES / model)
    g = compile_graph(path)
    inputs, lens, params = _batch(g)
    prefix = str(tmp_path / "model")
    ret = run_returnn(g, inputs, lens, params, save_checkpoint=prefix)
    ckpt = read_tf_checkpoint(prefix)
    assert set(ckpt) == {p.name for p in g.params}
    for name, value in params.items():
        np.testing.assert_array_equal(ckpt[name], value)
    tor = run_torch(g, inputs, lens, ckpt)
    eag = run_eager(path, g, inputs, lens, ckpt)
    for o in g.outputs:
        mask = _valid(g, ret, o.name)
        for other in (tor, eag):
            diff = np.abs(ret.outputs[o.name] - other.outputs[o.name])[mask]
            assert diff.max() <= 1e-5


def _valid(g, res, name):
    dims = res.dims[name]
    out = res.outputs[name]
    mask = np.ones(out.shape, bool)
    for ax, d in enumerate(dims):
        if d in res.lens[name]:
            idx = np.arange(out.shape[ax]).reshape([-1 if i == ax else 1 for i in range(out.ndim)])
            lens = np.asarray(res.lens[name][d]).reshape([-1 if i == 0 else 1 for i in range(out.ndim)])
            mask &= idx < lens
    return mask


def test_torch_module_interface():
    g = compile_graph(str(EXAMPLES / "lstm.py"))
    mod = load_torch_module(g)
    import torch

    model = mod.Model()
    assert mod.Model is mod.Lstm
    assert model.output_dims == {"output": ["batch", "time", "dim"], "h": ["batch", "dim"], "c": ["batch", "dim"]}
    # both projections are called in the loop `ys` in the source: named under its scope wherever they run
    assert set(model.returnn_param_names) == {
        "ys/rec/cell/ff_linear/W",
        "ys/rec/cell/ff_linear/b",
        "ys/rec/cell/rec_linear/W",
    }
    # torch names follow the same hierarchy
    assert {n for n, _ in model.named_parameters()} == {"cell.ff_linear.W", "cell.ff_linear.b", "cell.rec_linear.W"}
    out = model(torch.randn(2, 5, 20), time_lens=torch.tensor([5, 3]))
    assert out["output"].shape == (2, 5, 16) and out["h"].shape == (2, 16)
    assert torch.all(out["output"][1, 3:] == 0)  # padded frames are zero
    with pytest.raises(KeyError):
        model.load_returnn_params({"ys/rec/nothing/W": np.zeros(3)})


def test_loaded_config_runs_like_torch(tmp_path, netc):
    """The config file written by the CLI, loaded by RETURNN's own loader, gives torch's numbers."""
    cfg = tmp_path / "cfg.py"
    netc("compile", EXAMPLES / "gru.py", "--target", "returnn", "-o", cfg, check=True)
    g = compile_graph(str(EXAMPLES / "gru.py"))
    inputs, lens, params = _batch(g, seed=3)
    ret = run_returnn(g, inputs, lens, params, config_text=cfg.read_text())
    tor = run_torch(g, inputs, lens, params)
    for o in g.outputs:
        mask = _valid(g, ret, o.name)
        assert np.abs(ret.outputs[o.name] - tor.outputs[o.name])[mask].max() <= 1e-5


TRAIN_MODE_MODELS = [EXAMPLES / "attention.py", EXAMPLES / "nested.py"] + [
    EXAMPLES.parent / "tests" / "models" / m
    for m in ("teacher_forced_enc_state.py", "whole_axis.py", "loop_over_made_dim.py", "stack_prev_state.py")
]


@pytest.mark.parametrize("path", TRAIN_MODE_MODELS, ids=lambda p: p.name)
def test_training_mode_construction_agrees(path):
    """RETURNN moves layers out of rec units when it builds a network for training; the numbers
    must not change (carried encoder-time states once failed there with a ConcatOp error)."""
    g = compile_graph(str(path))
    inputs, lens, params = _batch(g, seed=4)
    ref = run_eager(str(path), g, inputs, lens, params)
    ret = run_returnn(g, inputs, lens, params, train_flag=True)
    for o in g.outputs:
        mask = _valid(g, ref, o.name)
        assert np.abs(ret.outputs[o.name] - ref.outputs[o.name])[mask].max() <= 1e-4, o.name


def test_variables_are_assigned_a_piece_at_a_time():
    """`verify` feeds the parameters to TensorFlow's variables a run per piece of about a quarter
    gigabyte (a copy of them all at once is gigabytes for a large model): every variable gets its
    value whichever piece it is in."""
    import tensorflow as tf

    from netc_runtime.checkpoint import assign_in_pieces

    shapes = [(3, 4), (5,), (2, 2, 2), (7, 1)]
    values = [np.arange(np.prod(s), dtype=np.float32).reshape(s) + 100 * k for k, s in enumerate(shapes)]
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        variables = [tf.compat.v1.Variable(tf.zeros(s)) for s in shapes]
        assign_in_pieces(session, list(zip(variables, values)), piece_bytes=40)  # 3 pieces: 48 bytes, 20 + 32, 28
        for var, want in zip(variables, values):
            np.testing.assert_array_equal(session.run(var), want)


def test_tf_checkpoint_holds_the_values_once(tmp_path):
    """`write_tf_checkpoint` feeds the values to its variables: as graph constants they were a
    second copy in memory and in the `.meta` file, and TF refuses a graph over 2 GB."""
    import tensorflow as tf

    from netc_runtime.checkpoint import read_tf_checkpoint, write_tf_checkpoint

    rng = np.random.default_rng(0)
    params = {"big/W": rng.standard_normal((1000, 1000)).astype(np.float32), "out/b": np.arange(3.0)}
    prefix = tmp_path / "net-model" / "network.004"
    write_tf_checkpoint(params, str(prefix), global_step=17)
    back = read_tf_checkpoint(str(prefix))
    assert back.keys() == params.keys()
    for name, value in params.items():
        np.testing.assert_array_equal(back[name], value.astype(np.float32))
    assert tf.train.load_checkpoint(str(prefix)).get_tensor("global_step") == 17
    meta = (tmp_path / "net-model" / "network.004.meta").stat().st_size
    assert meta < 100_000, f"the .meta file holds {meta} bytes: the values are in the graph"
