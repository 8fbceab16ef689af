"""The nn ops (netc/ops/nn.py): every model in tests/models verifies through the real
`netc verify` (eager = torch = RETURNN), and the numbers are checked against hand-written
numpy where they matter.

TensorFlow is imported once per test process; each test builds its own graph.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import returnn_variables

from netc.compiler import compile_graph
from netc.emit_tf.emitter import emit_returnn
from netc.ir.uses import values_by_id
from netc_runtime.backends import _import_file, load_torch_module, run_eager, run_returnn, run_torch
from netc_runtime.verify import random_inputs, random_lengths, random_params, valid_mask

MODELS_DIR = Path(__file__).resolve().parent / "models"
MODELS = sorted(p.name for p in MODELS_DIR.glob("ops_*.py"))


@pytest.mark.parametrize("model", MODELS)
def test_model_verifies(verify, model):
    proc = verify(MODELS_DIR / model, "--seed", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    rows = re.findall(r"(\w+)\s+eager vs (\w+)\s+max\|Δ\| = (\S+)\s+\((\d+) valid", proc.stdout)
    assert {b for _, b, _, _ in rows} == {"torch", "returnn"}
    for name, backend, diff, frames in rows:
        assert float(diff) <= 1e-4, (name, backend, diff)
        assert int(frames) > 0


def test_models_cover_every_nn_op():
    from netc.ops import nn

    ops = {c.fn_name for c in vars(nn).values() if isinstance(c, type) and getattr(c, "fn_name", None)}
    text = "".join((MODELS_DIR / m).read_text() for m in MODELS)
    for fn in ops:
        assert f"{fn}(" in text, fn


# --- helpers ---------------------------------------------------------------------------


def _model(name: str) -> str:
    return str(MODELS_DIR / name)


def _batch(g, seed=0, max_len=6):
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, 3, max_len, rng)
    return random_inputs(g, lens, rng), lens, random_params(g, rng)


def _all(name: str, seed=0):
    """(graph, inputs, lens, params, {backend: Result}) for one model."""
    path = _model(name)
    g = compile_graph(path)
    inputs, lens, params = _batch(g, seed)
    res = {
        "eager": run_eager(path, g, inputs, lens, params),
        "torch": run_torch(g, inputs, lens, params),
        "returnn": run_returnn(g, inputs, lens, params),
    }
    return g, inputs, lens, params, res


def _mask(g, res, name):
    out = res.outputs[name]
    return valid_mask(res.dims[name], res.lens[name], g, out.shape)


def _values(g):
    vals = values_by_id(g)
    return {o.name: vals[o.value] for o in g.outputs}


def _log_softmax(z, axis=-1):
    z = z - z.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


# --- parameter names -------------------------------------------------------------------


@pytest.mark.parametrize(
    "model,expected",
    [
        ("ops_embedding.py", {"e/W": ("vocab", "emb"), "steps/rec/lookup/W": ("vocab", "emb")}),
        ("ops_layer_norm.py", {"y/scale": ("hidden",), "y/bias": ("hidden",)}),
        ("ops_layer_norm_eps.py", {"y/scale": ("hidden",), "out/rec/h/scale": ("hidden",)}),
        (
            "ops_bias.py",
            {"pos_bias_u/b": ("heads", "head_feat"), "pos_bias_v/b": ("head_feat", "heads"), "out/rec/h/b": ("feat",)},
        ),
    ],
)
def test_param_names_are_returnn_variable_names(model, expected):
    """netc's parameters are exactly RETURNN's variables, by name and shape (no extra ones)."""
    g = compile_graph(_model(model))
    ours = {p.name: p.dims for p in g.params}
    for name, dims in expected.items():
        assert ours[name] == dims
    sizes = {d.name: d.size for d in g.dims}
    theirs, _, _ = returnn_variables(emit_returnn(g))
    assert set(theirs) == set(ours)
    for name, dims in ours.items():
        assert theirs[name] == tuple(sizes[d] for d in dims), name


# --- numbers by hand -------------------------------------------------------------------


def test_embedding_is_a_row_lookup():
    g, inputs, lens, params, res = _all("ops_embedding.py")
    want = params["e/W"][inputs["y"]]  # [batch, time, emb]
    for b, r in res.items():
        mask = _mask(g, r, "output")
        np.testing.assert_allclose(
            np.where(mask, r.outputs["output"], 0), np.where(mask, want, 0), atol=1e-6, err_msg=b
        )


def test_layer_norm_matches_returnn_formula():
    """(x - mean) / sqrt(var + 1e-6) * scale + bias, biased variance (RETURNN's layer_norm)."""
    g, inputs, lens, params, res = _all("ops_layer_norm.py")
    h = inputs["x"] @ params["lin/W"] + params["lin/b"]
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    want = (h - mean) / np.sqrt(var + 1e-6) * params["y/scale"] + params["y/bias"]
    for b, r in res.items():
        mask = _mask(g, r, "output")
        np.testing.assert_allclose(
            np.where(mask, r.outputs["output"], 0), np.where(mask, want, 0), atol=1e-5, err_msg=b
        )


def test_layer_norm_with_its_epsilon_and_without_bias():
    """(x - mean) / sqrt(var + eps) * scale: `LayerNorm(eps=0.5, with_bias=False)` (RETURNN's `norm`)."""
    g, inputs, lens, params, res = _all("ops_layer_norm_eps.py")
    assert "y/bias" not in params
    h = inputs["x"] @ params["lin/W"] + params["lin/b"]
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    want = (h - mean) / np.sqrt(var + 0.5) * params["y/scale"]
    for b, r in res.items():
        mask = _mask(g, r, "output")
        np.testing.assert_allclose(
            np.where(mask, r.outputs["output"], 0), np.where(mask, want, 0), atol=1e-5, err_msg=b
        )


def test_cross_entropy_is_minus_log_softmax_at_the_label():
    g, inputs, lens, params, res = _all("ops_cross_entropy.py")
    x, y = inputs["x"].astype(np.float64), inputs["y"]
    for out, prefix in (("output", "logits"), ("rnn", "losses/rec/step_logits")):
        logp = _log_softmax(x @ params[f"{prefix}/W"] + params[f"{prefix}/b"])
        want = -np.take_along_axis(logp, y[..., None].astype(np.int64), axis=-1)[..., 0]
        assert want.shape == y.shape
        for b, r in res.items():
            assert r.dims[out] == ["batch", "time"]
            mask = _mask(g, r, out)
            got = r.outputs[out]
            assert np.isfinite(got).all(), (b, out)  # padded frames too
            np.testing.assert_allclose(np.where(mask, got, 0), np.where(mask, want, 0), atol=1e-5, err_msg=b)


def test_cross_entropy_torch_survives_garbage_padded_labels():
    """Padded label values out of range do not crash the torch module."""
    path = _model("ops_cross_entropy.py")
    g = compile_graph(path)
    inputs, lens, params = _batch(g)
    mask = valid_mask(["batch", "time"], lens, g, inputs["y"].shape)
    inputs["y"] = np.where(mask, inputs["y"], 1000).astype(np.int32)
    ref = run_torch(g, *_batch(g)[:2], params)  # same seed: same valid labels
    got = run_torch(g, inputs, lens, params)
    np.testing.assert_allclose(np.where(mask, got.outputs["output"], 0), np.where(mask, ref.outputs["output"], 0))


def test_argmax_gives_labels():
    g, inputs, lens, params, res = _all("ops_argmax.py")
    vals = _values(g)
    assert (vals["output"].dtype, vals["output"].sparse_dim, vals["output"].dims) == (
        "int32",
        "vocab",
        ("batch", "time"),
    )
    assert (vals["frame"].dtype, vals["frame"].sparse_dim, vals["frame"].dims) == ("int32", "time", ("batch", "feat"))
    logits = inputs["x"] @ params["logits/W"] + params["logits/b"]
    want_best = logits.argmax(-1)
    x = inputs["x"]
    t_mask = valid_mask(["batch", "time", "feat"], lens, g, x.shape)
    want_frame = np.where(t_mask, x, -np.inf).argmax(1)  # only valid frames compete
    for b, r in res.items():
        assert np.issubdtype(r.outputs["output"].dtype, np.integer), (b, r.outputs["output"].dtype)
        mask = _mask(g, r, "output")
        np.testing.assert_array_equal(np.where(mask, r.outputs["output"], 0), np.where(mask, want_best, 0))
        np.testing.assert_array_equal(r.outputs["frame"], want_frame)
    assert res["returnn"].outputs["output"].dtype == np.int32
    assert res["torch"].outputs["output"].dtype == np.int64  # torch holds labels as long


def test_where_broadcasts_by_dim_union():
    g, inputs, lens, params, res = _all("ops_where.py")
    x = inputs["x"]
    t_mask = valid_mask(["batch", "time", "feat"], lens, g, x.shape)
    total = np.where(t_mask, x, 0).sum(1)  # [batch, feat]
    per_frame = x.sum(-1) > 0
    want = {
        "output": np.where(x > 0, x, -x),
        "union": np.where(per_frame[:, :, None], x, total[:, None, :]),
        "scalar": np.where(x > 0, x, 0.0),
        "numbers": np.where(per_frame, 1.0, -1.0),
    }
    for b, r in res.items():
        for name, w in want.items():
            mask = _mask(g, r, name)
            np.testing.assert_allclose(
                np.where(mask, r.outputs[name], 0), np.where(mask, w, 0), atol=1e-5, err_msg=f"{b} {name}"
            )


def test_mask_inf_is_minus_inf_where_the_condition_holds():
    g, inputs, lens, params, res = _all("ops_mask_inf.py")
    x = inputs["x"].astype(np.float64)
    scores = _log_softmax(x)
    best = scores[..., 1:].max(-1)
    want = {
        "output": np.concatenate(
            [np.where(scores[..., :1] < best[..., None] * 1.5, -np.inf, scores[..., :1]), scores[..., 1:]], -1
        ),
        "best_other": best,
        "below": np.where(x < 0.0, -np.inf, x),
    }
    for b, r in res.items():
        for name, w in want.items():
            mask = _mask(g, r, name)
            got = np.where(mask, r.outputs[name], 0.0)
            np.testing.assert_array_equal(np.isneginf(got), np.isneginf(np.where(mask, w, 0.0)), err_msg=f"{b} {name}")
            fin = np.isfinite(got)
            np.testing.assert_allclose(got[fin], np.where(mask, w, 0.0)[fin], atol=1e-5, err_msg=f"{b} {name}")
    eos = res["eager"].outputs["output"][..., 0][_mask(g, res["eager"], "best_other")]
    assert np.isneginf(eos).any() and np.isfinite(eos).any()  # the threshold both ways


def test_floordiv_and_mod_are_tfs_floor_division():
    g, inputs, lens, params, res = _all("ops_floordiv.py")
    y = inputs["y"].astype(np.int64)
    want = {  # Python's (numpy's) // and % floor, as TF's floordiv and floormod
        "output": y,
        "phoneme": y // 3,
        "state": y % 3,
        "negative": (y - 7) // 4 + 10 * ((y - 7) % 4),
        "by_tensor": (y - 5) // (y % 4 + 1) + 10 * ((5 - y) % (y % 3 + 1)),
    }
    assert (want["negative"] < 0).any()
    for b, r in res.items():
        for name, w in want.items():
            mask = _mask(g, r, name)
            np.testing.assert_array_equal(
                np.where(mask, r.outputs[name], 0), np.where(mask, w, 0), err_msg=f"{b} {name}"
            )
    vals = _values(g)
    assert vals["phoneme"].sparse_dim == "phon" and vals["negative"].sparse_dim is None


def test_cast_truncates_and_keeps_dtypes():
    g, inputs, lens, params, res = _all("ops_cast.py")
    vals = _values(g)
    assert vals["int"].dtype == "int32" and vals["bool"].dtype == "bool"
    assert vals["labels"].dtype == "float32" and vals["labels"].sparse_dim is None
    assert vals["labels_int"].sparse_dim == "vocab"
    want_int = np.trunc(inputs["x"] * np.float32(3.0))
    for b, r in res.items():
        mask = _mask(g, r, "int")
        np.testing.assert_array_equal(np.where(mask, r.outputs["int"], 0), np.where(mask, want_int, 0))
        np.testing.assert_array_equal(np.where(mask, r.outputs["bool"], False), mask & (want_int != 0))
        assert r.outputs["bool"].dtype == np.bool_, b


# --- dropout ---------------------------------------------------------------------------


def test_dropout_is_identity_in_eval_on_all_backends():
    g, inputs, lens, params, res = _all("ops_dropout.py")
    for b, r in res.items():
        mask = _mask(g, r, "output")
        np.testing.assert_array_equal(np.where(mask, r.outputs["output"], 0), np.where(mask, inputs["x"], 0), err_msg=b)


def _check_dropped(y: np.ndarray, x: np.ndarray, p: float) -> None:
    dropped = y == 0
    assert 0.1 < dropped.mean() < 0.5, dropped.mean()  # p = 0.3 on many values
    np.testing.assert_allclose(y[~dropped], x[~dropped] / (1 - p), rtol=1e-5)
    assert not np.array_equal(dropped[0], dropped[1])  # an elementwise mask, not shared over batch


def _ones_batch(g, time=40):
    return {"x": np.ones((3, time, 4), np.float32)}, {"time": np.array([time] * 3)}


def test_dropout_torch_active_only_in_training():
    g = compile_graph(_model("ops_dropout.py"))
    model = load_torch_module(g).Model()
    inputs, lens = _ones_batch(g)
    args = {"x": torch.as_tensor(inputs["x"]), "time_lens": torch.as_tensor(lens["time"])}
    with torch.no_grad():
        model.train()
        y = model(**args)["output"].numpy()
        model.eval()
        y_eval = model(**args)["output"].numpy()
    _check_dropped(y, inputs["x"], 0.3)
    np.testing.assert_array_equal(y_eval, inputs["x"])


def test_dropout_eager_active_only_in_training():
    net = _import_file(_model("ops_dropout.py"), "ops_dropout").drop
    g = net.graph
    inputs, lens = _ones_batch(g)
    args = {"x": torch.as_tensor(inputs["x"]), "time_lens": torch.as_tensor(lens["time"])}
    y = net.train()(**args)["output"].numpy()
    y_eval = net.eval()(**args)["output"].numpy()
    _check_dropped(y, inputs["x"], 0.3)
    np.testing.assert_array_equal(y_eval, inputs["x"])


def test_dropout_returnn_active_only_in_training():
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tf.network import TFNetwork

    g = compile_graph(_model("ops_dropout.py"))
    inputs, lens = _ones_batch(g)
    tf.compat.v1.disable_eager_execution()
    with tempfile.NamedTemporaryFile("w", suffix=".config.py", delete=False) as f:
        f.write(emit_returnn(g))
    cfg = Config()
    cfg.load_file(f.name)
    outs = {}
    for train in (True, False):
        with tf.Graph().as_default():
            net = TFNetwork(config=cfg, train_flag=train)
            net.construct_from_dict(cfg.typed_value("network"))
            x = net.extern_data.data["x"]
            feed = {x.placeholder: inputs["x"], x.get_sequence_lengths(): lens["time"].astype(np.int32)}
            with tf.compat.v1.Session() as s:
                net.initialize_params(s)
                outs[train] = s.run(net.get_layer("output").output.placeholder, feed)
    _check_dropped(outs[True], inputs["x"], 0.3)
    np.testing.assert_array_equal(outs[False], inputs["x"])


@pytest.mark.parametrize("labels", [[], [2], [1, 1]])
def test_eager_ctc_is_torchs_also_without_labels(labels):
    """Eager's CTC forward algorithm gives torch's loss, also for a sequence of no labels (a search's
    transducer that emitted nothing: its masked labels, the CTC target, are empty; only blanks)."""
    from netc.ops.losses import ctc_neg_log_prob

    logp = torch.log_softmax(torch.randn(5, 4, generator=torch.Generator().manual_seed(0)), dim=-1)
    ours = ctc_neg_log_prob(logp, labels)
    theirs = torch.nn.functional.ctc_loss(
        logp[:, None], torch.tensor([labels], dtype=torch.long), [5], [len(labels)], blank=3, reduction="none"
    )
    assert abs(float(ours) - float(theirs[0])) < 1e-5, (float(ours), float(theirs[0]))
