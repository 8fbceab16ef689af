"""`netc import` on the layers of the public corpus (docs/import.md, "The public corpus"), in
configs written here: each built in real RETURNN with random parameters, run on a padded batch of
unequal lengths, and the imported model (its parameters carried across) run on netc's RETURNN
config and torch module must give the same outputs and losses; and it verifies as any netc model."""

from __future__ import annotations

import json

import pytest
from conftest import netc_in_process, verify_in_process
from test_import import CONFIGS, _compare, run_original

# config, the lengths of each dynamic dim of the inputs (in order of appearance)
CASES = {
    "spec_augment": ("corpus_spec_augment.config", [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
    "layers": ("corpus_layers.config", [[6, 3, 5], [6, 3, 5]]),
    "ctc": ("corpus_ctc.config", [[7, 4, 6], [3, 2, 2]]),
    "evals": ("corpus_evals.config", [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
    "eval_axes": ("corpus_eval_axes.config", [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
    "old_batch_norm": ("old_batch_norm.config", [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
    "hybrid_upsampled": ("hybrid_upsampled.config", [[6, 3, 9], [6, 3, 9]]),  # multiples of the pool's 3
    "hybrid_cut": ("hybrid_cut.config", [[6, 3, 9]]),  # `slice_nd` of the first frames (multiples of 3)
    "set_axes": ("corpus_set_axes.config", [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
    "ce_probs": ("corpus_ce_probs.config", [[6, 4, 5], [3, 2, 4]]),  # a decoder's targets
    "local_attention": ("corpus_local_attention.config", [[7, 3, 6], [4, 2, 3]]),  # windows inside the frames
    "masked": ("corpus_masked.config", [[7, 4, 6]]),  # the alignment over the features' frames
    # frame-wise targets; one speaker label; frame-wise regression targets
    "misc": ("corpus_misc.config", [[6, 3, 5], [6, 3, 5], [1, 1, 1], [6, 3, 5]]),
    # the alignment over the pooled encoder's frames (half the features', multiples of the pool's 2)
    "size_base": ("corpus_size_base.config", [[8, 4, 6], [4, 2, 3]]),
    "rna_unit": ("corpus_rna_unit.config", [[7, 4, 6]]),  # the alignment over the encoder's frames
    "xvector": ("corpus_xvector.config", [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Each case imported by the CLI (model, name map, notes) and run in RETURNN, once."""
    cache = {}

    def get(case: str):
        if case not in cache:
            file, lengths = CASES[case]
            tmp = tmp_path_factory.mktemp(case)
            model, names = tmp / f"{case}.py", tmp / "names.json"
            proc = netc_in_process("import", CONFIGS / file, "-o", model, "--param-map", names, check=True)
            cache[case] = (model, json.loads(names.read_text()), run_original(CONFIGS / file, [], lengths), proc)
        return cache[case]

    return get


@pytest.mark.parametrize("backend", ["returnn", "torch"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_imported_layers_give_the_originals_numbers(imported, case, backend):
    model, names, orig, _ = imported(case)
    _compare(case, model, names, orig, backend)


@pytest.mark.parametrize("case", sorted(CASES))
def test_imported_layers_verify(imported, case):
    proc = verify_in_process(imported(case)[0])
    assert proc.returncode == 0 and "verify: ok" in proc.stdout, proc.stdout


def test_local_attention_eval_of_an_older_returnn_reads_its_layout(imported, tmp_path):
    """The setups' `eval` as written for RETURNN before 2019-08: `source(0)` (one source) read as it
    is, the weights' layout then [B, T, H] (the softmax axis kept in place): axis 1 is the encoder's
    time, and the model is the one of the installed RETURNN's form (compared with RETURNN above)."""
    model = imported("local_attention")[0].read_text()
    line = "p_t_in = argmax(reduce_sum(att_weights, axis=energy_dim), axis=time)"
    assert line in model, model
    text = (CONFIGS / CASES["local_attention"][0]).read_text()
    new = text.replace(", auto_convert=False), axis=2", "), axis=1").replace('"dtype": "int32"', '"dtype": "float32"')
    assert new.count("source(0), axis=1") == 1
    cfg, out = tmp_path / "old.config", tmp_path / "old.py"
    cfg.write_text(new)
    proc = netc_in_process("import", cfg, "-o", out, check=True)
    assert "`source(i)` of `output/p_t_in` read as it is, as RETURNN before 2019-08 did" in proc.stderr, proc.stderr
    assert out.read_text() == model.replace("corpus_local_attention", "old"), out.read_text()
    # its float (`tf.to_float`, a frame earlier, at least 0: whole numbers) as the window's start: the
    # positions compared as floats (TF takes one dtype)
    cfg.write_text(
        new.replace('"eval": "tf.squeeze(', '"eval": "tf.maximum(tf.to_float(tf.squeeze(').replace(
            'axis=1)",', 'axis=1)) - 1.0, 0.0)",'
        )
    )
    proc = netc_in_process("import", cfg, "-o", out, check=True)
    assert 'where(cast(range_over(time), "float32") >= p_t_in, energy_reinterpreted' in out.read_text()
    proc = verify_in_process(out)
    assert proc.returncode == 0 and "verify: ok" in proc.stdout, proc.stdout


def test_rna_decoder_on_a_reframed_alignment_searches(imported):
    """The decoder whose target is the alignment read over the pooled encoder's frames searches too;
    its labels without the blank, looked up under a `masked_computation`, are label 0 on the
    steps the mask leaves out (a search chooses the blank there; RETURNN never computes them)."""
    model = imported("size_base")[0]
    assert "choice(decoder_output_log_prob, target=alignment, beam=3" in model.read_text(), model.read_text()
    proc = verify_in_process(model, "--search")
    assert proc.returncode == 0 and "verify: ok" in proc.stdout, proc.stdout


def test_label_replacement_in_training_is_left_out_with_a_note(imported):
    """A decoder's fed-back label through the config's SwitchOut function: its value outside training
    (the label), the random replacement in training named in a note."""
    model, _, _, proc = imported("size_base")
    assert "decoder_output = decoder_output_2  # layer 'output_'" in model.read_text(), model.read_text()
    line = (
        (CONFIGS / CASES["size_base"][0])
        .read_text()
        .splitlines()
        .index("def switchout_target(self, source, **kwargs):")
    )
    assert (
        f"layer `decoder/output_` (eval): the config's `switchout_target` (line {line + 1}) computes its input "
        "outside training; what it does in training only (`network.cond_on_train`: random replacement of the labels)"
    ) in proc.stderr, proc.stderr


def test_spec_augment_recipes_are_what_they_compute_outside_training(imported, tmp_path):
    model, _, _, proc = imported("spec_augment")
    source = model.read_text()
    for line in (
        "clipped = clip(data, -0.5, 0.5)",
        "plain = data",
        "tensor = clip(data, -1.0, 1.0)",
        "kw = data * 2.0",
    ):
        assert line in source, source
    assert (
        "layer `clipped` (eval): the config's `transform` (line 14) computes `tf.clip_by_value(source(0), -0.5, 0.5)` "
        "outside training; what it does in training only (`network.cond_on_train`" in proc.stderr
    ), proc.stderr
    assert "layer `plain` (eval): the config's `transform` (line 14) computes its input outside training" in proc.stderr
    # the function itself as the eval (RETURNN calls it with `source` and `self`)
    cfg = tmp_path / "fn.config"
    cfg.write_text(
        (CONFIGS / "corpus_spec_augment.config")
        .read_text()
        .replace("\"self.network.get_config().typed_value('transform_kw')(source, self=self)\"", "transform_kw")
    )
    assert '"eval": transform_kw}' in cfg.read_text()
    proc = netc_in_process("import", cfg, "-o", tmp_path / "fn.py")
    assert proc.returncode == 0 and "kw = data * 2.0" in (tmp_path / "fn.py").read_text(), proc.stderr


RASR = """
#!rnn.py
num_inputs = 6
num_outputs = {"classes": [5, 1]}
sprint_opts = {"sprintExecPath": "/cluster/rasr/nn-trainer.linux-x86_64-standard", "minPythonControlVersion": 4}
network = {
    "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "data"},
    "probs": {"class": "softmax", "n_out": 5, "from": "lstm"},
    "scores": {"class": "activation", "activation": "log", "from": "probs"},
    "align": {"class": "fast_bw", "align_target": "sprint", "sprint_opts": sprint_opts, "from": "scores"},
    "output": {"class": "copy", "from": "probs", "loss": "via_layer",
               "loss_opts": {"loss_wrt_to_act_in": "softmax", "align_layer": "align"}},
    "ctc": {"class": "softmax", "n_out": 6, "from": "lstm", "loss": "ctc", "target": "classes",
            "loss_opts": {"use_native": True}},
}
"""


def test_rasr_losses_are_left_out_and_their_layers_refused(tmp_path):
    """A loss RASR computes (through Sprint) is left out with a note, the layer it is on imported; a
    layer that reads RASR's alignment is refused, saying why."""
    cfg, model = tmp_path / "hybrid.config", tmp_path / "hybrid.py"
    cfg.write_text(RASR)
    proc = netc_in_process("import", cfg, "-o", model)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note: loss 'via_layer' of layer `output` left out: its gradient is that of another layer's alignment" in (
        proc.stderr
    )
    assert "(`align`), which netc cannot run" in proc.stderr
    source = model.read_text()
    assert "output = probs" in source and "ctc_loss(ctc_logits, classes, axis=" in source, source
    out = verify_in_process(model)
    assert out.returncode == 0 and "verify: ok" in out.stdout, out.stdout
    cfg.write_text(RASR.replace('"from": "probs", "loss": "via_layer"', '"from": "align", "loss": "via_layer"'))
    proc = netc_in_process("import", cfg, "-o", model)
    assert proc.returncode == 1
    assert "layer `align` (fast_bw): RASR's full-sum Baum-Welch alignment through Sprint" in proc.stderr, proc.stderr


def test_checkpoint_of_transposed_weights_is_carried_transposed():
    """`use_transposed_weights` keeps W as [out, in] in TF: the name map says so, and a checkpoint's
    value is carried as the model's [in, out]; a shape that fits neither is an error naming it."""
    import numpy as np

    from netc.errors import CompileError
    from netc.importer.checkpoint import carry

    params = {
        "out/W": {"returnn": "out/W", "shape": [4, 3], "transposed": True},
        "out/b": {"returnn": "out/b", "shape": [3]},
    }
    w, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones(3, np.float32)
    values = carry({"out/W": w, "out/b": b}, params, "ckpt")
    assert values["out/W"].shape == (4, 3) and (values["out/W"] == w.T).all()
    with pytest.raises(
        CompileError, match=r"variable out/W has shape \[4, 3\], .* has \[4, 3\] \(transposed: \[3, 4\]\)"
    ):
        carry({"out/W": w.T, "out/b": b}, params, "ckpt")


def test_old_batch_norm_checkpoint_and_refusals(imported, tmp_path):
    """Param version 0's variables ([1, 1, feature]) are carried as the model's [feature]; the
    forms of RETURNN's batch norm before behavior version 12 netc cannot give are refused, named."""
    import numpy as np

    from netc.importer.checkpoint import carry

    _, names, orig, _ = imported("old_batch_norm")
    values = carry(orig["params"], names["params"], "ckpt")
    mean = orig["params"]["bn/batch_norm/bn_bn_output_mean"]
    assert mean.shape == (1, 1, 8) and values["bn/batch_norm/bn_bn_output_mean"].shape == (8,)
    assert np.array_equal(values["bn/batch_norm/bn_bn_output_mean"], mean.reshape(8))
    source = (CONFIGS / "old_batch_norm.config").read_text()
    cfg = tmp_path / "bn.config"
    for old, new, why in (
        (
            '"masked_time": False, "param_version": 2,',
            "",
            "masked_time True on [batch, feature] (RETURNN rejects it too)",
        ),
        ('"param_version": 2,', "", "statistics updated outside training on [batch, feature] not supported"),
        (
            '"bn": {"class": "batch_norm", "from": "lin"}',
            '"bn": {"class": "batch_norm", "from": "lin", "delay_sample_update": True}',
            "with delay_sample_update True not supported",
        ),
    ):
        cfg.write_text(source.replace(old, new))
        proc = netc_in_process("import", cfg, "-o", tmp_path / "bn.py")
        assert proc.returncode == 1 and why in proc.stderr, proc.stderr


SAMPLED = """
#!rnn.py
num_inputs = 6
num_outputs = {"classes": [5, 1]}
network = {
    "output": {"class": "softmax", "use_transposed_weights": True, "from": "data", "loss": "sampling_loss",
               "target": "classes", "loss_opts": {"num_sampled": 2, "nce_loss": True}},
}
"""


def test_sampled_loss_is_left_out_and_a_size_read_at_run_time_refused(tmp_path):
    cfg, model = tmp_path / "lm.config", tmp_path / "lm.py"
    cfg.write_text(SAMPLED)
    proc = netc_in_process("import", cfg, "-o", model)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "note: loss 'sampling_loss' of layer `output` left out: a random estimate of the cross entropy" in proc.stderr
    )
    assert "mark_as_loss" not in model.read_text()
    # a class dim of size 0: the config reads it from its command line (`++ext_num_classes`)
    cfg.write_text(SAMPLED.replace("[5, 1]", "[int(config.value('ext_num_classes', 0)), 1]"))
    proc = netc_in_process("import", cfg, "-o", model)
    assert proc.returncode == 1
    assert "its dim `classes:sparse-dim` has size 0 (a size the config reads from its command line" in proc.stderr
    proc = netc_in_process("import", cfg, "-o", model, "--set", "ext_num_classes=5")
    assert proc.returncode == 0, proc.stderr
    # of None (`config.int('vocab_size', None)`): RETURNN makes the class dim without a size
    cfg.write_text(SAMPLED.replace("[5, 1]", "{'dim': config.int('vocab_size', None), 'sparse': True}"))
    proc = netc_in_process("import", cfg, "-o", model)
    assert proc.returncode == 1
    assert "its dim `classes:sparse-dim` has size None (a size the config reads from its command line" in proc.stderr


def test_corpus_layer_count_counts_each_class_once_per_config():
    """tools/corpus_layers.py: classes of units and subnetworks counted once per config, with their
    options (string values too), the import status of each (refused classes with their reason)."""
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "tools"))
    from corpus_layers import render, usage

    net = {
        "lin": {"class": "linear", "activation": "tanh", "n_out": 3, "from": "data"},
        "output": {
            "class": "rec",
            "from": "lin",
            "unit": {"output": {"class": "linear", "n_out": 2, "from": "data:source"}, "bw": {"class": "fast_bw"}},
        },
    }
    layers = usage(net)
    assert layers["linear"] == ["activation", "activation=tanh", "n_out"] and "unit" in layers["rec"]
    error = "cfg.config:3:5: error: layer `output/bw` (fast_bw): RASR's ..."
    table = render([{"layers": layers, "errors": [error]}, {"layers": {"linear": ["n_out"]}}], minimum=1, brief=True)
    assert "| `linear` | 2 | yes | 0 |" in table
    assert (
        "| `fast_bw` | 1 | refused: RASR's full-sum Baum-Welch alignment through Sprint" in table and "| 1 |" in table
    )


MIN_WER = """
#!rnn.py
num_inputs = 6
num_outputs = {"classes": [5, 1]}
network = {
    "output": {"class": "softmax", "from": "data", "loss": "ce"},
    "extra.search:output": {"class": "copy", "from": "data"},
    "min_wer": {"class": "copy", "from": "extra.search:output", "loss": "expected_loss",
                "loss_opts": {"loss": {"class": "edit_distance"}, "loss_kind": "error"}},
    "beam_scores": {"class": "choice_get_beam_scores", "from": "extra.search:output"},
    "denominator": {"class": "eval", "from": "beam_scores", "eval": "source(0)", "loss": "as_is"},
}
"""


def test_loss_of_a_search_in_training_is_left_out_with_its_layer(tmp_path):
    # minimum-WER training: the expected error of `extra.search:output`'s hypotheses (RETURNN searches
    # in training for it), and MMI training's loss of its beam's scores; the layers are built only for them
    cfg, model = tmp_path / "mwer.config", tmp_path / "mwer.py"
    cfg.write_text(MIN_WER)
    proc = netc_in_process("import", cfg, "-o", model)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note: layer `min_wer` (copy) and its loss 'expected_loss' left out: the expected error of a search's" in (
        proc.stderr
    )
    # MMI training: a loss of the beam's scores (`choice_get_beam_scores`), its layers built only for it
    assert "note: layer `denominator` (eval) and its loss 'as_is' left out: it reads `extra.search:output`" in (
        proc.stderr
    )
    text = model.read_text()
    assert "min_wer" not in text and "extra_search" not in text and "denominator" not in text, text


def test_dot_axis_numbers_of_a_layout_netc_does_not_know_are_refused(tmp_path):
    # a `rec` layer's output is time-major in RETURNN: its axis 1 is the batch, not the frames
    from test_import import _assert_at, _import_error

    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
        network = {
            "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data"},
            "output": {"class": "dot", "from": ["lstm", "lstm"], "red1": 2, "red2": 2, "var1": 1, "var2": 1},
        }
        """,
    )
    _assert_at(proc, path, 5, '"output"', "layer `output` (dot): red1 2: an axis number of a source whose layout")
