"""RETURNN's PyTorch backend with the `returnn-torch` config, and checkpoints between the engines,
as a user runs them (subprocesses in a tmp dir):

    netc compile examples/attention.py --target returnn-torch \
        --base-config examples/training/attention_base_config.py -o train.config
    python -m returnn train.config                                  # trains, net-model/network.NNN.pt
    python -m returnn train.config ++task forward ++load_epoch 5    # forward_step: forward.npz
    netc convert-checkpoint examples/attention.py net-model/network.005.pt -o tf-model/network.005
"""

from __future__ import annotations

import math
import os
import re
import runpy
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, run_netc

from netc.compiler import compile_graph
from netc_runtime.backends import load_torch_module, run_returnn, run_torch
from netc_runtime.checkpoint import convert_checkpoint, read_torch_checkpoint, torch_param_names

ATTENTION = EXAMPLES / "attention.py"
BASE_CONFIG = EXAMPLES / "training" / "attention_base_config.py"
BEAM = EXAMPLES / "beam_search.py"
BEAM_BASE_CONFIG = EXAMPLES / "training" / "beam_search_base_config.py"
EPOCHS = 5  # num_epochs in the base config
TOLERANCE = 1e-5


def returnn(work, config: str, *args: str) -> str:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, "-m", "returnn", config, *args]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def train_losses(lr_file) -> list[float]:
    """Per-epoch train loss of `ce` from RETURNN's learning-rate file (a Python-like dump)."""
    return [float(s) for s in re.findall(r"'train_loss_ce': ([^,]+),", lr_file.read_text())]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    work = tmp_path_factory.mktemp("returnn_torch")
    compile_args = ("--target", "returnn-torch", "--base-config", BASE_CONFIG, "-o", "train.config")
    run_netc("compile", ATTENTION, *compile_args, cwd=work, check=True)
    return work, returnn(work, "train.config")


def _padded(seqs) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A padded batch of the base config's sequences: inputs and lengths, as netc's runners take them."""
    enc = np.array([len(s["x"]) for s in seqs])
    dec = np.array([len(s["y"]) for s in seqs])
    x = np.zeros((len(seqs), enc.max(), 10), np.float32)
    y = np.zeros((len(seqs), dec.max()), np.int32)
    for b, s in enumerate(seqs):
        x[b, : enc[b]], y[b, : dec[b]] = s["x"], s["y"]
    return {"x": x, "y": y}, {"enc_time": enc, "dec_time": dec}


def _trained_module(work):
    """The plain emitted module with RETURNN's PyTorch checkpoint loaded as a state_dict."""
    g = compile_graph(str(ATTENTION))
    model = load_torch_module(g).Model().eval()
    model.load_state_dict(torch.load(work / "net-model" / f"network.{EPOCHS:03d}.pt")["model"])
    return model


def test_training_loss_falls_and_checkpoints_are_written(trained):
    work, stdout = trained
    losses = train_losses(work / "net-model" / "learning_rates")
    print("RETURNN (PyTorch) train loss per frame per epoch:", losses)
    assert len(losses) == EPOCHS, stdout[-3000:]
    # normalised like the TF config's `as_is` loss: per frame, so it starts near ln(12) for 12 classes
    assert abs(losses[0] - math.log(12)) < 0.3, losses
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.7 * losses[0], losses
    assert f"Finished training at epoch {EPOCHS}" in stdout
    for epoch in range(1, EPOCHS + 1):
        assert (work / "net-model" / f"network.{epoch:03d}.pt").is_file()
    # every parameter trained: the checkpoint of epoch 1 differs from the last in each
    first = torch.load(work / "net-model" / "network.001.pt")["model"]
    last = torch.load(work / "net-model" / f"network.{EPOCHS:03d}.pt")["model"]
    assert set(last) == set(torch_param_names(compile_graph(str(ATTENTION))).values())
    assert not [k for k in first if torch.equal(first[k], last[k])]


def test_forward_task_agrees_with_the_plain_module(trained):
    """`++task forward` runs the config's forward_step; the plain module with RETURNN's checkpoint
    loaded (`load_state_dict(torch.load(path)["model"])`) gives the same outputs."""
    work, _ = trained
    returnn(work, "train.config", "++task", "forward", "++load_epoch", str(EPOCHS))
    found = np.load(work / "forward.npz")
    seqs = runpy.run_path(str(BASE_CONFIG))["forward_data"]["data"]
    assert sorted(found.files) == sorted(f"seq-{i}/{o}" for i in range(len(seqs)) for o in ("output", "state"))
    model = _trained_module(work)
    inputs, lens = _padded(seqs)
    with torch.no_grad():
        out = model(
            **{k: torch.from_numpy(v) for k, v in inputs.items()},
            enc_time_lens=torch.from_numpy(lens["enc_time"]),
            dec_time_lens=torch.from_numpy(lens["dec_time"]),
        )
    for b in range(len(seqs)):
        n = lens["dec_time"][b]
        assert found[f"seq-{b}/output"].shape == (n, 12)  # padding cut off
        np.testing.assert_allclose(found[f"seq-{b}/output"], out["output"][b, :n].numpy(), atol=TOLERANCE)
        np.testing.assert_allclose(found[f"seq-{b}/state"], out["state"][b].numpy(), atol=TOLERANCE)


def test_torch_checkpoint_as_tf_checkpoint_reproduces_the_outputs(trained):
    """Trained on RETURNN's PyTorch backend, converted with `netc convert-checkpoint`, loaded by the
    RETURNN TF config with RETURNN's own loader: the same outputs and loss as the torch module."""
    work, _ = trained
    proc = run_netc(
        "convert-checkpoint",
        ATTENTION,
        f"net-model/network.{EPOCHS:03d}.pt",
        "-o",
        "tf-model/network.005",
        cwd=work,
        check=True,
    )
    assert proc.stdout == f"wrote tf-model/network.005: TF checkpoint, 12 parameters, global step {4 * EPOCHS}\n"
    for ext in (".index", ".meta", ".data-00000-of-00001"):  # what RETURNN's TF engine looks for
        assert (work / "tf-model" / f"network.005{ext}").is_file()
    g = compile_graph(str(ATTENTION))
    inputs, lens = _padded(runpy.run_path(str(BASE_CONFIG))["forward_data"]["data"])
    tf_out = run_returnn(g, inputs, lens, {}, load_checkpoint=str(work / "tf-model" / "network.005"))
    ckpt = read_torch_checkpoint(str(work / "net-model" / f"network.{EPOCHS:03d}.pt"))
    params = {name: ckpt.state[attr] for name, attr in torch_param_names(g).items()}
    torch_out = run_torch(g, inputs, lens, params)
    for name in ("output", "state", "ce"):
        diff = float(np.abs(tf_out.outputs[name] - torch_out.outputs[name]).max())
        print(f"{name}: RETURNN TF with the converted checkpoint vs torch max|Δ| = {diff:.3e}")
        assert diff <= TOLERANCE, name
    assert tf_out.outputs["ce"] > 0  # a real loss, not two empty sums


def test_tf_engine_continues_training_from_the_torch_checkpoint(trained, tmp_path):
    """The converted checkpoint where the TF config's `model` prefix expects it: RETURNN's TF engine
    finds it, loads it and trains on from epoch 6, its score continuing where PyTorch's left off."""
    work, _ = trained
    args = ("--target", "returnn", "--base-config", BASE_CONFIG, "-o", "train.config")
    run_netc("compile", ATTENTION, *args, cwd=tmp_path, check=True)
    src = work / "net-model" / f"network.{EPOCHS:03d}.pt"
    run_netc("convert-checkpoint", ATTENTION, src, "-o", f"net-model/network.{EPOCHS:03d}", cwd=tmp_path, check=True)
    stdout = returnn(tmp_path, "train.config", "++num_epochs", str(EPOCHS + 1))
    assert f"loading weights from net-model/network.{EPOCHS:03d}" in stdout
    scores = [float(s) for s in re.findall(rf"^epoch {EPOCHS + 1} score: (\S+) ", stdout, re.M)]
    torch_last = train_losses(work / "net-model" / "learning_rates")[-1]
    print(
        f"RETURNN TF epoch {EPOCHS + 1} from the PyTorch checkpoint: score {scores}; PyTorch's last: {torch_last:.4f}"
    )
    assert len(scores) == 1 and scores[0] < torch_last < 0.7 * math.log(12)


def test_tf_checkpoint_back_to_returnn_torch(trained, tmp_path):
    """TF → RETURNN's PyTorch format: the same arrays, epoch and step, and RETURNN loads the file."""
    work, _ = trained
    g = compile_graph(str(ATTENTION))
    original = work / "net-model" / f"network.{EPOCHS:03d}.pt"
    convert_checkpoint(g, str(original), str(tmp_path / "tf" / "network.005"))
    msg = convert_checkpoint(g, str(tmp_path / "tf" / "network.005"), str(work / "back" / "network.005.pt"))
    assert msg == f"wrote {work / 'back' / 'network.005.pt'}: PyTorch checkpoint, 12 parameters, step {4 * EPOCHS}"
    before, after = torch.load(original), torch.load(work / "back" / "network.005.pt")
    assert (after["epoch"], after["step"]) == (before["epoch"], before["step"]) == (EPOCHS, 4 * EPOCHS)
    assert after["model"].keys() == before["model"].keys()
    assert all(torch.equal(before["model"][k], after["model"][k]) for k in before["model"])
    returnn(
        work,
        "train.config",
        "++task",
        "forward",
        "++load",
        "back/network.005",
        "++netc_forward_output_file",
        "back.npz",
    )
    found = np.load(work / "back.npz")
    model = _trained_module(work)
    seqs = runpy.run_path(str(BASE_CONFIG))["forward_data"]["data"]
    for b, s in enumerate(seqs):
        with torch.no_grad():
            out = model(
                x=torch.from_numpy(s["x"])[None],
                y=torch.from_numpy(s["y"])[None],
                enc_time_lens=torch.tensor([len(s["x"])]),
                dec_time_lens=torch.tensor([len(s["y"])]),
            )
        np.testing.assert_allclose(found[f"seq-{b}/output"], out["output"][0].numpy(), atol=TOLERANCE)


@pytest.mark.parametrize(
    "args, message",
    [
        (("nothing", "-o", "x"), "error: nothing: no such file, nor a TF checkpoint (nothing.index)\n"),
        (("train.config", "-o", "x"), "error: train.config: not a PyTorch checkpoint"),
        ((f"net-model/network.{EPOCHS:03d}.pt", "-o", "x", "--network", "nope"), "no @network function named"),
    ],
)
def test_convert_checkpoint_mistakes(trained, args, message):
    work, _ = trained
    proc = run_netc("convert-checkpoint", ATTENTION, *args, cwd=work)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert message in proc.stderr


def test_convert_checkpoint_of_another_model(trained):
    work, _ = trained
    proc = run_netc(
        "convert-checkpoint", EXAMPLES / "elman.py", f"net-model/network.{EPOCHS:03d}.pt", "-o", "x", cwd=work
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"error: net-model/network.{EPOCHS:03d}.pt does not fit the model: missing h.W, h.b")
    assert "not parameters of the model: enc.W, enc.b" in proc.stderr
    assert not (work / "x.index").exists()


# --- a model with `choice`: forward_step searches --------------------------------------------


def test_forward_task_searches_like_the_module(tmp_path):
    """Trained on RETURNN's PyTorch backend, `++task forward` decodes with the beam: the same best
    labels and scores as the module's `search()` with the checkpoint loaded."""
    compile_args = ("--target", "returnn-torch", "--base-config", BEAM_BASE_CONFIG, "-o", "beam.config")
    run_netc("compile", BEAM, *compile_args, cwd=tmp_path, check=True)
    epochs = 10
    returnn(tmp_path, "beam.config", "++num_epochs", str(epochs))
    returnn(tmp_path, "beam.config", "++task", "forward", "++load_epoch", str(epochs))
    found = np.load(tmp_path / "forward.npz")
    seqs = runpy.run_path(str(BEAM_BASE_CONFIG))["search_data"]["data"]
    g = compile_graph(str(BEAM))
    model = load_torch_module(g).Model().eval()
    model.load_state_dict(torch.load(tmp_path / "net-model" / f"network.{epochs:03d}.pt")["model"])
    right = 0
    for b, s in enumerate(seqs):
        with torch.no_grad():
            out = model.search(x=torch.from_numpy(s["x"])[None], enc_time_lens=torch.tensor([len(s["x"])]))
        n = int(out["dec_time_lens"][0])
        assert found[f"seq-{b}/output"].tolist() == out["output"][0, :n].tolist(), b
        np.testing.assert_allclose(found[f"seq-{b}/scores"], out["scores"][0].numpy(), atol=TOLERANCE)
        assert found[f"seq-{b}/logits"].shape == (n, 7)
        right += found[f"seq-{b}/output"].tolist() == s["y"].tolist()
    print(f"RETURNN (PyTorch) forward with the beam: {right} of {len(seqs)} sequences exactly right")
    assert right >= len(seqs) // 2
