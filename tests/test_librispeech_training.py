"""examples/librispeech_2018.py trains on generated data (examples/training/librispeech_base_config.py):
with RETURNN from the command line, and as the emitted torch module with a plain Adam loop. Both
losses (`output_prob`, cross entropy with label smoothing, and `ctc`) fall; the RETURNN checkpoint
loads into the torch module by variable name.

    netc compile examples/librispeech_2018.py --target returnn \\
        --base-config examples/training/librispeech_base_config.py -o train.config
    python -m returnn train.config
"""

from __future__ import annotations

import importlib.util
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

from netc_runtime.checkpoint import read_tf_checkpoint

EXAMPLE = EXAMPLES / "librispeech_2018.py"
BASE_CONFIG = EXAMPLES / "training" / "librispeech_base_config.py"
NUM_EPOCHS = 5  # the base config's


def _data() -> list[dict[str, np.ndarray]]:
    return runpy.run_path(str(BASE_CONFIG))["train"]["data"]


def _batches(seqs, size: int = 16):
    for i in range(0, len(seqs), size):
        chunk = seqs[i : i + size]
        frames, labels = [len(s["x"]) for s in chunk], [len(s["y"]) for s in chunk]
        x = np.zeros((len(chunk), max(frames), 40), np.float32)
        y = np.zeros((len(chunk), max(labels)), np.int64)
        for b, s in enumerate(chunk):
            x[b, : frames[b]], y[b, : labels[b]] = s["x"], s["y"]
        yield {
            "x": torch.from_numpy(x),
            "y": torch.from_numpy(y),
            "time_lens": torch.tensor(frames),
            "dec_time_lens": torch.tensor(labels),
        }


def _torch_model(tmp_path: Path):
    path = tmp_path / "librispeech_torch.py"
    run_netc("compile", EXAMPLE, "--target", "torch", "-o", path, check=True)
    spec = importlib.util.spec_from_file_location(f"librispeech_torch_{tmp_path.name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Model


def _losses_per_label(model, batches) -> dict[str, float]:
    with torch.no_grad():
        outs = [model(**b) for b in batches]
    labels = sum(int(b["dec_time_lens"].sum()) for b in batches)
    return {k: sum(float(o[k]) for o in outs) / labels for k in ("output_prob", "ctc")}


@pytest.fixture(scope="module")
def returnn_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("librispeech_train")
    run_netc(
        "compile",
        EXAMPLE,
        "--target",
        "returnn",
        "--base-config",
        BASE_CONFIG,
        "-o",
        "train.config",
        cwd=work,
        check=True,
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, "-m", "returnn", "train.config"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work, proc.stdout


def test_returnn_training_losses_fall(returnn_run):
    _, stdout = returnn_run
    scores = re.findall(r"^epoch \d+ score: ctc (\S+) output_prob (\S+) ", stdout, re.M)
    assert len(scores) == NUM_EPOCHS, stdout[-3000:]
    ctc, ce = ([float(s[i]) for s in scores] for i in (0, 1))
    print("RETURNN per epoch: ctc", ctc, "output_prob", ce)
    assert ce[0] < np.log(24) + 0.2  # about uniform over the 24 labels at the start
    assert ce[-1] < 0.95 * ce[0] and ctc[-1] < 0.8 * ctc[0], (ce, ctc)
    assert "Finished training in epoch 5." in stdout


def test_returnn_checkpoint_runs_in_the_torch_module(returnn_run, tmp_path):
    """The RETURNN checkpoint has exactly the model's parameters; loaded into the torch module by
    variable name, it gives lower losses on the training data than fresh parameters."""
    work, _ = returnn_run
    ckpt = read_tf_checkpoint(str(work / "net-model" / f"network.{NUM_EPOCHS:03d}"))
    model_cls = _torch_model(tmp_path)
    assert set(ckpt) == set(model_cls.returnn_param_names)
    batches = list(_batches(_data()))
    torch.manual_seed(0)
    model = model_cls().eval()
    fresh = _losses_per_label(model, batches)
    model.load_returnn_params(ckpt)
    trained = _losses_per_label(model, batches)
    print("torch losses per label on the training data: fresh", fresh, "RETURNN-trained", trained)
    assert all(trained[k] < 0.95 * fresh[k] for k in fresh), (fresh, trained)


def test_torch_training_losses_fall(tmp_path):
    batches = list(_batches(_data()))
    torch.manual_seed(0)
    model = _torch_model(tmp_path)()
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    per_epoch = []
    for _epoch in range(4):
        totals = {"output_prob": 0.0, "ctc": 0.0}
        for b in batches:
            out = model(**b)
            loss = (out["output_prob"] + out["ctc"]) / b["dec_time_lens"].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            for k in totals:
                totals[k] += out[k].item()
        labels = sum(int(b["dec_time_lens"].sum()) for b in batches)
        per_epoch.append({k: v / labels for k, v in totals.items()})
    print("torch per epoch:", per_epoch)
    first, last = per_epoch[0], per_epoch[-1]
    assert last["output_prob"] < 0.95 * first["output_prob"] and last["ctc"] < 0.8 * first["ctc"], per_epoch
