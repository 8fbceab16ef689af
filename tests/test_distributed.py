"""Training on two processes with torch.distributed (gloo, on the loopback interface only):

- RETURNN's PyTorch backend with `torch_distributed` in the config, started by torchrun:
      torchrun --standalone --nproc_per_node=2 -m returnn train.config
- the plain emitted module under DistributedDataParallel (examples/training/attention_ddp.py):
      torchrun --standalone --nproc_per_node=2 examples/training/attention_ddp.py attention_torch.py

Both ranks must run, the loss must fall, and both ranks must end with identical parameters.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import EXAMPLES, run_netc

ATTENTION = EXAMPLES / "attention.py"
BASE_CONFIG = EXAMPLES / "training" / "attention_base_config.py"
DDP_EXAMPLE = EXAMPLES / "training" / "attention_ddp.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"
EPOCHS = 5  # num_epochs in the base config

# appended to the compiled config: RETURNN saves checkpoints on rank 0 only, so each rank saves the
# parameters it ends with when its process exits
SAVE_EVERY_RANK = """

_compiled_get_model = get_model


def get_model(**kwargs):
    import atexit
    import os

    model = _compiled_get_model(**kwargs)
    atexit.register(lambda: torch.save(model.state_dict(), f"params.rank{os.environ['RANK']}.pt"))
    return model
"""


def torchrun(work: Path, *args: str) -> str:
    """Two local processes; gloo keeps to the loopback interface."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    cmd = [str(TORCHRUN), "--standalone", "--nproc_per_node=2", *args]
    # a session of its own: on a timeout the ranks go too, not only torchrun
    proc = subprocess.Popen(
        cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"torchrun timed out:\n{stdout[-3000:]}{stderr[-3000:]}")
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    return stdout


def assert_same_parameters(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs between the ranks"


def test_returnn_torch_distributed(tmp_path):
    base = tmp_path / "base.py"
    # a CPU build of torch has no NCCL: RETURNN's default backend "cpu:gloo,cuda:nccl" fails there
    base.write_text(BASE_CONFIG.read_text() + '\ntorch_distributed = {"backend": "gloo"}\n')
    run_netc(
        "compile",
        ATTENTION,
        "--target",
        "returnn-torch",
        "--base-config",
        base,
        "-o",
        "train.config",
        cwd=tmp_path,
        check=True,
    )
    with open(tmp_path / "train.config", "a") as f:
        f.write(SAVE_EVERY_RANK)
    stdout = torchrun(tmp_path, "-m", "returnn", "train.config")
    for rank in (0, 1):
        assert f"Start running torch distributed training on local rank {rank}." in stdout
    # each rank reports the loss per frame of the batches it trained on
    losses = [float(s) for s in re.findall(r"^Epoch \d+: Total train loss: (\S+)$", stdout, re.M)]
    assert len(losses) == 2 * EPOCHS, stdout[-3000:]
    print("RETURNN (PyTorch, 2 ranks) train loss per epoch and rank:", losses)
    assert abs(losses[0] - math.log(12)) < 0.3 and max(losses[-2:]) < 0.7 * min(losses[:2]), losses
    assert stdout.count(f"Finished training at epoch {EPOCHS}") == 2
    ranks = [torch.load(tmp_path / f"params.rank{r}.pt") for r in (0, 1)]
    assert_same_parameters(*ranks)
    # rank 0 wrote RETURNN's checkpoints, with those parameters
    assert_same_parameters(ranks[0], torch.load(tmp_path / "net-model" / f"network.{EPOCHS:03d}.pt")["model"])


def test_plain_module_under_ddp(tmp_path):
    run_netc("compile", ATTENTION, "--target", "torch", "-o", "attention_torch.py", cwd=tmp_path, check=True)
    epochs = 6
    stdout = torchrun(
        tmp_path, str(DDP_EXAMPLE), "attention_torch.py", "--epochs", str(epochs), "--save", "p.{rank}.pt"
    )
    losses = {
        r: [float(s) for s in re.findall(rf"rank {r}: epoch \d+ loss per frame (\d+\.\d{{4}})", stdout)] for r in (0, 1)
    }
    print("plain module under DDP, loss per frame per epoch:", losses[0])
    assert len(losses[0]) == epochs and losses[0] == losses[1], stdout  # all-reduced: the same on both
    assert abs(losses[0][0] - math.log(12)) < 0.3 and all(b < a for a, b in zip(losses[0], losses[0][1:]))
    assert losses[0][-1] < 0.7 * losses[0][0]
    assert_same_parameters(torch.load(tmp_path / "p.0.pt"), torch.load(tmp_path / "p.1.pt"))
