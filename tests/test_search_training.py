"""A model with `choice` trains with RETURNN's own entry point, and the trained checkpoint then
decodes with the beam: RETURNN's search task, the torch module's `search()` and eager mode
find the same labels.

    netc compile examples/beam_search.py --target returnn --base-config examples/training/beam_search_base_config.py -o beam.config
    python -m returnn beam.config
    python -m returnn beam.config ++task search ++load_epoch 20 ++log_verbosity 5
"""

from __future__ import annotations

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
from netc_runtime.backends import _import_file, load_torch_module
from netc_runtime.checkpoint import read_tf_checkpoint

MODEL = EXAMPLES / "beam_search.py"
BASE_CONFIG = EXAMPLES / "training" / "beam_search_base_config.py"
EPOCHS = 20


def _returnn(work, *args: str) -> str:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, "-m", "returnn", "beam.config", *args]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    work = tmp_path_factory.mktemp("beam_train")
    run_netc(
        "compile", MODEL, "--target", "returnn", "--base-config", BASE_CONFIG, "-o", "beam.config", cwd=work, check=True
    )
    return work, _returnn(work)


def test_training_loss_falls(trained):
    _, stdout = trained
    scores = [float(s) for s in re.findall(r"^epoch \d+ score: (\S+) ", stdout, re.M)]
    print("RETURNN train score per epoch:", scores)
    assert len(scores) == EPOCHS and scores[-1] < 0.8 * scores[0], scores


def test_trained_checkpoint_decodes_alike_on_all_backends(trained):
    work, _ = trained
    stdout = _returnn(work, "++task", "search", "++load_epoch", str(EPOCHS), "++log_verbosity", "5")
    found = {
        int(i): [int(v) for v in re.findall(r"-?\d+", labels)]
        for i, labels in re.findall(r"^seq_idx: (\d+), seq_tag: \S+ output 'output': array\(\[([^\]]*)\]", stdout, re.M)
    }
    data = runpy.run_path(str(BASE_CONFIG))["search_data"]["data"]
    assert sorted(found) == list(range(len(data))), stdout[-2000:]
    g = compile_graph(str(MODEL))
    params = read_tf_checkpoint(str(work / "net-model" / f"network.{EPOCHS:03d}"))
    model = load_torch_module(g).Model().eval()
    model.load_returnn_params(params)
    net = _import_file(str(MODEL), "beam_search_trained").beam_search
    net.load_returnn_params(params)
    lens = torch.tensor([len(s["x"]) for s in data])
    x = torch.zeros(len(data), int(lens.max()), 6)
    for b, s in enumerate(data):
        x[b, : len(s["x"])] = torch.from_numpy(s["x"])
    with torch.no_grad():
        out = model(x=x, enc_time_lens=lens, search=True)
    eager = net(x=x, enc_time_lens=lens, search=True)
    for b in range(len(data)):
        n = int(out["dec_time_lens"][b])
        assert out["output"][b, :n].tolist() == found[b] == eager["output"][b, :n].tolist(), b
    # the model learnt the task: most decoded sequences are exactly the reference labels
    right = sum(found[b] == s["y"].tolist() for b, s in enumerate(data))
    print(f"RETURNN search: {right} of {len(data)} sequences exactly right; {found}")
    assert right >= len(data) // 2
    np.testing.assert_allclose(out["scores"].numpy(), eager["scores"].numpy(), atol=1e-5)
