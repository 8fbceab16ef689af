"""`netc import --no-exec`: the config evaluated from its syntax, never run. Where the restricted
language covers a config, the model and name map are those of the default import (RETURNN running
the config); code the network needs outside the language is a located error; code it does not need
(datasets, unused functions) is skipped; nothing of the file ever runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, assert_located_error, netc_in_process, run_netc

CONFIGS = ROOT / "tests" / "import_configs"
# configs of tests/import_configs/ that call functions (or a class) they define: outside
# --no-exec's language, refused at the call
REFUSED = {
    "task_dependent.config": "the function `blstm`",
    "conformer.config": "the function `add_conformer_block`",
    "pretrain.config": "the function `get_net_dict`",
    "transformer_class.config": "the class `TransformerNetwork`",
    "transformer_decoder.config": "the function `add_dec_layer`",
    "hybrid_upsampled.config": "the function `add_block`",
    # (its `DimensionTag`, RETURNN's older name of `Dim`, is read: the refusal is at the call after it)
    "factored_labels.config": "the function `labels`",
}
# configs that give a function of theirs as an option's value (an `eval` that is a function)
FUNCTION_VALUES = {"corpus_size_base.config": "the function `switchout_target`"}


def _import_both(config: Path, tmp_path: Path, *opts: str) -> tuple[str, str]:
    """The model and name map written by the default import and by --no-exec: each as text."""
    out = []
    for mode in ((), ("--no-exec",)):
        tag = "noexec" if mode else "exec"
        model, names = tmp_path / f"{tag}.py", tmp_path / f"{tag}.json"
        netc_in_process("import", config, "-o", model, "--param-map", names, *opts, *mode, check=True)
        out.append(model.read_text() + names.read_text())
    return out[0], out[1]


def _write(tmp_path: Path, text: str, name: str = "cfg.config") -> tuple[Path, str]:
    path = tmp_path / name
    src = textwrap.dedent(text).lstrip()
    path.write_text(src)
    return path, src


# RETURNN's documented examples (`doc_*`) are plain dicts, forms the other configs cover: left out for test time
NO_EXEC = sorted(
    p.name
    for p in CONFIGS.glob("*.config")
    if p.name not in REFUSED and p.name not in FUNCTION_VALUES and not p.name.startswith("doc_")
)


@pytest.mark.parametrize("config", NO_EXEC)
def test_no_exec_imports_as_running_the_config(tmp_path, config):
    exec_text, noexec_text = _import_both(CONFIGS / config, tmp_path)
    assert "@network" in noexec_text
    assert noexec_text == exec_text


@pytest.mark.parametrize("config", sorted(REFUSED))
def test_configs_calling_their_functions_are_refused(tmp_path, config):
    proc = run_netc("import", CONFIGS / config, "--no-exec", "-o", tmp_path / "out.py")
    assert proc.returncode == 1 and not (tmp_path / "out.py").exists()
    assert f"error: --no-exec cannot evaluate a call of {REFUSED[config]} of the config" in proc.stderr


@pytest.mark.parametrize("config", sorted(FUNCTION_VALUES))
def test_configs_giving_their_functions_as_values_are_refused(tmp_path, config):
    proc = run_netc("import", CONFIGS / config, "--no-exec", "-o", tmp_path / "out.py")
    assert proc.returncode == 1 and not (tmp_path / "out.py").exists()
    assert f"error: --no-exec cannot evaluate {FUNCTION_VALUES[config]} of the config" in proc.stderr


LANGUAGE = """
    #!rnn.py
    # comprehensions, f-strings, .format, dict(), config.int/value from --set, `if` on the task, a
    # `for` with `break`/`else`, a dict put into the network and changed afterwards, `network.update`
    from returnn.tf.util.data import FeatureDim, SpatialDim, batch_dim

    task = config.value("task", "train")
    layers = config.int("layers", 2)
    time_dim = SpatialDim("time")
    feat = FeatureDim("feat", 6)
    hidden = FeatureDim("hidden", feat.dimension * 2)
    extern_data = {
        "data": {"dim_tags": [batch_dim, time_dim, feat]},
        "classes": {"dim": 5, "shape": (None,), "sparse": True},
    }
    first = config.value("first", None) or "tanh"  # a value given on the command line, else "tanh"
    acts = [first] + eval(config.value("acts", "['relu', 'sigmoid', 'tanh']"))  # of a Python literal
    network = {f"layer{i}": {"class": "linear", "activation": acts[i], "out_dim": hidden} for i in range(layers)}
    for i in range(1, len(acts)):
        if i >= layers:
            break
        network["layer{}".format(i)]["from"] = "layer%i" % (i - 1)
    else:
        network["never"] = {"class": "copy"}
    network["layer0"] = dict(network["layer0"], **{"from": "data"})
    head = {"class": "softmax", "from": "layer%i" % (layers - 1), "target": "classes"}
    network.update({"output": head})
    head["loss"] = "ce"  # `head` is in the network: this changes it
    if task == "train":
        head["dropout"] = 0.1
"""


@pytest.mark.parametrize("opts", [(), ("--set", "layers=3", "--set", "task=search")])
def test_no_exec_language_gives_what_running_gives(tmp_path, opts):
    path, _ = _write(tmp_path, LANGUAGE)
    exec_text, noexec_text = _import_both(path, tmp_path, *opts)
    assert noexec_text == exec_text
    assert ("dropout(" in noexec_text) == (not opts) and ("layer2" in noexec_text) == bool(opts)


def test_functions_the_network_needs_are_refused_at_the_call(tmp_path):
    config = CONFIGS / "task_dependent.config"
    proc = run_netc("import", config.name, "--no-exec", "-o", tmp_path / "out.py", cwd=CONFIGS)
    src = config.read_text()
    message = "--no-exec cannot evaluate a call of the function `blstm` of the config (line 15)"
    assert_located_error(proc, src, config.name, 32, 'blstm("enc0"', message)
    assert not (tmp_path / "out.py").exists()


@pytest.mark.parametrize(
    "code, line, at, message",
    [
        (
            'class Net:\n    layers = {"output": {"class": "copy", "from": "data"}}\nnetwork = Net().layers\n',
            3,
            "Net()",
            "a call of the class `Net` of the config (line 3)",
        ),
        (
            'import os\nnetwork = {"output": {"class": "copy", "from": os.path.basename("/x/data")}}\n',
            2,
            "os.path",
            "the module `os` (imported at line 3)",
        ),
        ('network = {"output": (lambda: {"class": "copy", "from": "data"})()}\n', 1, "lambda", "a `lambda`"),
        ("network = {}\nlocals().update(network=network)\n", 2, "locals", "a call of the builtin `locals`"),
        ("network = {}\nn = 0\nwhile n < 2:\n    network[n] = {}\n    n += 1\n", 3, "while", "a `while` loop"),
        (
            'network = {"output": {"class": "copy"}}\nnetwork.output = 1\n',
            2,
            "network.output",
            "an assignment to the attribute `.output`",
        ),
        ('x = {"a": 1}\nnetwork = {"output": x.popitem()}\n', 2, "x.popitem", "a call of `.popitem` on"),
    ],
)
def test_constructs_outside_the_language_are_located(tmp_path, code, line, at, message):
    src = "#!rnn.py\n" + 'extern_data = {"data": {"dim": 4, "shape": (None, 4)}}\n' + code
    path = tmp_path / "bad.config"
    path.write_text(src)
    proc = run_netc("import", path.name, "--no-exec", "-o", "out.py", cwd=tmp_path)
    assert_located_error(proc, src, path.name, line + 2, at, "--no-exec cannot evaluate " + message)


def test_what_the_network_does_not_need_is_skipped(tmp_path):
    """A dataset that would fail if run (a missing file), functions and imports only it uses, a
    `task` outside the language: the default import fails where the config asserts, --no-exec
    imports the network."""
    path, src = _write(
        tmp_path,
        """
        #!rnn.py
        import os

        data_dir = "/nonexistent/corpus"
        assert os.path.exists(data_dir), "no corpus at " + data_dir


        def get_dataset(name):
            from my_setup.datasets import make_dataset

            return make_dataset(os.path.join(data_dir, name + ".hdf"))


        task = os.environ.get("TASK", "train")  # not needed by the network: no error
        train = get_dataset("train")
        dev = get_dataset("dev")
        learning_rate = 0.001
        extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
        network = {"output": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"}}
        """,
    )
    # run, its file check is answered as on its cluster, the module only the cluster has a placeholder
    # (the datasets that use it are never built), saying so; --no-exec gives the same model
    proc = run_netc("import", path.name, "-o", "exec.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "note: the config imports the module 'my_setup', which only its cluster has" in proc.stderr
    run_netc("import", path.name, "--no-exec", "-o", "noexec.py", cwd=tmp_path, check=True)
    assert "output = tanh(Linear(" in (tmp_path / "noexec.py").read_text()
    assert (tmp_path / "exec.py").read_text() == (tmp_path / "noexec.py").read_text()


@pytest.mark.parametrize(
    "code, at, message",
    [
        ("__import__('os').system('touch {marker}')", "__import__", "a call of the builtin `__import__`"),
        ("open('{marker}', 'w').write('x')", "open", "a call of the builtin `open`"),
        ("'{{0.__class__}}'.format(1)", "'{{0", "the format field `{{0.__class__}}`"),
        ("[].__class__.__base__.__subclasses__()", "[].__class__", "the attribute `.__class__`"),
        ("'x' * 10 ** 10", "'x' *", "a value this large"),
    ],
)
def test_no_exec_runs_nothing_of_the_config(tmp_path, code, at, message):
    """Code in the network's own expression is refused, not run: the marker file is never made."""
    marker = tmp_path / "marker"
    code, at, message = (s.format(marker=marker) for s in (code, at, message))
    src = f'#!rnn.py\nnetwork = {{"output": {{"class": "copy", "from": {code}}}}}\n'
    path = tmp_path / "evil.config"
    path.write_text(src)
    proc = run_netc("import", path.name, "--no-exec", "-o", "out.py", cwd=tmp_path)
    assert_located_error(proc, src, path.name, 2, at, "--no-exec cannot evaluate " + message)
    assert not marker.exists()


def test_code_the_network_does_not_need_is_not_run(tmp_path):
    """A file write outside what the network needs is skipped (never run), and the import succeeds;
    running the config (the default) does make the file."""
    marker = tmp_path / "marker"
    path, _ = _write(
        tmp_path,
        f"""
        #!rnn.py
        log = open({str(marker)!r}, "w")
        log.write("loaded")
        extern_data = {{"data": {{"dim": 4, "shape": (None, 4)}}}}
        network = {{"output": {{"class": "linear", "n_out": 3, "from": "data"}}}}
        """,
    )
    run_netc("import", path.name, "--no-exec", "-o", "noexec.py", cwd=tmp_path, check=True)
    assert not marker.exists()
    run_netc("import", path.name, "-o", "exec.py", cwd=tmp_path, check=True)
    assert marker.exists()
    assert (tmp_path / "noexec.py").read_text() == (tmp_path / "exec.py").read_text()


def test_loss_without_target_reads_the_configs_default_target(tmp_path):
    """A `ce` loss without `target` reads RETURNN's default target: the config's `target`
    (else `classes`), as running the config and as --no-exec evaluates it."""
    path, _ = _write(
        tmp_path,
        """
        #!rnn.py
        target = "labels"
        extern_data = {
            "data": {"dim": 4, "shape": (None, 4)},
            "labels": {"dim": 3, "shape": (None,), "sparse": True},
            "classes": {"dim": 5, "shape": (None,), "sparse": True},
        }
        network = {"output": {"class": "softmax", "loss": "ce", "from": "data"}}
        """,
    )
    exec_text, noexec_text = _import_both(path, tmp_path)
    assert noexec_text == exec_text
    assert "mark_as_loss(cross_entropy(output_logits, labels, axis=vocab)" in exec_text, exec_text
