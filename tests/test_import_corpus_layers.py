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
