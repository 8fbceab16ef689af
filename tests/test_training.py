"""Real training on both targets: RETURNN from the command line with a merged base config, the
emitted torch module with a plain Adam loop; dropout active only in training; `--base-config`.

The RETURNN run is the user's flow, as subprocesses in a tmp dir:
    netc compile examples/attention.py --target returnn --base-config examples/training/attention_base_config.py -o train.config
    python -m returnn train.config
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, run_netc

from netc.compiler import compile_graph
from netc_runtime.backends import run_returnn
from netc_runtime.checkpoint import read_tf_checkpoint

ATTENTION = EXAMPLES / "attention.py"
BASE_CONFIG = EXAMPLES / "training" / "attention_base_config.py"
DROPOUT = Path(__file__).resolve().parent / "models" / "train_dropout.py"
NUM_EPOCHS = 5  # num_epochs in the base config


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _training_data() -> list[dict[str, np.ndarray]]:
    """The sequences the base config trains RETURNN on (the config is plain Python)."""
    return runpy.run_path(str(BASE_CONFIG))["train"]["data"]


# --- RETURNN: python -m returnn train.config -----------------------------------------------


@pytest.fixture(scope="module")
def returnn_run(tmp_path_factory):
    """Compile with the base config and train with RETURNN's own entry point; (dir, stdout)."""
    work = tmp_path_factory.mktemp("returnn_train")
    compile_args = ("compile", ATTENTION, "--target", "returnn", "--base-config", BASE_CONFIG, "-o", "train.config")
    run_netc(*compile_args, cwd=work, check=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, "-m", "returnn", "train.config"]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work, proc.stdout


def _epoch_scores(stdout: str) -> list[float]:
    return [float(s) for s in re.findall(r"^epoch \d+ score: (\S+) ", stdout, re.M)]


def test_returnn_training_loss_falls(returnn_run):
    work, stdout = returnn_run
    scores = _epoch_scores(stdout)
    assert len(scores) == NUM_EPOCHS, stdout[-3000:]
    print("RETURNN train score per epoch:", scores)
    # the score is the summed loss divided by the frames: it starts near ln(12) for 12 classes
    assert abs(scores[0] - math.log(12)) < 0.3, scores
    assert scores[-1] < 0.95 * scores[0], scores
    assert all(b < a for a, b in zip(scores, scores[1:])), scores
    # the same numbers in RETURNN's learning-rate-control file
    lr_file = (work / "net-model" / "learning_rates").read_text()
    assert [float(s) for s in re.findall(r"'train_score': ([^,]+),", lr_file)] == pytest.approx(scores)
    assert "Finished training in epoch 5." in stdout


def test_returnn_checkpoint_has_the_model_parameters(returnn_run):
    work, _ = returnn_run
    for epoch in range(1, NUM_EPOCHS + 1):
        assert (work / "net-model" / f"network.{epoch:03d}.index").exists()
    ckpt = read_tf_checkpoint(str(work / "net-model" / f"network.{NUM_EPOCHS:03d}"))
    g = compile_graph(str(ATTENTION))
    assert set(ckpt) == {p.name for p in g.params}
    shapes = {p.name: tuple(g.dim(d).size for d in p.dims) for p in g.params}
    assert {k: v.shape for k, v in ckpt.items()} == shapes


def test_returnn_checkpoint_runs_in_the_torch_module(returnn_run, tmp_path):
    """Trained with RETURNN, loaded by variable name into the emitted torch module: the
    trained parameters give a lower loss on the training data than fresh ones."""
    work, _ = returnn_run
    path = tmp_path / "attention_torch.py"
    run_netc("compile", ATTENTION, "--target", "torch", "-o", path, check=True)
    mod = _import(path, "attention_torch_ckpt")
    batches = list(_batches(_training_data(), 16))
    torch.manual_seed(0)
    model = mod.Model().eval()
    fresh = _data_loss(model, batches)
    model.load_returnn_params(read_tf_checkpoint(str(work / "net-model" / f"network.{NUM_EPOCHS:03d}")))
    trained = _data_loss(model, batches)
    print(f"torch loss per frame on the training data: fresh {fresh:.4f}, RETURNN-trained {trained:.4f}")
    assert trained < 0.95 * fresh


def test_returnn_training_updates_every_parameter(returnn_run):
    """Parameters of layers inside a rec unit are named under `<rec>/rec/` (the returnn_names
    pass), so RETURNN's RecLayer owns and trains them."""
    work, _ = returnn_run
    first = read_tf_checkpoint(str(work / "net-model" / "network.001"))
    last = read_tf_checkpoint(str(work / "net-model" / f"network.{NUM_EPOCHS:03d}"))
    frozen = sorted(k for k in first if np.array_equal(first[k], last[k]))
    assert not frozen, f"not updated by training: {frozen}"


# --- torch: a plain training loop ------------------------------------------------------------


def _batches(seqs, size: int):
    """Padded batches as the emitted forward takes them (int64 lengths per dynamic dim)."""
    for i in range(0, len(seqs), size):
        chunk = seqs[i : i + size]
        enc = [len(s["x"]) for s in chunk]
        dec = [len(s["y"]) for s in chunk]
        x = np.zeros((len(chunk), max(enc), chunk[0]["x"].shape[1]), dtype=np.float32)
        y = np.zeros((len(chunk), max(dec)), dtype=np.int64)
        for b, s in enumerate(chunk):
            x[b, : enc[b]] = s["x"]
            y[b, : dec[b]] = s["y"]
        yield {
            "x": torch.from_numpy(x),
            "y": torch.from_numpy(y),
            "enc_time_lens": torch.tensor(enc, dtype=torch.int64),
            "dec_time_lens": torch.tensor(dec, dtype=torch.int64),
        }


def _data_loss(model, batches) -> float:
    """Loss per frame over all batches (the way RETURNN reports its score)."""
    with torch.no_grad():
        total = sum(float(model(**b)["ce"]) for b in batches)
    return total / sum(int(b["dec_time_lens"].sum()) for b in batches)


def test_torch_training_loss_falls(tmp_path):
    path = tmp_path / "attention_torch.py"
    run_netc("compile", ATTENTION, "--target", "torch", "-o", path, check=True)
    mod = _import(path, "attention_torch_train")
    assert mod.Model.losses == ["ce"]
    batches = list(_batches(_training_data(), 16))  # 64 sequences: 4 batches
    torch.manual_seed(0)
    model = mod.Model()
    model.train()
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for step in range(40):  # 10 passes over the data
        b = batches[step % len(batches)]
        loss = model(**b)["ce"] / b["dec_time_lens"].sum()  # summed over valid frames -> per frame
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = np.mean(losses[:4]), np.mean(losses[-4:])
    print(f"torch loss per frame: first pass {first:.4f}, last pass {last:.4f}")
    assert abs(first - math.log(12)) < 0.3
    assert last < 0.5 * first, losses
    assert all(not torch.equal(before[k], v) for k, v in model.named_parameters())


# --- dropout: only in training ---------------------------------------------------------------


def _dropout_batch():
    rng = np.random.default_rng(0)
    lens = np.array([5, 3], dtype=np.int64)
    x = (rng.normal(size=(2, 5, 6)) + 3.0).astype(np.float32)  # no zeros in x
    y = rng.integers(0, 4, size=(2, 5)).astype(np.int64)
    return x, y, lens


def _padded_zero(x: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """x as outputs hold it: zeros in padded frames."""
    return np.where(np.arange(x.shape[1])[None, :, None] < lens[:, None, None], x, 0.0).astype(x.dtype)


def _assert_dropped(dropped: np.ndarray, x: np.ndarray, rate: float = 0.5):
    """Each value is 0 or x / (1 - rate), and both occur."""
    zero = dropped == 0
    assert zero.any() and (~zero).any()
    np.testing.assert_allclose(dropped[~zero], x[~zero] / (1 - rate), rtol=1e-6)


def test_torch_dropout_only_in_training(tmp_path):
    path = tmp_path / "train_dropout_torch.py"
    run_netc("compile", DROPOUT, "--target", "torch", "-o", path, check=True)
    mod = _import(path, "train_dropout_torch")
    x, y, lens = _dropout_batch()
    args = {"x": torch.from_numpy(x), "y": torch.from_numpy(y), "time_lens": torch.from_numpy(lens)}
    torch.manual_seed(0)
    model = mod.Model()
    with torch.no_grad():
        model.train()
        a, b = model(**args), model(**args)
        for name in ("dropped", "logits", "ce"):
            assert not torch.equal(a[name], b[name]), name
        _assert_dropped(a["dropped"].numpy(), x)
        model.eval()
        c, d = model(**args), model(**args)
        for name in ("dropped", "logits", "ce"):
            assert torch.equal(c[name], d[name]), name
        assert torch.equal(c["dropped"], torch.from_numpy(_padded_zero(x, lens)))


def _returnn_twice(config_text: str, tmp_path: Path, train_flag: bool, x, y, lens):
    """Build the RETURNN network once and run it twice on the same batch in one session."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.log import log
    from returnn.tensor import batch_dim
    from returnn.tf.network import TFNetwork

    tf.compat.v1.disable_eager_execution()
    log.initialize(verbosity=[0])
    path = tmp_path / f"dropout_{train_flag}.config"
    path.write_text(config_text)
    cfg = Config()
    cfg.load_file(str(path))
    time_dim, feat, vocab = (cfg.typed_value(f"dim_{d}") for d in ("time", "feat", "vocab"))
    with tf.Graph().as_default() as graph:
        net = TFNetwork(config=cfg, train_flag=train_flag, eval_flag=True)
        net.construct_from_dict(cfg.typed_value("network"))
        fetch = {
            "dropped": net.get_layer("dropped").output.copy_transpose([batch_dim, time_dim, feat]).placeholder,
            "logits": net.get_layer("logits").output.copy_transpose([batch_dim, time_dim, vocab]).placeholder,
            "ce": net.get_total_loss(),
        }
        feed = {
            net.extern_data.data["x"].placeholder: x,
            net.extern_data.data["y"].placeholder: y.astype(np.int32),
            time_dim.dyn_size_ext.placeholder: lens.astype(np.int32),
        }
        with tf.compat.v1.Session(graph=graph) as session:
            net.initialize_params(session)
            return session.run(fetch, feed_dict=feed), session.run(fetch, feed_dict=feed)


def test_returnn_dropout_only_in_training(tmp_path):
    proc = run_netc("compile", DROPOUT, "--target", "returnn", check=True)
    x, y, lens = _dropout_batch()
    a, b = _returnn_twice(proc.stdout, tmp_path, True, x, y, lens)
    for name in ("dropped", "logits", "ce"):
        assert not np.array_equal(a[name], b[name]), name
    _assert_dropped(a["dropped"], x)
    c, d = _returnn_twice(proc.stdout, tmp_path, False, x, y, lens)
    for name in ("dropped", "logits", "ce"):
        assert np.array_equal(c[name], d[name]), name
    np.testing.assert_array_equal(c["dropped"], x)


def test_run_returnn_train_flag():
    """netc's own RETURNN runner: `train_flag=True` drops, the default evaluates.
    The masks come from RETURNN's seeded random state, so two fresh builds drop the same values."""
    g = compile_graph(str(DROPOUT))
    x, y, lens = _dropout_batch()
    inputs, lengths = {"x": x, "y": y.astype(np.int32)}, {"time": lens}
    train = run_returnn(g, inputs, lengths, {}, train_flag=True)
    again = run_returnn(g, inputs, lengths, {}, train_flag=True)
    evaluated = run_returnn(g, inputs, lengths, {})
    _assert_dropped(train.outputs["dropped"], x)
    np.testing.assert_array_equal(train.outputs["dropped"], again.outputs["dropped"])
    np.testing.assert_array_equal(evaluated.outputs["dropped"], _padded_zero(x, lens))
    assert train.outputs["ce"] != evaluated.outputs["ce"]


# --- netc compile --base-config --------------------------------------------------------------


def _load_config(path: Path):
    from returnn.config import Config

    cfg = Config()
    cfg.load_file(str(path))
    return cfg


def test_base_config_merge_loads_in_returnn(tmp_path):
    out = tmp_path / "train.config"
    run_netc("compile", ATTENTION, "--target", "returnn", "--base-config", BASE_CONFIG, "-o", out, check=True)
    text = out.read_text()
    assert text.startswith("#!rnn.py\n") and text.count("#!rnn.py") == 1
    cfg = _load_config(out)
    # the base's settings
    assert cfg.bool("use_tensorflow", False) and cfg.value("task", None) == "train"
    assert cfg.int("batch_size", 0) == 200 and cfg.int("max_seqs", 0) == 16
    assert cfg.int("num_epochs", 0) == NUM_EPOCHS and cfg.float("learning_rate", 0) == 0.01
    assert cfg.typed_value("optimizer") == {"class": "adam"}
    assert cfg.value("model", None) == "net-model/network"
    train = cfg.typed_value("train")
    assert train["class"] == "StaticDataset" and len(train["data"]) == 64
    # netc's network and extern_data, with the dims the dataset must match
    network, extern_data = cfg.typed_value("network"), cfg.typed_value("extern_data")
    assert set(extern_data) == {"x", "y"}
    assert network["ce"]["class"] == "sparse_softmax_cross_entropy_with_logits" and network["ce"]["loss"] == "as_is"
    assert network["logits"]["class"] == "rec"  # the loop, named after the list it stacks
    assert extern_data["x"]["dim_tags"][2].dimension == train["output_dim"]["x"][0] == 10
    assert extern_data["y"]["sparse_dim"].dimension == train["output_dim"]["y"][0] == 12
    for seq in train["data"]:
        assert seq["x"].dtype == np.float32 and seq["x"].ndim == 2 and seq["x"].shape[1] == 10
        assert seq["y"].dtype == np.int32 and seq["y"].ndim == 1 and seq["y"].max() < 12
    assert len({len(s["x"]) for s in train["data"]}) > 1 and len({len(s["y"]) for s in train["data"]}) > 1


def test_base_config_cannot_override_netc_definitions(tmp_path):
    """The base runs first: its `network`/`extern_data`/dims are replaced by netc's, every other
    setting stays."""
    base = tmp_path / "base.py"
    base.write_text('#!rnn.py\nnetwork = {"bogus": {}}\nextern_data = {}\ndim_feat = None\nnum_epochs = 3\n')
    out = tmp_path / "merged.config"
    run_netc("compile", ATTENTION, "--target", "returnn", "--base-config", base, "-o", out, check=True)
    cfg = _load_config(out)
    assert "bogus" not in cfg.typed_value("network") and "logits" in cfg.typed_value("network")
    assert set(cfg.typed_value("extern_data")) == {"x", "y"}
    assert cfg.typed_value("dim_feat").dimension == 10
    assert cfg.int("num_epochs", 0) == 3


def test_base_config_only_for_returnn(tmp_path):
    proc = run_netc("compile", ATTENTION, "--target", "torch", "--base-config", BASE_CONFIG)
    assert proc.returncode != 0
    assert "--base-config applies to --target returnn" in proc.stderr
