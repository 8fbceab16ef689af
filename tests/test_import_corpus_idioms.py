"""`netc import` on the idioms of real RETURNN configs (the public corpus's, in configs written
here): configs that check their cluster's files or cannot run here at all, the old forms of the
inputs (`num_outputs`/`num_inputs`, `DimensionTag`, `same_dim_tags_as`), options at RETURNN's
defaults and training-only ones, layers RETURNN builds only when evaluating, old names of layer
classes and units, networks deeper than Python's recursion limit, and a decoder bounded by a pooled
encoder (`max_len_from`), which `netc verify` must draw targets for within that bound."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import run_netc
from test_import import _compare, run_original

NET = """
network = {
    "lstm_fw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "direction": 1, "from": "data"},
    "output": {"class": "softmax", "loss": "ce", "from": "lstm_fw"},
}
"""


def _d(text: str, net: str = NET) -> str:
    return textwrap.dedent(text).lstrip() + net


def _import(tmp_path: Path, text: str, name: str = "cfg.config"):
    cfg = tmp_path / name
    cfg.write_text(text)
    model = tmp_path / "model.py"
    proc = run_netc("import", cfg, "-o", model)
    return proc, (model.read_text() if model.exists() else ""), cfg


def test_file_checks_of_the_config_are_answered_as_on_its_cluster(tmp_path):
    proc, model, cfg = _import(
        tmp_path,
        _d(
            """
        #!rnn.py
        import os
        alignment = "/cluster/work/align.hdf"
        assert os.path.exists(alignment), "alignment %r does not exist" % alignment
        if not os.path.isfile("/cluster/work/cart.xml"):
            raise Exception("no CART")
        num_inputs = 3
        num_outputs = 5
        """
        ),
    )
    assert proc.returncode == 0, proc.stderr
    assert "note: the config ran with its checks of files that are not here answered True" in proc.stderr
    assert "'/cluster/work/align.hdf', '/cluster/work/cart.xml'" in proc.stderr
    assert "lstm_fw = Lstm(" in model


def test_command_line_value_the_config_fails_without_is_a_placeholder_string(tmp_path):
    # `ext_model + ".index"` of `config.value("ext_model", None)`: RETURNN needs `++ext_model` here
    text = """
        #!rnn.py
        import os
        ext_model = config.value("ext_model", None)
        ext_epochs = config.value("ext_epochs", None)
        model_check = ext_model + ".250.index"
        if not os.path.exists(model_check):
            raise Exception("no model")
        num_inputs = 3
        num_outputs = 5
        """
    proc, model, cfg = _import(tmp_path, _d(text))
    assert proc.returncode == 0, proc.stderr
    assert "note: the config fails to load without the command-line value 'ext_model' (`config.value(name, None)`" in (
        proc.stderr
    )
    assert "lstm_fw = Lstm(" in model
    # None in arithmetic of a value not read from the command line: the config's own failure (read without running)
    proc, model, cfg = _import(tmp_path, _d(text.replace('ext_model + ".250.index"', 'os.environ.get("NO_VAR") + "x"')))
    assert "not given" not in proc.stderr, proc.stderr
    assert "fails to load here (line 5: TypeError: unsupported operand type(s) for +: 'NoneType' and 'str')" in (
        proc.stderr
    ), proc.stderr


def test_config_that_cannot_run_here_is_read_without_running_it(tmp_path):
    proc, model, cfg = _import(
        tmp_path,
        _d(
            """
        #!rnn.py
        vocab_size = len(open("/cluster/work/vocab.txt").read().split())  # a file only the cluster has
        num_inputs = 3
        num_outputs = {"classes": [5, 1]}
        """
        ),
    )
    assert proc.returncode == 0, proc.stderr
    assert "note: the config fails to load here (line 2: AbsentError: `open('/cluster/work/vocab.txt')" in proc.stderr
    assert "read with --no-exec" in proc.stderr
    assert "lstm_fw = Lstm(" in model


def test_config_that_neither_runs_nor_reads_is_one_located_error(tmp_path):
    proc, model, cfg = _import(
        tmp_path,
        _d(
            """
        #!rnn.py
        sizes = open("/cluster/work/sizes.txt").read().split()
        num_inputs = 3
        num_outputs = int(sizes[0])
        """
        ),
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{cfg}:4:")  # where running it failed, and why --no-exec cannot help
    assert "error: the config fails to load: AbsentError: `open('/cluster/work/sizes.txt').read(...)" in proc.stderr
    assert "(and --no-exec cannot read it either: line 2: --no-exec cannot evaluate a call of the builtin `open`)" in (
        proc.stderr
    )


@pytest.mark.parametrize(
    "inputs",
    [
        "num_inputs = 3\nnum_outputs = 5",  # an int: the target's classes
        'num_outputs = {"classes": 5, "data": 3}',  # ints by key: labels, and data dense
        'num_outputs = {"classes": [5, 1], "data": [3, 2]}',  # [dim, ndim]
        'num_outputs = {"classes": {"dim": 5, "shape": (None,), "sparse": True}, "data": [3, 2]}',  # Data kwargs
        'target = "labels"\nnum_inputs = 3\nnum_outputs = 5',  # the int is the config's `target`'s
    ],
)
def test_num_outputs_in_each_form_returnn_accepts(tmp_path, inputs):
    net = NET.replace('"loss": "ce",', '"loss": "ce", "target": "labels",') if "labels" in inputs else NET
    proc, model, cfg = _import(tmp_path, "#!rnn.py\n" + inputs + "\n" + net)
    assert proc.returncode == 0, proc.stderr
    labels = "labels" if "labels" in inputs else "classes"
    assert f"{labels}: Labels[batch, time, vocab]" in model
    assert 'feat = Dim("feat", 3)' in model and 'vocab = Dim("vocab", 5)' in model


def test_json_config_with_num_outputs(tmp_path):
    proc, model, cfg = _import(
        tmp_path,
        _d(
            """
        {
        // RETURNN's older config format
        "num_inputs": 3,
        "num_outputs": 5,
        "network": {
        "l1": {"class": "hidden", "activation": "tanh", "n_out": 4},
        "lstm_fw": {"class": "rec", "unit": "lstmp", "n_out": 4, "from": ["l1"]},
        "output": {"class": "softmax", "loss": "ce", "from": ["lstm_fw"]}
        }
        }
        """,
            "",
        ),
    )
    assert proc.returncode == 0, proc.stderr
    assert "l1 = tanh(Linear(" in model and "lstm_fw = Lstm(" in model  # `hidden` is `linear`, `lstmp` NativeLSTM2


def test_options_at_defaults_and_training_only_options(tmp_path):
    proc, model, cfg = _import(
        tmp_path,
        _d(
            """
        #!rnn.py
        num_inputs = 3
        num_outputs = 5
        network = {
            "l1": {"class": "linear", "activation": "tanh", "n_out": 4, "L2": 0.01, "darc1": None,
                   "spatial_smoothing": 0.0, "batch_norm": False, "dropout_on_forward": False},
            "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "l1",
                     "cheating": config.bool("cheating", False), "back_prop": True, "L2": 0.01},
            "output": {"class": "softmax", "loss": "ce", "from": "lstm", "param_variational_noise": 0.075},
            "error": {"class": "copy", "from": "output", "only_on_eval": True, "is_output_layer": True},
        }
        """,
            "",
        ),
    )
    assert proc.returncode == 0, proc.stderr
    assert "note: `L2` dropped on `lstm`, `l1`: an L2 penalty" in proc.stderr  # in the order read
    assert "note: `param_variational_noise` dropped on `output`: Gaussian noise" in proc.stderr
    assert "note: `back_prop` dropped on `lstm`" in proc.stderr
    assert "note: layer `error` (copy, `only_on_eval`) left out" in proc.stderr
    assert "darc1" not in proc.stderr and "cheating" not in proc.stderr  # at RETURNN's defaults: no difference
    assert "error" not in model.split("@network")[1]


def test_option_returnns_layers_do_not_take_is_refused_as_such(tmp_path):
    proc, model, cfg = _import(
        tmp_path,
        _d(
            """
        #!rnn.py
        num_inputs = 3
        num_outputs = 5
        network = {
            "lstm_fw": {"class": "rec", "unit": "lstmp", "n_out": 4, "sampling": 2},
            "output": {"class": "softmax", "loss": "ce", "from": "lstm_fw"},
        }
        """,
            "",
        ),
    )
    assert proc.returncode == 1
    # Theano's frame subsampling other than its default 1 (`sampling: 1` imports: the runner's test)
    assert (
        f"{cfg}:5:5: error: layer `lstm_fw` (rec): option sampling: 2 of an older RETURNN (the Theano backend's frame "
        "subsampling of the rec layer: every n-th frame scanned; the installed RETURNN rejects it) is not supported: "
        "only its default 1"
    ) in proc.stderr, proc.stderr
    text = cfg.read_text().replace('"sampling": 2', '"sampling": 1')
    cfg.write_text(text.replace('"from": "lstm_fw"}', '"from": "lstm_fw", "peepholes_x": 1}'))
    proc = run_netc("import", cfg, "-o", tmp_path / "m2.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert (
        f"{cfg}:6:5: error: layer `output` (softmax): option peepholes_x is not an option of RETURNN's `softmax` layer"
    ) in proc.stderr, proc.stderr


def test_network_deeper_than_pythons_recursion_limit(tmp_path):
    layers = "".join(
        f'    "l{i}": {{"class": "linear", "activation": "tanh", "n_out": 3, "from": "{f"l{i - 1}" if i else "data"}"}},\n'
        for i in range(700)
    )
    text = f'#!rnn.py\nnum_inputs = 3\nnum_outputs = 5\nnetwork = {{\n{layers}    "output": {{"class": "softmax", "loss": "ce", "from": "l699"}},\n}}\n'
    proc, model, cfg = _import(tmp_path, text)
    assert proc.returncode == 0, proc.stderr
    assert "l699 = tanh(Linear(" in model


def test_old_dimension_tag_and_same_dim_tags_as(tmp_path):
    """`TFUtil.DimensionTag(kind=..., description=...)` (RETURNN's old signature, no dimension) and
    `same_dim_tags_as` in extern_data: a frame-wise alignment over the features' time dim."""
    proc, model, cfg = _import(
        tmp_path,
        _d(
            """
        #!rnn.py
        from TFUtil import DimensionTag
        time_tag = DimensionTag(kind=DimensionTag.Types.Spatial, description="time")
        extern_data = {
            "data": {"dim": 3, "same_dim_tags_as": {"t": time_tag}},
            "alignment": {"dim": 5, "sparse": True, "same_dim_tags_as": {"t": time_tag}},
        }
        network = {
            "lstm_fw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "data"},
            "output": {"class": "softmax", "loss": "ce", "target": "alignment", "from": "lstm_fw"},
        }
        """,
            "",
        ),
    )
    assert proc.returncode == 0, proc.stderr
    assert "data: Tensor[batch, time, feat]" in model and "alignment: Labels[batch, time, vocab]" in model


def test_old_dimension_tag_also_where_returnn_was_imported_before(tmp_path):
    """The old signature also where `returnn.tf.util.data` was imported (and its `DimensionTag` the
    new `Dim`) before the config runs: the corpus runner's match stage loads the original after
    its verify stage ran RETURNN in the same process."""
    import returnn.tf.util.basic as basic_module
    import returnn.tf.util.data as data_module
    from returnn.config import Config
    from returnn.tensor import Dim

    from netc.importer._as_run import AsRun

    cfg = tmp_path / "old.config"
    cfg.write_text(
        "#!rnn.py\nfrom TFUtil import DimensionTag\n"
        'time_tag = DimensionTag(kind=DimensionTag.Types.Spatial, description="time")\n'
    )
    modules = (basic_module, data_module)
    before = [m.DimensionTag for m in modules]
    for m in modules:
        m.DimensionTag = Dim  # as RETURNN defines it
    try:
        config = Config()
        with AsRun(str(cfg)) as run:
            run.load(config)
        assert config.typed_dict["time_tag"].description == "time"
    finally:
        for m, b in zip(modules, before, strict=True):
            m.DimensionTag = b


DECODER = """
#!rnn.py
# A decoder bounded by `max_len_from` a pooled encoder; the labels come first in extern_data.
extern_data = {
    "classes": {"dim": 6, "shape": (None,), "sparse": True},
    "data": {"dim": 3, "shape": (None, 3)},
}
network = {
    "lstm_fw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "direction": 1, "from": "data"},
    "lstm_bw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "direction": -1, "from": "data"},
    "pool": {"class": "pool", "mode": "max", "padding": "same", "pool_size": (2,), "from": ["lstm_fw", "lstm_bw"]},
    "encoder": {"class": "copy", "from": "pool"},
    "enc_mean": {"class": "reduce", "mode": "mean", "axes": "T", "from": "encoder"},
    "output": {
        "class": "rec",
        "from": [],
        "unit": {
            "output": {"class": "choice", "target": "classes", "beam_size": 3, "from": "prob", "initial_output": 0},
            "end": {"class": "compare", "from": "output", "value": 0},
            "embed": {"class": "linear", "activation": None, "with_bias": False, "from": "output", "n_out": 4,
                      "initial_output": 0},
            "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["prev:embed", "base:enc_mean"], "n_out": 5},
            "prob": {"class": "softmax", "from": "s", "target": "classes", "loss": "ce"},
        },
        "target": "classes",
        "max_seq_len": "max_len_from('base:encoder')",
    },
}
"""


def test_decoder_bounded_by_a_pooled_encoder_verifies(tmp_path):
    proc, model, cfg = _import(tmp_path, DECODER)
    assert proc.returncode == 0, proc.stderr
    assert "for _ in range(encoder.max_seq_len):" in model
    # verify draws each target within its encoder's pooled frames (training runs over the target)
    for extra in ([], ["--search"]):
        out = run_netc("verify", tmp_path / "model.py", *extra)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "verify: ok" in out.stdout


def test_decoder_bounded_by_a_float_factor_of_the_encoder_verifies(tmp_path):
    """`tf.to_int32(tf.to_float(max_len_from(...)) * 1.5)`: TF's float32 product (exact) cast down,
    `n * 3 // 2`; 1.3, whose float32 is below 1.3 (13 * 10 // 10 is 12 in TF), is refused at the layer."""
    bound = "\"tf.to_int32(tf.to_float(max_len_from('base:encoder')) * 1.5)\""
    proc, model, cfg = _import(tmp_path, DECODER.replace("\"max_len_from('base:encoder')\"", bound))
    assert proc.returncode == 0, proc.stderr
    assert "for _ in range(encoder.max_seq_len * 3 // 2):" in model
    for extra in ([], ["--search"]):
        out = run_netc("verify", tmp_path / "model.py", *extra)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "verify: ok" in out.stdout
    proc, _, _ = _import(tmp_path, DECODER.replace("\"max_len_from('base:encoder')\"", bound.replace("1.5", "1.3")))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert ":14:5: error: layer `output` (rec): max_seq_len" in proc.stderr, proc.stderr
    assert "the factor 1.3 (one whose TF product, cast down, is `n * p // q` for every length n" in proc.stderr
    # the bound of a search in training, over the decoder's own target: netc's search reads no target
    own = bound.replace("base:encoder", "data:classes")
    proc, _, _ = _import(tmp_path, DECODER.replace("\"max_len_from('base:encoder')\"", own))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert ":14:5: error: layer `output` (rec): max_seq_len" in proc.stderr, proc.stderr
    assert "a bound of the decoder's own target `classes`" in proc.stderr


SPEC_AUGMENT = """
#!rnn.py
num_inputs = 3
num_outputs = 5


def transform(data, network):
    x = data.placeholder
    from returnn.tf.compat import v1 as tf

    def get_masked():
        return x * tf.cast(tf.random.uniform(tf.shape(x)) > 0.1, tf.float32)

    x = network.cond_on_train(get_masked, lambda: x)
    return x


def scaled(data, network):
    x = data.placeholder
    x = x * 2.0
    x = network.cond_on_train(lambda: x + 1.0, lambda: x)
    return x


def stepped(data, network):
    x = data.placeholder
    return network.cond_on_train(lambda: x, lambda: x * tf.cast(network.global_train_step, tf.float32))


def first_over_half(x):
    cs = tf.cumsum(x, axis=1) - 0.5
    return tf.argmin(tf.where(cs > 0.0, cs, tf.ones_like(cs)), axis=1)


network = {
    "source": {"class": "eval", "eval": "self.network.get_config().typed_value('transform')(source(0, as_data=True), network=self.network)"},
    "output": {"class": "softmax", "loss": "ce", "from": "source"},
}
"""


def test_spec_augment_recipe_is_its_input_outside_training(tmp_path):
    proc, model, cfg = _import(tmp_path, SPEC_AUGMENT)
    assert proc.returncode == 0, proc.stderr
    assert (
        "note: layer `source` (eval): the config's `transform` (line 7) computes its input outside training"
        in proc.stderr
    )
    assert "source = data" in model
    # a function that changes its input outside training too: what it computes there
    proc, model, cfg = _import(tmp_path, SPEC_AUGMENT.replace("typed_value('transform')", "typed_value('scaled')"))
    assert proc.returncode == 0 and "source = data * 2.0" in model, proc.stderr
    # one whose result outside training reads what netc cannot know: refused, naming it
    proc, model, cfg = _import(tmp_path, SPEC_AUGMENT.replace("typed_value('transform')", "typed_value('stepped')"))
    assert proc.returncode == 1, proc.stderr
    assert "`global_train_step` of the network not understood (outside training)" in proc.stderr, proc.stderr
    # a comparison of tensors (the local-attention setups' median) is the eval's `tf.greater`; its
    # cumulative sum over an axis number of a source whose layout netc does not know: refused, naming it
    first = "typed_dict['first_over_half'](source(0))"
    proc, model, cfg = _import(
        tmp_path,
        SPEC_AUGMENT.replace(
            "get_config().typed_value('transform')(source(0, as_data=True), network=self.network)", "_config." + first
        ),
    )
    assert proc.returncode == 1, proc.stderr
    assert "tf.argmin(tf.where(tf.greater(tf.cumsum(source(0), axis=1) - 0.5, 0.0)" in proc.stderr, proc.stderr
    assert "`tf.cumsum(source(0), axis=1)` (axis=-1, the feature axis, is; other axis numbers" in proc.stderr


SPARSE_DIM = """
#!rnn.py
num_inputs = 3
num_outputs = {"classes": [5, 1]}
network = {
    "scores": {"class": "linear", "activation": None, "n_out": 4, "from": "data"},
    "best": {"class": "reduce", "mode": "argmax", "axes": "F", "from": "scores"},
    "wide": {"class": "reinterpret_data", "set_sparse": True, "set_sparse_dim": 6, "from": "best"},
    "emb": {"class": "linear", "activation": None, "with_bias": False, "n_out": 2, "from": "wide"},
    "both": {"class": "copy", "from": ["emb", "data"]},
    "output": {"class": "softmax", "loss": "ce", "from": "both"},
}
"""


@pytest.mark.parametrize("backend", ["returnn", "torch"])
def test_reinterpret_data_set_sparse_dim_reads_labels_over_another_class_dim(tmp_path, backend):
    # RETURNN's transducers mask the blank away and read the labels over the classes without it; here
    # 4 classes read as 6, whose embedding has 6 rows (the original's parameters carried across)
    cfg = tmp_path / "sparse.config"
    cfg.write_text(SPARSE_DIM)
    model, names = tmp_path / "model.py", tmp_path / "names.json"
    proc = run_netc("import", cfg, "-o", model, "--param-map", names)
    assert proc.returncode == 0, proc.stderr
    assert 'wide = cast(best, "int32", class_dim=wide_classes)' in model.read_text()
    orig = run_original(cfg, [], [[6, 3, 5], [6, 3, 5]])
    _compare("set_sparse_dim", model, json.loads(names.read_text()), orig, backend)
    # of an input that is not labels: refused at the layer
    proc, _, _ = _import(tmp_path, SPARSE_DIM.replace('"from": "best"}', '"from": "scores"}'))
    assert proc.returncode == 1 and "set_sparse True (True of labels, no change, is)" in proc.stderr
    proc, _, _ = _import(
        tmp_path, SPARSE_DIM.replace('"set_sparse": True, ', "").replace('"from": "best"}', '"from": "scores"}')
    )
    assert proc.returncode == 1 and "set_sparse_dim of an input that is not labels (sparse)" in proc.stderr
    # None: RETURNN makes the labels dense int32, which no netc layer reads as RETURNN would
    proc, _, _ = _import(tmp_path, SPARSE_DIM.replace('"set_sparse_dim": 6', '"set_sparse_dim": None'))
    assert proc.returncode == 1 and "set_sparse_dim None (a number of classes or a dim tag)" in proc.stderr


LOAD_ON_INIT = """
#!rnn.py
num_inputs = 3
num_outputs = {"classes": [5, 1]}
network = {
    "lm": {
        "class": "subnetwork",
        "from": "data",
        "load_on_init": "/cluster/lm/net-model/network.028",  # a checkpoint only the cluster has
        "n_out": 4,
        "subnetwork": {
            "hidden": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data"},
            "output": {"class": "copy", "from": "hidden"},
        },
    },
    "output": {"class": "softmax", "loss": "ce", "from": "lm"},
}
"""


def test_subnetwork_loaded_on_init_is_imported_with_a_note(tmp_path):
    # RETURNN setups fuse a language model trained before (`load_on_init` its checkpoint): how the
    # parameters start, not what the layer computes
    proc, model, cfg = _import(tmp_path, LOAD_ON_INIT)
    assert proc.returncode == 0, proc.stderr
    assert "note: layer `lm` (subnetwork): RETURNN initialises its parameters from `load_on_init`" in proc.stderr
    assert "lm = lm_output" in model, model
    # `n_out` is checked against the subnetwork's output, as RETURNN checks it
    proc, _, _ = _import(
        tmp_path, LOAD_ON_INIT.replace('"n_out": 4,\n        "subnetwork"', '"n_out": 7,\n        "subnetwork"')
    )
    assert proc.returncode == 1 and "layer `lm` (subnetwork): n_out 7, but its `output` has 4" in proc.stderr


CELL_DROPOUT = """
#!rnn.py
num_inputs = 3
num_outputs = {"classes": [5, 1]}
network = {
    "rec": {
        "class": "rec",
        "from": "data",
        "unit": {
            "cell": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 4, "dropout": 0.1, "from": "data:source"},
            "output": {"class": "copy", "from": "cell"},
        },
    },
    "output": {"class": "softmax", "loss": "ce", "from": "rec"},
}
"""


def test_rnn_cell_dropout_is_dropout_of_its_input(tmp_path):
    # RETURNN's rnn_cell, as every layer of its inputs, drops out its input in training
    proc, model, cfg = _import(tmp_path, CELL_DROPOUT)
    assert proc.returncode == 0, proc.stderr
    assert "LstmCell(cell_dim)(dropout(data_t, 0.1), (cell, cell_c))" in model, model
    out = run_netc("verify", tmp_path / "model.py")
    assert out.returncode == 0 and "verify: ok" in out.stdout, out.stdout + out.stderr


SWITCH_OF_CONTEXTS = """
#!rnn.py
num_inputs = 3
num_outputs = {"classes": [5, 1]}
network = {
    "fw0": {"class": "linear", "activation": "tanh", "n_out": 2, "from": "data"},
    "bw0": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data"},
    "fw1": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
    "bw1": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
    "model0_att": {"class": "copy", "from": ["fw0", "bw0"]},
    "model1_att": {"class": "copy", "from": ["fw1", "bw1"]},
    "short": {"class": "compare", "kind": "less", "value": 0.0, "from": "first"},
    "first": {"class": "reduce", "mode": "sum", "axes": ["T", "F"], "from": "data"},
    "att": {"class": "switch", "condition": "short", "true_from": "model1_att", "false_from": "model0_att"},
    "output": {"class": "softmax", "loss": "ce", "from": "att"},
}
"""


def test_switch_of_values_over_different_dims_of_one_size_renames_one(tmp_path):
    # the corpus's multi-encoder models pick one attention context per sequence, each over the
    # concatenation of its own encoder's dims: RETURNN matches them by size, netc's dims differ, so
    # the second branch's dim is renamed to the first's (corpus_misc.config compares the numbers)
    proc, model, cfg = _import(tmp_path, SWITCH_OF_CONTEXTS)
    assert proc.returncode == 0, proc.stderr
    assert (
        "att = where(short, model1_att, split_dims(model0_att, axis=fw0_dim + bw0_dim, dims=(feat + feat,)))" in model
    ), model
    from netc.compiler import compile_graph

    compile_graph(str(tmp_path / "model.py"))  # it compiles (corpus_misc.config verifies the construct)


# The corpus's layer-norm LSTM encoders (2019-asr-layer-norm-lstm): BLSTMs of LayerNormVariantsLSTM
# units (`global_norm_joined`, `per_gate_norm`) with max-pooling over time between them
LN_LSTM_POOL = """
#!rnn.py
extern_data = {"data": {"dim": 3}, "classes": {"dim": 5, "shape": (None,), "sparse": True}}
gnj = {"global_norm": False, "global_norm_joined": True, "cell_norm": False}
pgn = {"global_norm": False, "per_gate_norm": True}
network = {
    "l0_fw": {"class": "rec", "unit": "layernormvariantslstm", "unit_opts": gnj, "n_out": 4, "direction": 1, "from": "data"},
    "l0_bw": {"class": "rec", "unit": "layernormvariantslstm", "unit_opts": pgn, "n_out": 4, "direction": -1, "from": "data"},
    "l0_pool": {"class": "pool", "mode": "max", "padding": "same", "pool_size": (2,), "from": ["l0_fw", "l0_bw"]},
    "l1_fw": {"class": "rec", "unit": "layernormvariantslstm", "unit_opts": gnj, "n_out": 4, "direction": 1, "from": "l0_pool"},
    "output": {"class": "softmax", "from": "l1_fw", "loss": "ctc", "target": "classes"},
}
"""


def test_pool_after_lstms_matches_on_multiples_and_differs_where_returnn_reads_padding(tmp_path):
    """RETURNN's `pool` (no `use_time_mask`) lets the padded frame after a shorter sequence of odd
    length into its last window, where RETURNN's LSTMs leave 0: max(last frame, 0), a number of
    the batch (the longest sequence's window has no such frame). netc's `max_pool` takes the
    sequence's own frames: the importer warns at the layer; the numbers agree on even lengths and
    differ at exactly those windows (the corpus runner's match stage draws multiples; it reported
    the corpus's layer-norm LSTM encoders as differing before)."""
    from test_import import _inputs

    from netc.compiler import compile_graph
    from netc.importer.checkpoint import model_value
    from netc_runtime.backends import run_backend

    cfg, names = tmp_path / "ln_pool.config", tmp_path / "names.json"
    cfg.write_text(LN_LSTM_POOL.lstrip())
    proc = run_netc("import", cfg, "-o", tmp_path / "model.py", "--param-map", names, check=True)
    assert f"{cfg}:8:5: warning: layer `l0_pool` (pool): RETURNN's pool without `use_time_mask: True`" in proc.stderr
    names = json.loads(names.read_text())
    even = run_original(cfg, [], [[8, 6, 4], [3, 2, 1]])
    for backend in ("returnn", "torch"):
        _compare("ln_lstm_pool", tmp_path / "model.py", names, even, backend)
    # lengths 7 (the longest), 5 (shorter, odd: its third window reads the padding), 4
    odd = run_original(cfg, [], [[7, 5, 4], [3, 2, 1]])
    g = compile_graph(str(tmp_path / "model.py"))
    params = {names["params"][k]["returnn"]: model_value(v, names["params"][k]) for k, v in odd["params"].items()}
    inputs, lens = _inputs(g, odd)
    res = run_backend("torch", str(tmp_path / "model.py"), inputs, lens, params, g)
    ours, theirs = res.outputs[names["outputs"]["output"]], odd["fetch"]["out:output"]
    diff = np.abs(ours[:, :4] - theirs[:, :4]).max(axis=-1)  # [batch, pooled frame]
    assert diff[0].max() < 1e-5 and diff[2, :2].max() < 1e-5 and diff[1, :2].max() < 1e-5, diff
    assert diff[1, 2] > 1e-3, diff  # the window [4, 5] of the 5 frames: max(frame 4, 0) in RETURNN


# the corpus's 12-layer residual layer-norm BLSTM (2019-asr-layer-norm-lstm/hybrid), small: each
# LSTM a rec unit in netc's RETURNN config, 624 layers in all
DEEP_LN_LSTM = """
#!rnn.py
extern_data = {"data": {"dim": 3}, "classes": {"dim": 5, "sparse": True}}
network = {"output": {"class": "softmax", "loss": "ce", "from": "out11"}}
for i in range(12):
    inp = "data" if i == 0 else "out%i" % (i - 1)
    for name, direction in (("fw", 1), ("bw", -1)):
        network["lstm%i_%s" % (i, name)] = {
            "class": "rec", "unit": "layernormvariantslstm", "n_out": 4, "direction": direction, "from": inp}
    network["out%i" % i] = {"class": "copy", "from": ["lstm%i_fw" % i, "lstm%i_bw" % i]}
    if i > 0:
        network["concat%i" % i] = network["out%i" % i]
        network["out%i" % i] = {"class": "combine", "kind": "add", "from": ["concat%i" % i, inp]}
"""


def test_deep_network_builds_in_returnn(tmp_path):
    # RETURNN builds a layer's sources first, recursively: the netc config of this network went past
    # Python's recursion limit of 1000 (a RecursionError in RETURNN); it now raises the limit
    proc, model, cfg = _import(tmp_path, DEEP_LN_LSTM)
    assert proc.returncode == 0, proc.stderr
    config = run_netc("compile", tmp_path / "model.py", check=True).stdout
    assert "sys.setrecursionlimit(max(sys.getrecursionlimit(), 3496))" in config  # a chain of 312
    out = run_netc("verify", tmp_path / "model.py")
    assert out.returncode == 0 and "verify: ok" in out.stdout, out.stdout + out.stderr
