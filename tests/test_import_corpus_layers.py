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


def test_spec_augment_recipes_are_what_they_compute_outside_training(imported):
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
