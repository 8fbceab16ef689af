"""What users install: the wheel built from this checkout, installed (not editable) into a fresh
virtual environment with only the compiler's own dependencies, compiles a model for every
target. The editable install the other tests use reads templates straight from the checkout,
so a template missing from the wheel's package data shows only here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import EXAMPLES, ROOT

TARGETS = ("returnn", "torch", "returnn-torch")


def _run(*args, cwd=None) -> subprocess.CompletedProcess:
    # as a user runs it: a PYTHONPATH of the developer's (a checkout) would win over the install
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env)
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
    # a project with all three targets: `compile --all` writes them, `check` finds them current
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(EXAMPLES / "attention.py", project / "attention.py")
    (project / "pyproject.toml").write_text(
        '[[tool.netc.models]]\nsource = "attention.py"\nreturnn = "gen/tf.config"\ntorch = "gen/module.py"\n'
        'returnn-torch = "gen/pt.config"\n'
    )
    netc = tmp_path / "venv" / "bin" / "netc"
    _run(netc, "compile", "--all", cwd=project)
    check = _run(netc, "check", cwd=project)
    assert "netc check: 1 model: 1 ok" in check.stdout, check.stdout


def _git(*args, cwd, env=None) -> subprocess.CompletedProcess:
    """git with an identity (a fresh machine has none); `env`: e.g. pre-commit's home for hooks."""
    cmd = ["git", "-c", "user.name=netc test", "-c", "user.email=test@example.invalid", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)


def test_pre_commit_hooks_block_a_stale_generated_file(tmp_path):
    """The hooks of `.pre-commit-hooks.yaml` through the real pre-commit tool, as a project
    uses them: pre-commit installs netc from a git repository into its own environment."""
    hooks_repo = tmp_path / "netc"  # this checkout as a git repository with one commit
    shutil.copytree(
        ROOT, hooks_repo, ignore=shutil.ignore_patterns(".venv", ".git", "out", "*.egg-info", "build", ".*cache")
    )
    assert _git("init", "-q", cwd=hooks_repo).returncode == 0
    _git("add", "-A", cwd=hooks_repo)
    assert _git("commit", "-qm", "netc", cwd=hooks_repo).returncode == 0
    rev = _git("rev-parse", "HEAD", cwd=hooks_repo).stdout.strip()

    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    shutil.copy(EXAMPLES / "elman.py", project / "models" / "elman.py")
    (project / "pyproject.toml").write_text(
        '[[tool.netc.models]]\nsource = "models/elman.py"\nreturnn = "generated/elman.config"\n'
        'torch = "generated/elman_torch.py"\nreturnn-torch = "generated/elman_pt.config"\n'
    )
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hooks_repo}\n    rev: {rev}\n    hooks:\n      - id: netc-check\n"
    )
    netc = Path(sys.executable).parent / "netc"
    _run(netc, "compile", "--all", cwd=project)
    _git("init", "-q", cwd=project)
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    pre_commit = Path(sys.executable).parent / "pre-commit"
    _run(pre_commit, "install", cwd=project)
    _git("add", "-A", cwd=project)
    first = _git("commit", "-m", "models", cwd=project, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "netc check (generated files are current)" in first.stdout + first.stderr
    # a hand edit of a generated file that is neither .py nor .toml: the commit is refused
    config = project / "generated" / "elman.config"
    config.write_text(config.read_text().replace("'n_out'", "'n_out' ", 1) + "# edited\n")
    _git("add", "-A", cwd=project)
    second = _git("commit", "-m", "edit", cwd=project, env=env)
    assert second.returncode != 0, second.stdout + second.stderr
    assert "generated/elman.config: stale" in second.stdout + second.stderr
