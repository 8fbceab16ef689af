"""A backend or framework that fails under `netc verify`, `netc run` and `netc check --construct`
is one line naming it and its exception (exit code 1, no traceback); `--verbose` adds the
traceback. The failures here are made by the user's files (a module eager mode imports, a
parameter of the wrong shape, a base config that raises), so they stay failures."""

from __future__ import annotations

import json

import numpy as np
from conftest import EXAMPLES, assert_located_error


def _last_line(proc) -> str:
    return proc.stderr.rstrip().splitlines()[-1]


def test_verify_names_the_failing_backend(tmp_path, netc):
    # eager mode runs the model file, so its imports must exist; the compiler only reads them
    model = tmp_path / "needs_helper.py"
    src = (EXAMPLES / "elman.py").read_text()
    model.write_text(src.replace("from netc import", "import netc_no_such_helper  # noqa: F401\nfrom netc import", 1))
    line = "verify: eager failed: ModuleNotFoundError: No module named 'netc_no_such_helper'"
    proc = netc("verify", model)
    assert proc.returncode == 1 and proc.stdout == ""
    # progress, then the failure: netc's lines only
    assert proc.stderr.strip().splitlines() == ["netc: verify: running eager", line], proc.stderr
    proc = netc("verify", model, "--verbose")
    assert proc.returncode == 1 and _last_line(proc) == line
    assert proc.stderr.startswith("netc: verify: running eager\nTraceback (most recent call last):")
    assert "in run_eager" in proc.stderr and "BackendError" not in proc.stderr  # the backend's own traceback


def test_run_names_the_failing_backend(tmp_path, netc):
    model = EXAMPLES / "elman.py"  # hidden 32: out/rec/h/W is [32, 32]
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "in.npz",
        **{"in:x": rng.standard_normal((2, 5, 40)).astype(np.float32), "len:time": np.array([5, 3])},
    )
    np.savez(tmp_path / "p.npz", **{"param:out/rec/h/W": np.zeros((3, 3), np.float32)})
    expected = {
        "eager": "RuntimeError: shape '[32, 32]' is invalid for input of size 9",
        "torch": "RuntimeError: shape '[32, 32]' is invalid for input of size 9",
        "returnn": "ValueError: Cannot feed value of shape (3, 3) for Tensor ",
    }
    for backend, error in expected.items():
        args = ("run", model, "--backend", backend, "--inputs", tmp_path / "in.npz", "-o", tmp_path / "o.npz")
        proc = netc(*args, "--params", tmp_path / "p.npz")
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip().startswith(f"run: {backend} failed: {error}"), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr  # nothing RETURNN printed
    proc = netc(*args, "--params", tmp_path / "p.npz", "-v")
    assert "Traceback" in proc.stderr and _last_line(proc).startswith("run: returnn failed: ValueError: Cannot feed")
    # a mistake in the npz files stays a plain error
    proc = netc("run", model, "--backend", "torch", "--inputs", tmp_path / "p.npz", "-o", tmp_path / "o.npz")
    assert proc.returncode == 1 and proc.stderr.strip() == f"error: {tmp_path / 'p.npz'} has no 'in:x'"


def test_check_construct_shows_the_frameworks_exception(tmp_path, netc):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "elman.py").write_text((EXAMPLES / "elman.py").read_text())
    (tmp_path / "base.py").write_text('raise KeyError("split/2")\n')
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.netc.models]]\nsource = "models/elman.py"\nreturnn = "gen/tf.config"\n'
        'returnn-torch = "gen/pt.config"\nbase-config = "base.py"\n'
    )
    netc("compile", "--all", cwd=tmp_path, check=True)
    proc = netc("check", "--construct", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines() == [  # progress, then the failures
        "netc: check: constructing returnn of models/elman.py",
        "netc: check: constructing returnn-torch of models/elman.py",
        "gen/tf.config: error: RETURNN could not construct the network: KeyError: 'split/2'",
        "gen/pt.config: error: RETURNN (PyTorch) could not run the config: KeyError: 'split/2'",
    ]
    proc = netc("check", "--construct", "--verbose", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.count("Traceback (most recent call last):") == 2, proc.stderr
    assert proc.stderr.count('raise KeyError("split/2")') == 2  # the config's line, in each framework
    report = json.loads(netc("check", "--construct", "--format", "json", cwd=tmp_path).stdout)
    problems = report["models"][0]["problems"]
    assert [p["message"].split(": ", 1)[1] for p in problems] == ["KeyError: 'split/2'"] * 2
    assert all('raise KeyError("split/2")' in p["detail"] for p in problems)


def test_a_compile_error_stays_located(tmp_path, netc):
    src = "from netc import network\n\n\n@network\ndef f(x):\n    return x\n"
    model = tmp_path / "bad.py"
    model.write_text(src)
    message = "network input `x` needs an annotation"
    assert_located_error(netc("verify", model), src, str(model), 5, "x", message)
    np.savez(tmp_path / "in.npz", x=np.zeros(1))
    proc = netc("run", model, "--backend", "eager", "--inputs", tmp_path / "in.npz", "-o", tmp_path / "o.npz")
    assert_located_error(proc, src, str(model), 5, "x", message)
