"""The Conformer examples (CTC, transducer, attention encoder-decoder, streaming CTC) train for a few epochs
on generated data (examples/training/conformer_base_config.py) on each engine, and the training
loss falls: RETURNN on TensorFlow and RETURNN on PyTorch from the command line, as a user runs them

    netc compile examples/conformer_ctc.py --network conformer_ctc --target returnn \\
        --base-config examples/training/conformer_base_config.py -o train.config
    python -m returnn train.config

(`--target returnn-torch` for RETURNN's PyTorch backend), and the emitted torch module with a plain
Adam loop. The network is named, as examples/conformer_transducer.py may hold more than one.
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

BASE_CONFIG = EXAMPLES / "training" / "conformer_base_config.py"
EPOCHS = 3  # num_epochs in the base config
# example -> its loss; the loss per label must fall below this fraction of epoch 1's in 3 epochs.
# The cross entropy (with label smoothing 0.1 over 10 labels) falls by less than the alignment
# losses; the bounds are several times what dropout and the batch order move a loss without learning.
EXAMPLE_LOSS = {
    "conformer_ctc": "ctc",
    "conformer_transducer": "rnnt",
    "conformer_aed": "ce",
    "conformer_streaming": "ctc",
}
FALLS_BELOW = {"conformer_ctc": 0.8, "conformer_transducer": 0.8, "conformer_aed": 0.9, "conformer_streaming": 0.8}
RUNNING_STATS = ("batch_norm/v2_mean", "batch_norm/v2_variance")  # BatchNorm's parameter roles


def _env() -> dict[str, str]:
    # one thread: the ops are tiny, and more threads than free cores made a step 5x slower
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1")


def _returnn_train(example: str, target: str, work: Path) -> tuple[dict[int, dict[str, float]], str]:
    """Compile with the base config, `python -m returnn train.config`; per epoch, the train
    scores/losses from RETURNN's learning-rate file, and RETURNN's log."""
    args = ("--network", example, "--target", target, "--base-config", BASE_CONFIG, "-o", "train.config")
    run_netc("compile", EXAMPLES / f"{example}.py", *args, cwd=work, check=True)
    cmd = [sys.executable, "-m", "returnn", "train.config"]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = (work / "net-model" / "learning_rates").read_text()
    epochs = re.split(r"^(\d+): EpochData\(", text, flags=re.M)[1:]
    per_epoch = {
        int(n): {k: float(v) for k, v in re.findall(r"'(train_\w+)': (?:np\.float\d+\()?([-\d.e+]+)", body)}
        for n, body in zip(epochs[::2], epochs[1::2])
    }
    return per_epoch, proc.stdout


def _assert_falls(example: str, per_epoch: list[float], engine: str) -> None:
    print(f"{engine} {example}: {EXAMPLE_LOSS[example]} per epoch {[round(v, 4) for v in per_epoch]}")
    assert len(per_epoch) == EPOCHS and all(math.isfinite(v) and v > 0 for v in per_epoch), per_epoch
    assert all(b < a for a, b in zip(per_epoch, per_epoch[1:])), per_epoch
    assert per_epoch[-1] < FALLS_BELOW[example] * per_epoch[0], per_epoch


@pytest.mark.parametrize("example", EXAMPLE_LOSS)
def test_returnn_tf_training_loss_falls(example, tmp_path):
    scores, log = _returnn_train(example, "returnn", tmp_path)
    # one loss: RETURNN's score is that loss, summed over the epoch and divided by its frames
    _assert_falls(example, [scores[e]["train_score"] for e in range(1, EPOCHS + 1)], "RETURNN TF")
    for epoch in range(1, EPOCHS + 1):
        assert (tmp_path / "net-model" / f"network.{epoch:03d}.index").is_file()
    # RETURNN trains every parameter (those of layers in the decoder's loop too), all but
    # BatchNorm's running statistics, which training moves without the optimizer
    trainable = re.search(r"^net trainable params: (.*)$", log, re.M)
    assert trainable, log[-3000:]
    found = set(re.findall(r"<tf\.Variable '([^']+):0'", trainable.group(1)))
    params = compile_graph(str(EXAMPLES / f"{example}.py"), network=example).params
    assert found == {p.name for p in params if p.role not in RUNNING_STATS}


@pytest.mark.parametrize("example", EXAMPLE_LOSS)
def test_returnn_torch_training_loss_falls(example, tmp_path):
    losses, _ = _returnn_train(example, "returnn-torch", tmp_path)
    _assert_falls(
        example, [losses[e][f"train_loss_{EXAMPLE_LOSS[example]}"] for e in range(1, EPOCHS + 1)], "RETURNN PyTorch"
    )
    # every parameter trained: the checkpoint of epoch 1 differs from the last in each
    first = torch.load(tmp_path / "net-model" / "network.001.pt")["model"]
    last = torch.load(tmp_path / "net-model" / f"network.{EPOCHS:03d}.pt")["model"]
    assert not [k for k, v in first.items() if v.is_floating_point() and torch.equal(v, last[k])]


# --- the emitted torch module, a plain Adam loop -------------------------------------------


def _batches(labels_dim: str, size: int = 16) -> list[dict[str, torch.Tensor]]:
    """The base config's sequences as padded batches, with the lengths the module's forward takes."""
    seqs = runpy.run_path(str(BASE_CONFIG))["train"]["data"]
    batches = []
    for i in range(0, len(seqs), size):
        chunk = seqs[i : i + size]
        frames, labels = [len(s["x"]) for s in chunk], [len(s["y"]) for s in chunk]
        x = np.zeros((len(chunk), max(frames), chunk[0]["x"].shape[1]), np.float32)
        y = np.zeros((len(chunk), max(labels)), np.int64)
        for b, s in enumerate(chunk):
            x[b, : frames[b]], y[b, : labels[b]] = s["x"], s["y"]
        batches.append(
            {
                "x": torch.from_numpy(x),
                "y": torch.from_numpy(y),
                "time_lens": torch.tensor(frames),
                f"{labels_dim}_lens": torch.tensor(labels),
            }
        )
    return batches


@pytest.mark.parametrize("example", EXAMPLE_LOSS)
def test_torch_training_loss_falls(example, tmp_path):
    path = tmp_path / f"{example}_torch.py"
    run_netc("compile", EXAMPLES / f"{example}.py", "--network", example, "--target", "torch", "-o", path, check=True)
    spec = importlib.util.spec_from_file_location(f"{example}_train_torch", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    loss_name = EXAMPLE_LOSS[example]
    assert mod.Model.losses == [loss_name]
    labels_dim = dict(mod.Model.input_dims)["y"][1]
    batches = _batches(labels_dim)
    labels = sum(int(b[f"{labels_dim}_lens"].sum()) for b in batches)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as for RETURNN: tiny ops
    try:
        torch.manual_seed(0)
        model = mod.Model().train()
        before = {k: v.detach().clone() for k, v in model.named_parameters()}
        opt = torch.optim.Adam(model.parameters(), lr=0.003)  # the base config's
        per_epoch = []
        for _ in range(EPOCHS):
            total = 0.0
            for b in batches:
                loss = model(**b)[loss_name]  # summed over the batch
                opt.zero_grad()
                (loss / b[f"{labels_dim}_lens"].sum()).backward()
                opt.step()
                total += loss.item()
            per_epoch.append(total / labels)
    finally:
        torch.set_num_threads(threads)
    _assert_falls(example, per_epoch, "torch")
    assert not [k for k, v in model.named_parameters() if torch.equal(before[k], v)]
