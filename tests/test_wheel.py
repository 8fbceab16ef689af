"""What users install: the wheel built from this checkout, installed (not editable) into a fresh
virtual environment with only the compiler's own dependencies, compiles a model for every
target. The editable install the other tests use reads templates straight from the checkout,
so a template missing from the wheel's package data shows only here."""

from __future__ import annotations

import shutil
import subprocess
import sys

from conftest import EXAMPLES, ROOT

TARGETS = ("returnn", "torch", "returnn-torch")


def _run(*args, cwd=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd)
    assert proc.returncode == 0, f"{' '.join(map(str, args))}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_the_built_wheel_compiles_every_target(tmp_path):
    src = tmp_path / "src"  # a copy: building must not leave build/ or *.egg-info in the checkout
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "out", "*.egg-info", "build", ".*cache"))
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "dist", src)
    wheel = next((tmp_path / "dist").glob("netc-*.whl"))
    _run(sys.executable, "-m", "venv", tmp_path / "venv")
    py = tmp_path / "venv" / "bin" / "python"
    _run(py, "-m", "pip", "install", "-q", wheel)
    # the installed package, not the checkout
    where = _run(py, "-c", "import netc; print(netc.__file__)", cwd=tmp_path).stdout
    assert str(tmp_path / "venv") in where, where
    model = tmp_path / "attention.py"
    shutil.copy(EXAMPLES / "attention.py", model)
    for target in TARGETS:
        out = tmp_path / f"attention.{target}.py"
        _run(tmp_path / "venv" / "bin" / "netc", "compile", model, "--target", target, "-o", out, cwd=tmp_path)
        compile(out.read_text(), str(out), "exec")  # emitted Python that parses
