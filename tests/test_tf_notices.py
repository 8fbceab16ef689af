"""TensorFlow's start-up notices (absl's pre-init line, oneDNN's notice, the CUDA plugins' lines)
stay off netc's stderr, on a machine whose TensorFlow prints them as on one whose does not."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from conftest import EXAMPLES, NETC, ROOT

from netc.tf_quiet import is_notice, strip_notices

ELMAN = EXAMPLES / "elman.py"
# the user's environment as it may be: no TensorFlow setting, or oneDNN asked for (which on a
# processor with its kernels prints its notice whatever TF_CPP_MIN_LOG_LEVEL says)
ENVS = {
    "plain": {k: v for k, v in os.environ.items() if not k.startswith("TF_")},
    "onednn": {**{k: v for k, v in os.environ.items() if not k.startswith("TF_")}, "TF_ENABLE_ONEDNN_OPTS": "1"},
}


def _netc(*args, env, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(NETC), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd)


def test_verify_and_run_print_only_netcs_lines(tmp_path):
    for name, env in ENVS.items():
        proc = _netc("verify", ELMAN, env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.splitlines() == [
            "netc: verify: running eager",
            "netc: verify: running the torch module",
            "netc: verify: running RETURNN (TensorFlow)",
        ], (name, proc.stderr)
    env = ENVS["onednn"]
    assert _netc("run", "--template", ELMAN, "-o", "in.npz", env=env, cwd=tmp_path).returncode == 0
    proc = _netc("run", ELMAN, "--backend", "returnn", "--inputs", "in.npz", "-o", "out.npz", env=env, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_the_import_is_quiet_and_stderr_comes_back(tmp_path):
    """TensorFlow itself imported after `quiet()`: nothing of it on fd 2, and fd 2 is netc's again
    after (a line written before and after by C-level writes both arrive, in order)."""
    code = textwrap.dedent("""
        import os
        from netc import tf_quiet
        tf_quiet.quiet()
        os.write(2, b"before\\n")
        import tensorflow
        os.write(2, b"after\\n")
        import tensorflow.compat.v1
    """)
    for name, env in ENVS.items():
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
        assert proc.returncode == 0 and proc.stderr == "before\nafter\n", (name, proc.stderr)


def test_what_is_not_a_notice_is_written_back(tmp_path):
    """The catching of fd 2 while `tensorflow` is imported, on a stand-in package of that name
    whose import writes a notice, a warning of its own (C-level and Python) and then fails."""
    pkg = tmp_path / "site" / "tensorflow"
    pkg.mkdir(parents=True)
    notice = "I0000 00:00:1795810603.623641    7198 port.cc:153] oneDNN custom operations are on. You may see"
    (pkg / "__init__.py").write_text(
        textwrap.dedent(f"""
        import os, sys
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n")
        os.write(2, b"{notice}\\n")
        os.write(2, b"E0000 00:00:1.5  7 cuda_dnn.cc:8310] something else went wrong\\n")
        print("a Python warning", file=sys.stderr)
        raise ImportError("broken build")
    """)
    )
    code = "from netc import tf_quiet\ntf_quiet.quiet()\ntry:\n    import tensorflow\nexcept ImportError as e:\n    print(e)"
    env = {**ENVS["plain"], "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stdout == "broken build\n", proc.stderr
    assert proc.stderr == "E0000 00:00:1.5  7 cuda_dnn.cc:8310] something else went wrong\na Python warning\n"
    # TF_CPP_MIN_LOG_LEVEL=0: the user asked for TensorFlow's every line
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**env, "TF_CPP_MIN_LOG_LEVEL": "0"}
    )
    assert notice in proc.stderr.splitlines() and "a Python warning" in proc.stderr


def test_notices_are_recognised_and_nothing_else():
    notices = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1795810603.623641    7198 port.cc:153] oneDNN custom operations are on. You may see slightly",
        "I0000 00:00:1795810603.691325    7198 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
        "available CPU instructions in performance-critical operations.",
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate "
        "compiler flags.",
        "E0000 00:00:1721.5 12 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register factory",
        "E0000 00:00:1721.5 12 cuda_blas.cc:1418] Unable to register cuBLAS factory: Attempting to register factory",
        "W0000 00:00:1721.5 12 computation_placer.cc:177] computation placer already registered. Please check",
    ]
    others = [
        "netc: verify: running eager",
        "E0000 00:00:1721.5 12 cuda_dnn.cc:8310] something else went wrong",
        "Traceback (most recent call last):",
        "WARNING: the model",
    ]
    assert all(is_notice(line) for line in notices)
    assert not any(is_notice(line) for line in others)
    assert strip_notices("\n".join([*notices, *others]) + "\n") == "\n".join(others) + "\n"
