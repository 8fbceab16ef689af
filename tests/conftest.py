"""Shared test helpers: the real `netc` CLI as a subprocess, example paths, RETURNN's variables
for an emitted config."""

from __future__ import annotations

import ast
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from netc.parser.source import network_functions

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
NETC = Path(sys.executable).parent / "netc"


def network_names(path: Path) -> list[str]:
    """The @network functions of a model file, in source order."""
    return [fn.name for fn in network_functions(ast.parse(path.read_text(encoding="utf-8")))]


def example_network(path: Path) -> str | None:
    """The network tests over all examples take: None where a file has one; in a file with
    several, the first (the training network; the others, its decoders, have tests of their own)."""
    names = network_names(path)
    return names[0] if len(names) > 1 else None


def one_chunk(g) -> int | None:
    """The longest input that fits in one chunk of each chunked loop of the graph `g` (N frames
    of the smallest chunk; a chunked dim is an input's or made shorter from it); None without one."""
    return min((d.max_frames for d in g.dims if d.max_frames), default=None)


def run_netc(*args: str, cwd: Path | None = None, check: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([str(NETC), *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"netc {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def returnn_variables(config: str, train: bool = False) -> tuple[dict[str, tuple[int, ...]], set[str], set[str]]:
    """RETURNN (TensorFlow, graph mode) building the network of config text `config`: its
    parameters (name -> shape), the names of its trainable ones, and of every TF variable."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tf.native_op import OpMaker
    from returnn.tf.network import TFNetwork

    with tempfile.NamedTemporaryFile("w", suffix=".config.py", delete=False) as f:
        f.write(config)
    cfg = Config()
    cfg.load_file(f.name)
    tf.compat.v1.disable_eager_execution()
    OpMaker.with_cuda = False  # `nativelstm2` compiles for the CPU
    with tf.Graph().as_default():
        net = TFNetwork(config=cfg, train_flag=train)
        net.construct_from_dict(cfg.typed_value("network"))
        params = {v.name[:-2]: tuple(v.shape.as_list()) for v in net.get_params_list()}
        trainable = {v.name[:-2] for v in net.get_trainable_params()}
        every = {v.name[:-2] for v in tf.compat.v1.global_variables()}
    return params, trainable, every


@contextlib.contextmanager
def returnn_frontend_torch():
    """RETURNN's frontend on its PyTorch backend for the block, then RETURNN's process-wide state
    as it was: selecting the backend raises the minimum behavior version to 16, and a later
    TensorFlow network in the same test worker (a config with no behavior_version, as the
    2018 LibriSpeech one) would then be refused."""
    import returnn.frontend as rf
    from returnn.frontend._backend import global_backend
    from returnn.util.basic import BehaviorVersion

    state, backend = BehaviorVersion._get_state(), global_backend.__class__
    rf.select_backend_torch()
    try:
        yield rf
    finally:
        global_backend.__class__ = backend
        BehaviorVersion._reset(state)


def netc_in_process(*args, check: bool = False) -> subprocess.CompletedProcess:
    """`netc ARGS`: the CLI's own command run in this test worker, so TensorFlow, torch and
    RETURNN are imported once per worker rather than once per model (the CLI as a subprocess is
    tested on its own, in test_cli*.py and test_failures.py). Exit code, stdout and stderr as
    the subprocess gives them."""
    from click.testing import CliRunner

    from netc.cli import main

    argv = [*map(str, args)]
    r = CliRunner().invoke(main, argv, catch_exceptions=False)
    if check and r.exit_code != 0:
        raise AssertionError(f"netc {' '.join(argv)} failed ({r.exit_code}):\n{r.stdout}{r.stderr}")
    return subprocess.CompletedProcess(["netc", *argv], r.exit_code, r.stdout, r.stderr)


def verify_in_process(*args) -> subprocess.CompletedProcess:
    """`netc verify ARGS` in this test worker (`netc_in_process`)."""
    return netc_in_process("verify", *args)


@pytest.fixture
def netc():
    return run_netc


@pytest.fixture
def verify():
    return verify_in_process


def assert_located_error(proc: subprocess.CompletedProcess, src: str, file: str, line: int, call: str, message: str):
    """A compile error as users see it: exit 1, no traceback, `file:line:col: error: ...` with
    `message`, the source line, and a caret under `call` on `line` (1-based) of `src`."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    first, source_line, caret = proc.stderr.splitlines()[:3]
    col = src.splitlines()[line - 1].index(call)
    assert first.startswith(f"{file}:{line}:{col + 1}: error: "), first
    assert message in first, first
    assert source_line.strip() == src.splitlines()[line - 1].strip()
    assert caret.index("^") - 4 == col


def check_located_case(tmp_path: Path, header: str, sig: str, case: tuple, target: str = "returnn") -> None:
    """An error-table case `(name, body lines, message, line in the body, call)`: the body as a
    @network function with signature `sig` after `header`, compiled for `target` by the CLI, is
    that located error."""
    import textwrap

    name, body, message, line, call = case
    src = header + "@network\n" + sig + "\n" + textwrap.indent("\n".join(body), "    ") + "\n"
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    proc = run_netc("compile", path.name, "--target", target, cwd=tmp_path)
    assert_located_error(proc, src, path.name, header.count("\n") + 2 + line, call, message)
