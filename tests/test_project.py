"""A project declared in pyproject.toml: `netc compile --all` and `netc check` (formats, exit codes,
the cache, the process pool, `--construct`), run as a user runs them, on real files."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from conftest import EXAMPLES, ROOT

from netc.check import Problem
from netc.check_report import github_annotation

PYPROJECT = """\
[project]
name = "demo"

[[tool.netc.models]]
source = "models/elman.py"
returnn = "gen/elman_config.py"
torch = "gen/elman_torch.py"

[[tool.netc.models]]
source = "models/rnn_*.py"
torch = "gen/{stem}_torch.py"
"""

BAD = """\
from netc import Dim, Linear, Tensor, batch, network, tanh

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def bad(x: Tensor[batch, time, feat]):
    out = []
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + h)
        out.append(h)
    return out
"""


def make_project(root, pyproject=PYPROJECT):
    (root / "models").mkdir(parents=True)
    shutil.copy(EXAMPLES / "elman.py", root / "models" / "elman.py")
    shutil.copy(EXAMPLES / "gru.py", root / "models" / "rnn_gru.py")
    shutil.copy(EXAMPLES / "lstm.py", root / "models" / "rnn_lstm.py")
    (root / "pyproject.toml").write_text(pyproject)
    return root


@pytest.fixture
def project(tmp_path, netc):
    root = make_project(tmp_path / "demo")
    netc("compile", "--all", cwd=root, check=True)
    return root


def test_compile_all_writes_what_is_declared_and_check_passes(tmp_path, netc):
    root = make_project(tmp_path / "demo")
    first = netc("check", cwd=root)
    assert first.returncode == 1 and "gen/elman_torch.py: missing; create it with `netc compile --all`" in first.stderr
    out = netc("compile", "--all", cwd=root, check=True).stdout
    written = sorted(p.relative_to(root).as_posix() for p in (root / "gen").iterdir())
    assert written == ["gen/elman_config.py", "gen/elman_torch.py", "gen/rnn_gru_torch.py", "gen/rnn_lstm_torch.py"]
    assert "wrote gen/rnn_gru_torch.py" in out
    assert out.splitlines()[-1] == "netc compile --all: 3 models, 4 files: 4 written, 0 unchanged"
    # the same bytes as compiling each model alone
    alone = netc("compile", root / "models" / "rnn_gru.py", "--target", "torch", check=True).stdout
    assert (root / "gen" / "rnn_gru_torch.py").read_text() == alone
    again = netc("compile", "--all", cwd=root, check=True).stdout
    assert again == "netc compile --all: 3 models, 4 files: 0 written, 4 unchanged\n"
    ok = netc("check", cwd=root)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == [
        "models/elman.py: ok",
        "models/rnn_gru.py: ok",
        "models/rnn_lstm.py: ok",
        "netc check: 3 models: 3 ok, 0 stale, 0 with errors (3 compiled from the cache)",
    ]


def test_check_finds_the_project_from_a_subdirectory_and_names_paths_from_there(project, netc):
    proc = netc("check", "--format", "json", cwd=project / "models")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True and report["summary"]["models"] == 3
    assert report["models"][0]["source"] == "elman.py"
    assert [t["path"] for t in report["models"][0]["targets"]] == ["../gen/elman_config.py", "../gen/elman_torch.py"]


def test_stale_files_give_a_diff_in_every_format(project, netc):
    model = project / "models" / "elman.py"
    model.write_text(model.read_text().replace('Dim("hidden", 32)', 'Dim("hidden", 33)'))
    text = netc("check", cwd=project)
    assert text.returncode == 1
    assert "gen/elman_config.py: stale; regenerate with `netc compile --all`" in text.stderr
    assert "--- gen/elman_config.py (on disk)\n+++ gen/elman_config.py (from models/elman.py)" in text.stderr
    assert "-dim_hidden = Dim(32, name=" in text.stderr and "+dim_hidden = Dim(33, name=" in text.stderr
    assert "models/rnn_gru.py: ok" in text.stdout and "1 stale" in text.stdout

    gh = netc("check", "--format", "github", cwd=project)
    assert gh.returncode == 1
    assert "::error file=gen/elman_config.py,line=9,title=netc check::stale; regenerate with" in gh.stdout
    assert "::group::gen/elman_config.py: stale\n--- gen/elman_config.py (on disk)" in gh.stdout

    js = netc("check", "--format", "json", cwd=project)
    report = json.loads(js.stdout)
    elman = report["models"][0]
    assert report["ok"] is False and elman["status"] == "stale"
    assert [p["kind"] for p in elman["problems"]] == ["stale", "stale"]
    assert elman["problems"][0]["line"] == 9 and "+dim_hidden = Dim(33" in elman["problems"][0]["detail"]

    netc("compile", "--all", cwd=project, check=True)
    assert netc("check", cwd=project).returncode == 0


def test_compile_errors_are_reported_with_their_location(project, netc):
    (project / "models" / "rnn_bad.py").write_text(BAD)
    text = netc("check", cwd=project)
    assert text.returncode == 1
    assert "models/rnn_bad.py:12:40: error: `h` is read before it is assigned" in text.stderr
    assert "        h = tanh(Linear(hidden)(x_t) + h)\n" in text.stderr and "^" in text.stderr
    assert "Traceback" not in text.stderr
    gh = netc("check", "--format", "github", cwd=project).stdout
    assert "::error file=models/rnn_bad.py,line=12,col=40,endLine=12,endColumn=41,title=netc check::`h` is read" in gh
    # --all writes the other models and fails for this one
    proc = netc("compile", "--all", cwd=project)
    assert proc.returncode == 1 and "models/rnn_bad.py:12:40: error:" in proc.stderr
    assert (
        proc.stdout.splitlines()[-1] == "netc compile --all: 4 models (1 with errors), 4 files: 0 written, 4 unchanged"
    )
    # one model, and an output that cannot be written (a file where its folder would be)
    (project / "one").mkdir()
    (project / "one" / "pyproject.toml").write_text(
        '[[tool.netc.models]]\nsource = "../models/elman.py"\ntorch = "gen/elman.py"\nreturnn = "x/elman.config"\n'
    )
    (project / "one" / "x").write_text("")
    proc = netc("compile", "--all", cwd=project / "one")
    assert proc.returncode == 1 and proc.stderr == "error: cannot write x/elman.config: x is a file, not a folder\n"
    assert proc.stdout.splitlines() == [
        "wrote gen/elman.py",
        "netc compile --all: 1 model, 2 files: 1 written, 0 unchanged, 1 not written",
    ]


def test_cache_skips_unchanged_sources_and_parallel_compiles_give_the_same_bytes(project, netc):
    cache = project / ".netc_cache"
    assert (cache / ".gitignore").read_text() == "*\n"
    entries = set(cache.glob("*.json"))
    assert len(entries) == 3
    model = project / "models" / "rnn_gru.py"
    model.write_text(model.read_text() + "\n# edited\n")
    report = json.loads(netc("check", "--format", "json", cwd=project).stdout)
    assert [m["cached"] for m in report["models"]] == [True, False, True]  # only the edited source compiled
    assert len(set(cache.glob("*.json")) - entries) == 1
    no_cache = json.loads(netc("check", "--format", "json", "--no-cache", cwd=project).stdout)
    assert [m["cached"] for m in no_cache["models"]] == [False, False, False]

    before = {p.name: p.read_bytes() for p in (project / "gen").iterdir()}
    shutil.rmtree(project / "gen")
    out = netc("compile", "--all", "--no-cache", "-j", "2", cwd=project, check=True).stdout
    assert "4 written" in out
    assert {p.name: p.read_bytes() for p in (project / "gen").iterdir()} == before


def test_configuration_and_usage_errors_exit_with_2(tmp_path, netc):
    lone = tmp_path / "lone"
    lone.mkdir()
    proc = netc("check", cwd=lone)
    assert proc.returncode == 2 and "no pyproject.toml with a [tool.netc] table" in proc.stderr
    cases = {
        PYPROJECT.replace('torch = "gen/elman_torch.py"', 'torc = "gen/elman_torch.py"'): (
            "pyproject.toml: error: tool.netc.models[0].torc: unknown key"
        ),
        PYPROJECT.replace('"gen/{stem}_torch.py"', '"gen/all_torch.py"'): (
            "tool.netc.models[1]: `source` is a glob, so output paths need `{stem}`"
        ),
        PYPROJECT.replace("models/elman.py", "models/nope.py"): "`source = 'models/nope.py'` is not a file",
        PYPROJECT.replace("models/rnn_*.py", "other/*.py"): "`source = 'other/*.py'` matches no file",
        PYPROJECT + '\n[[tool.netc.models]]\nsource = "models/elman.py"\n': (
            "tool.netc.models[2]: give an output path for at least one target"
        ),
        PYPROJECT.replace('returnn = "gen/elman_config.py"', 'returnn = "gen/elman_torch.py"'): (
            "gen/elman_torch.py is also the output of models/elman.py"
        ),
        PYPROJECT + "[tool.netc\n": "pyproject.toml: error: not valid TOML",
    }
    for k, (pyproject, message) in enumerate(cases.items()):
        root = make_project(tmp_path / f"p{k}", pyproject)
        for args in (["check"], ["compile", "--all"])[: 2 if k == 0 else 1]:  # both read it the same way
            proc = netc(*args, cwd=root)
            assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
            assert "Traceback" not in proc.stderr
    root = make_project(tmp_path / "usage")
    assert netc("check", "--torch", "x.py", cwd=root).returncode == 2
    assert netc("compile", "--all", "models/elman.py", cwd=root).returncode == 2
    assert netc("compile", cwd=root).returncode == 2


def test_construct_runs_each_file_in_returnn_and_torch(tmp_path, netc):
    root = make_project(
        tmp_path / "demo",
        PYPROJECT
        + '\n[[tool.netc.models]]\nsource = "models/broken.py"\nreturnn = "gen/broken_config.py"\n'
        + 'base-config = "base.py"\n',
    )
    shutil.copy(EXAMPLES / "elman.py", root / "models" / "broken.py")
    (root / "base.py").write_text('raise RuntimeError("no data set here")\n')
    netc("compile", "--all", cwd=root, check=True)
    proc = netc("check", "--construct", "--format", "json", cwd=root)
    assert proc.returncode == 1
    report = {m["source"]: m for m in json.loads(proc.stdout)["models"]}
    assert [(t["target"], t["construct"]) for t in report["models/elman.py"]["targets"]] == [
        ("returnn", "ok"),
        ("torch", "ok"),
    ]
    assert report["models/rnn_gru.py"]["targets"][0]["construct"] == "ok"
    broken = report["models/broken.py"]
    assert broken["status"] == "error" and broken["targets"][0]["construct"] == "failed"
    problem = broken["problems"][0]
    assert problem["kind"] == "construct" and problem["file"] == "gen/broken_config.py"
    assert "RETURNN could not construct the network" in problem["message"] and "no data set here" in problem["detail"]
    # a success is remembered: the second run constructs nothing, so it does not even import TensorFlow
    (root / "models" / "broken.py").unlink()
    (root / "pyproject.toml").write_text(PYPROJECT)
    again = netc("check", "--construct", cwd=root)
    assert again.returncode == 0 and "models/elman.py: ok (returnn constructed, torch constructed)" in again.stdout
    assert "TensorFlow" not in again.stderr


def test_single_model_check_keeps_its_options_and_gains_the_formats(tmp_path, netc):
    torch_file = tmp_path / "m.py"
    netc("compile", EXAMPLES / "elman.py", "--target", "torch", "-o", torch_file, check=True)
    report = json.loads(netc("check", EXAMPLES / "elman.py", "--torch", torch_file, "--format", "json").stdout)
    assert report["ok"] is True
    assert [(t["target"], t["status"]) for t in report["models"][0]["targets"]] == [
        ("returnn", "unchecked"),
        ("torch", "ok"),
        ("returnn-torch", "unchecked"),
    ]


def test_github_annotations_escape_what_would_end_a_property_or_the_message():
    p = Problem("compile", "dir,a:b.py", "50% of\nthe line", line=3, col=1)
    assert github_annotation(p) == "::error file=dir%2Ca%3Ab.py,line=3,col=1,title=netc check::50%25 of%0Athe line\n"


def test_pre_commit_hooks_run_netc_on_the_project(project, netc):
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"netc-check", "netc-compile"}
    for hook in hooks.values():
        assert hook["pass_filenames"] is False and hook["language"] == "python" and hook["always_run"] is True
        program, *args = hook["entry"].split()
        assert program == "netc"
        proc = netc(*args, cwd=project)
        assert proc.returncode == 0, proc.stderr
