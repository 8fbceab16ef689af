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


def test_run_and_export_errors_name_the_file_and_the_input(tmp_path, netc):
    """One line naming the file (and the input) for each mistake, the same on every backend."""
    inp = tmp_path / "in.npz"
    netc("run", "--template", ELMAN, "-o", inp, check=True)
    data = dict(np.load(inp))
    # -o under a path that is a file
    for args in (
        ("run", ELMAN, "--backend", "torch", "--inputs", inp),
        ("run", "--template", ELMAN),
        ("export", ELMAN, "--format", "onnx"),
        ("compile", ELMAN),
    ):
        proc = netc(*args, "-o", inp / "out.x")
        assert (
            proc.returncode == 1 and proc.stderr == f"error: cannot write {inp}/out.x: {inp} is a file, not a folder\n"
        )
    # files that are no npz: text, cut short, with Python objects
    (tmp_path / "text.npz").write_text("hello\n")
    (tmp_path / "short.npz").write_bytes(inp.read_bytes()[:100])
    np.savez(tmp_path / "objects.npz", **{**data, "in:x": np.array([{"a": 1}], dtype=object)})
    cases = {
        "text.npz": "not a readable npz file (numpy.savez writes one; `netc run --template` an example)",
        "short.npz": "not a readable npz file (numpy.savez writes one; `netc run --template` an example)",
        "objects.npz": "holds Python objects, not arrays of numbers",
    }
    for name, message in cases.items():
        for flag in ("--inputs", "--params"):
            args = ("--inputs", inp) if flag == "--params" else ()
            proc = netc("run", ELMAN, "--backend", "eager", flag, tmp_path / name, *args, "-o", tmp_path / "o.npz")
            assert proc.returncode == 1 and proc.stderr == f"error: {tmp_path / name}: {message}\n", proc.stderr
        proc = netc("export", ELMAN, "--format", "onnx", "--params", tmp_path / name, "-o", tmp_path / "m.onnx")
        assert proc.returncode == 1 and proc.stderr == f"error: {tmp_path / name}: {message}\n", proc.stderr
        proc = netc("verify", ELMAN, "--params", tmp_path / name)
        assert proc.returncode == 1 and proc.stderr.endswith(f"error: {tmp_path / name}: {message}\n"), proc.stderr
    # names the model does not have, wrong dtypes, labels out of range
    attention = EXAMPLES / "attention.py"
    netc("run", "--template", attention, "-o", tmp_path / "a.npz", check=True)
    labels = dict(np.load(tmp_path / "a.npz"))
    high, low = labels["in:y"].copy(), labels["in:y"].copy()
    high[1, 2], low[0, 0] = 12, -1
    vocab = "labels of the class dim `vocab` are 0..11 (in padded frames too)"
    cases = {
        "typo.npz": (ELMAN, {**data, "in:xx": data["in:x"]}, "in:xx: elman has no input `xx`; did you mean `in:x`?"),
        "dim.npz": (ELMAN, {**data, "len:tme": data["len:time"]}, "len:tme: elman has no dynamic input dim `tme`"),
        "key.npz": (ELMAN, {**data, "x": data["in:x"]}, "'x' is none of in:<input>, len:<dim>, param:<RETURNN name>"),
        "param.npz": (ELMAN, {**data, "param:out/rec/h/w": np.zeros(3)}, "unknown parameter 'out/rec/h/w'; did you"),
        "int.npz": (ELMAN, {**data, "in:x": data["in:x"].astype(np.int32)}, "in:x holds int32 values, expected floats"),
        "high.npz": (attention, {**labels, "in:y": high}, f"in:y has label 12 at [1, 2]: {vocab}"),
        "low.npz": (attention, {**labels, "in:y": low}, f"in:y has label -1 at [0, 0]: {vocab}"),
    }
    for name, (model, arrays, message) in cases.items():
        np.savez(tmp_path / name, **arrays)
        # each backend failed its own way on these (torch's "index out of range in self", RETURNN's
        # "Graph execution error", torch's dtype error in a matmul), or ignored the value
        for backend in ("eager", "torch", "returnn") if name in ("high.npz", "int.npz") else ("torch",):
            proc = netc("run", model, "--backend", backend, "--inputs", tmp_path / name, "-o", tmp_path / "o.npz")
            assert proc.returncode == 1 and proc.stderr.startswith(f"error: {tmp_path / name}: {message}"), proc.stderr
            assert len(proc.stderr.splitlines()) == 1, proc.stderr
    # float64 and float16 features and int32 labels: cast to what the module takes, on every backend
    np.savez(tmp_path / "wide.npz", **{**labels, "in:x": labels["in:x"].astype(np.float64)})
    np.savez(tmp_path / "half.npz", **{**labels, "in:x": labels["in:x"].astype(np.float16), "in:y": high % 12})
    for name in ("wide.npz", "half.npz"):
        outs = []
        for backend in ("eager", "torch", "returnn"):
            out = tmp_path / f"{backend}.npz"
            netc("run", attention, "--backend", backend, "--inputs", tmp_path / name, "-o", out, check=True)
            found = np.load(out)
            valid = np.arange(found["out:output"].shape[1])[None, :] < found["outlen:output:dec_time"][:, None]
            outs.append(found["out:output"][valid])
        assert outs[0].dtype == np.float32 and all(np.abs(o - outs[0]).max() < 1e-4 for o in outs), name


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
