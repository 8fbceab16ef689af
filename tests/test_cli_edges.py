"""The CLI at its edges, as a new user meets them: help, output paths, files that are not
models, names nearly right, JSON for tools on a broken model, input files for `run`, a clean
`$TMPDIR`, `check`'s output order, a taken port."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess

import numpy as np
from conftest import EXAMPLES, NETC, ROOT

ELMAN = EXAMPLES / "elman.py"
TWO_NETWORKS = """\
from netc import Dim, Linear, Tensor, batch, network, tanh

time = Dim("time")
feat = Dim("feat", 4)
hid = Dim("hid", 5)


@network
def first(x: Tensor[batch, time, feat]):
    hidden = Linear(hid)(x)
    return {"y": tanh(hiden)}


@network
def second(x: Tensor[batch, time, feat]):
    return {"y": lienar(x)}
"""


def test_help_and_output_paths(tmp_path, netc):
    for args in (("-h",), ("compile", "-h"), ("run", "-h")):
        proc = netc(*args)
        assert proc.returncode == 0 and proc.stdout.startswith("Usage: netc"), proc.stderr
    # -o into folders that do not exist yet: made; `-o -` is stdout
    out = tmp_path / "gen" / "deep" / "elman.config"
    netc("compile", ELMAN, "-o", out, check=True)
    assert out.read_text().startswith("#!rnn.py")
    doc = tmp_path / "preview" / "elman.json"
    netc("preview", ELMAN, "--format", "json", "-o", doc, check=True)
    assert json.loads(doc.read_text())["nodes"]
    proc = netc("compile", ELMAN, "--target", "torch", "-o", "-", cwd=tmp_path, check=True)
    assert "Model = Elman" in proc.stdout and not (tmp_path / "-").exists()


def test_a_file_that_is_not_a_model(tmp_path, netc):
    proc = netc("compile", ROOT / "README.md")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{ROOT / 'README.md'}: error: not a Python model file"), proc.stderr


def test_names_nearly_right_are_suggested(tmp_path, netc):
    model = tmp_path / "m.py"
    model.write_text(TWO_NETWORKS)
    proc = netc("compile", model)
    assert proc.returncode == 1
    assert "several @network functions; pick one with --network NAME (the choices are: `first`, `second`)" in (
        proc.stderr
    )
    proc = netc("compile", model, "--network", "firts")
    assert proc.stderr.strip() == f"{model}: error: no @network function named `firts`; did you mean `first`?"
    proc = netc("compile", model, "--network", "zzz")
    assert "(the file's @network functions are: `first`, `second`)" in proc.stderr
    proc = netc("compile", model, "--network", "first")
    assert f"{model}:11:23: error: unknown name `hiden`; did you mean `hidden`?" in proc.stderr
    proc = netc("compile", model, "--network", "second")
    assert f"{model}:16:18: error: unknown name `lienar`; did you mean `Linear`?" in proc.stderr


def test_json_commands_report_errors_as_json_with_1_based_columns(tmp_path, netc):
    model = tmp_path / "m.py"
    model.write_text(TWO_NETWORKS)
    for args in (("explain", "--json"), ("preview", "--format", "json")):
        proc = netc(*args, model, "--network", "first")
        assert proc.returncode == 1, proc.stderr
        (error,) = json.loads(proc.stdout)["errors"]
        assert (error["line"], error["col"], error["end_col"]) == (11, 23, 28)
        assert error["message"] == "unknown name `hiden`; did you mean `hidden`?"
        assert error["rendered"].startswith(f"{model}:11:23: error:")
    # spans in the IR count columns as messages do: `x` of `elman(x: ...)` is at column 11
    ir = json.loads(netc("explain", "--json", ELMAN, check=True).stdout)
    assert ir["inputs"][0]["span"] == {"file": str(ELMAN), "line": 11, "col": 11, "end_line": 11, "end_col": 12}


def test_run_template_and_input_mistakes(tmp_path, netc):
    inp = tmp_path / "in" / "x.npz"
    netc("run", "--template", ELMAN, "-o", inp, "--batch", "2", "--max-len", "5", check=True)
    data = dict(np.load(inp))
    assert data["in:x"].shape == (2, 5, 40) and list(data["len:time"])[0] == 5
    netc("run", ELMAN, "--backend", "eager", "--inputs", inp, "-o", tmp_path / "o.npz", check=True)
    assert np.load(tmp_path / "o.npz")["out:output"].shape == (2, 5, 32)
    cases = {
        "feat.npz": ({"in:x": data["in:x"][:, :, :39]}, "in:x is [2,5,39], expected [batch, time, feat=40]"),
        "long.npz": ({"len:time": np.array([9, 2])}, "len:time has a length 9 but in:x has 5 frames of time"),
        "batch.npz": ({"len:time": np.array([5, 2, 1])}, "the batch sizes differ: len:time 3, in:x 2"),
    }
    for name, (change, message) in cases.items():
        np.savez(tmp_path / name, **{**data, **change})
        proc = netc("run", ELMAN, "--backend", "torch", "--inputs", tmp_path / name, "-o", tmp_path / "o.npz")
        assert proc.returncode == 1 and proc.stderr.strip() == f"error: {tmp_path / name}: {message}", proc.stderr
    proc = netc("run", ELMAN, "-o", tmp_path / "o.npz")
    assert proc.returncode == 2 and "give --backend and --inputs" in proc.stderr
    # `-o -`: the npz on stdout
    proc = subprocess.run([str(NETC), "run", "--template", ELMAN, "-o", "-"], capture_output=True, cwd=tmp_path)
    assert proc.returncode == 0 and not (tmp_path / "-").exists() and not (tmp_path / "-.npz").exists()
    assert np.load(io.BytesIO(proc.stdout))["in:x"].shape[2] == 40


def test_commands_leave_tmpdir_as_they_found_it(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), TF_CPP_MIN_LOG_LEVEL="3")

    def netc(*args):
        proc = subprocess.run([str(NETC), *map(str, args)], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return proc

    # an LstmCell: TensorFlow warns of the deprecated Keras cell RETURNN builds it on
    proc = netc("verify", ROOT / "tests" / "models" / "ops_lstm_cell.py")
    assert [line for line in proc.stderr.splitlines() if not line.startswith("netc: ")] == []  # netc's lines only
    assert "netc: verify: running RETURNN (TensorFlow)" in proc.stderr
    netc("run", "--template", ELMAN, "-o", "in.npz")
    for backend in ("torch", "returnn"):
        netc("run", ELMAN, "--backend", backend, "--inputs", "in.npz", "-o", "out.npz")
    assert list(tmp.iterdir()) == []


def test_check_prints_each_models_problems_after_its_line(tmp_path, netc):
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text(ELMAN.read_text())
        netc("compile", tmp_path / f"{name}.py", "-o", tmp_path / f"{name}.config", check=True)
    (tmp_path / "a.config").write_text("stale\n")
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.netc.models]]\nsource = "a.py"\nreturnn = "a.config"\n\n'
        '[[tool.netc.models]]\nsource = "b.py"\nreturnn = "b.config"\n'
    )
    proc = subprocess.run(
        [str(NETC), "check", "--no-cache"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1
    stale = next(i for i, line in enumerate(lines) if line.startswith("a.config: stale"))
    assert stale < lines.index("b.py: ok") < len(lines) - 1, proc.stdout
    assert lines[-1].startswith("netc check: 2 models: 1 ok, 1 stale")


def test_watch_says_which_port_is_taken(netc):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = netc("preview", ELMAN, "--watch", "--port", port)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: port {port} is in use; pick another with --port N (--port 0: any free port)"
