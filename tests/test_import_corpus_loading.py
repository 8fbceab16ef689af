"""`netc import` loading configs as their authors ran them (the public corpus's idioms, in configs
written here): from the config's folder (relative `sys.path` entries, modules beside it), what only
the cluster has (a module, `Util.generic_import_module` of a file, a command) as placeholders,
`extern_data` in its old `(dim, ndim)` form and with a `vocab` file, a network built by
`get_network(epoch)` (the last epoch's), and a placeholder that the network or the config's flow
needs: a located refusal, never a traceback."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import run_netc

AS_ON_THE_CLUSTER = """
#!rnn.py
import sys
from subprocess import check_output
import Util
sys.path.append("../module")  # relative to the config's folder, where its author ran it
from ext import HIDDEN
from helpers import blstm  # a module beside the config
import cachemanager as cm  # a module only the cluster has
cm_config = cm.ClientConfiguration()
cm_config.loadDefault()
PhoneUtils = Util.generic_import_module("/u/someone/tools/PhoneUtils.py")
mapper = PhoneUtils.PhoneMapper(lexicon="/cluster/lexicon.gz")


def cf(filename):  # the cluster's cache manager
    return check_output(["cf", filename]).strip().decode("utf8")


with open("/cluster/segments.txt") as f:  # files only the cluster has, read while it loads
    segments = f.read().split()
import numpy
norm = numpy.loadtxt("/cluster/mean.txt")
train = {"class": "HDFDataset", "files": [cf("/cluster/train.hdf")], "orth_post_process": mapper.map, "seq_list": segments}
extern_data = {"data": (3, 2), "classes": {"dim": 5, "sparse": True, "vocab": {"vocab_file": "/cluster/vocab.txt"}}}
num_epochs = 10


def get_network(epoch, **kwargs):
    n = HIDDEN if epoch >= 5 else 2  # pretraining: a smaller network first
    return {"lstm": blstm(n), "output": {"class": "softmax", "loss": "ce", "from": "lstm"}}
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_config_runs_as_on_its_cluster(tmp_path):
    _write(tmp_path / "setup/module/ext.py", "HIDDEN = 4\n")
    _write(
        tmp_path / "setup/config/helpers.py",
        """
        def blstm(n):
            return {"class": "rec", "unit": "nativelstm2", "n_out": n, "from": "data"}
        """,
    )
    cfg = _write(tmp_path / "setup/config/cfg.config", AS_ON_THE_CLUSTER)
    model = tmp_path / "model.py"
    proc = run_netc("import", cfg, "-o", model)
    assert proc.returncode == 0, proc.stderr
    assert "--no-exec" not in proc.stderr  # it ran
    notes = [line.split(": note: ", 1)[1] for line in proc.stderr.splitlines() if ": note: " in line]
    assert (
        "the config imports the modules 'cachemanager', '/u/someone/tools/PhoneUtils.py', which only its cluster "
        "has: placeholders here (a layer that reads one is refused)" in notes
    )
    assert "the config runs the command 'cf', which only its cluster has: empty output here" in notes
    assert (
        "the config reads the files '/cluster/segments.txt', '/cluster/mean.txt', which only its cluster has: "
        "placeholders here (a layer that reads one is refused)" in notes
    )
    assert "the network is `get_network(epoch=10)`, its last epoch (`num_epochs` 10)" in notes
    text = model.read_text()
    assert 'lstm_dim = Dim("lstm", 4)' in text  # the last epoch's network, not pretraining's
    assert "data: Tensor[batch, time, feat]" in text and "classes: Labels[batch, time, vocab]" in text


def test_placeholder_in_a_layer_or_in_the_flow_is_a_located_error(tmp_path):
    head = "#!rnn.py\nimport cachemanager as cm\nnum_inputs = 3\nnum_outputs = 5\n"
    net = """
        network = {
            "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": HIDDEN, "from": "data"},
            "l2": {"class": "linear", "activation": ACT, "n_out": 4, "from": "lstm"},
            "output": {"class": "softmax", "loss": "ce", "from": "l2"},
        }
        """
    # a layer reads a placeholder: that layer is refused, at its line
    cfg = _write(tmp_path / "a.config", head + textwrap.dedent(net).replace("HIDDEN", "4").replace("ACT", "cm.act()"))
    proc = run_netc("import", cfg, "-o", tmp_path / "a.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        f"{cfg}:8:5: error: layer `l2` (linear): option activation is a Python object, not data: "
        "<cachemanager.act(...): of `cachemanager`, which is not here>"
    ) in proc.stderr
    # a layer's value read from a file only the cluster has (a statistic of its data): refused at the layer
    text = head + "import numpy\n" + textwrap.dedent(net).replace("HIDDEN", "4").replace("ACT", '"tanh"')
    text = text.replace(
        '"from": "l2"},',
        '"from": "l2"},\n    "mean": {"class": "constant", "value": numpy.loadtxt("m.txt"), "is_output_layer": True},',
    )
    cfg = _write(tmp_path / "c.config", text)
    proc = run_netc("import", cfg, "-o", tmp_path / "c.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "layer `mean` (constant): option value is a Python object, not data: <numpy.loadtxt('m.txt')" in proc.stderr
    # the config's flow needs one: running it fails there (and --no-exec cannot evaluate the module)
    text = head + "HIDDEN = 4 if cm.enabled() else 5\n" + textwrap.dedent(net).replace("ACT", '"tanh"')
    cfg = _write(tmp_path / "b.config", text)
    proc = run_netc("import", cfg, "-o", tmp_path / "b.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(
        f"{cfg}:5:10: error: the config fails to load: AbsentError: `cachemanager.enabled(...)` is needed: "
        "`cachemanager` is not here (and --no-exec cannot read it either: line 5: --no-exec cannot evaluate the "
        "module `cachemanager` (imported at line 2))"
    ), proc.stderr
