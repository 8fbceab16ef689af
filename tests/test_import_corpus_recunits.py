"""`netc import` of the corpus's recurrent units and decoders (configs written here): `unit_opts`
(NativeLSTM2's training-only recurrent weight dropout, options at the unit's own values), the
initialisers of a `rec`/`rnn_cell` layer, the LayerNormVariantsLSTM and ZoneoutLSTM units, `cheating` (a search-only option), `size_target` of the
decoder's own target, `prev:` of the decoder's `choice` (a label state), `get_last_hidden_state` of `prev:` a cell, an `end` that is not trained, the state of a `switch` and of a concatenation read by `prev:` (a
traceback before), a unit layer reading `data` in a rec layer without input, attention of one head (weights [batch, time, 1]); and the corpus runner
(tools/import_corpus.py) on such configs: imported, verified and matched (after pools: on lengths where
RETURNN's `pool` is exact); refused; and not a config
RETURNN builds (an option of its Theano backend, a syntax error), checked by building it in RETURNN."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_netc
from test_import_corpus_idioms import LN_LSTM_POOL

ROOT = Path(__file__).resolve().parent.parent
DECODER = """
#!rnn.py
extern_data = {
    "classes": {"dim": 6, "shape": (None,), "sparse": True},
    "data": {"dim": 3, "shape": (None, 3)},
}
network = {
    "lstm_fw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "direction": 1, "from": "data",
                "unit_opts": {"rec_weight_dropout": 0.1, "forget_bias": 0.0},
                "forward_weights_init": "random_normal_initializer(stddev=0.1)", "recurrent_weights_init": "glorot_uniform"},
    "lstm_bw": {"class": "rec", "unit": "lstmp", "n_out": 4, "direction": -1, "from": "data",
                "unit_opts": {"rec_weight_dropout": 0.1}, "bias_init": 0.0},
    "encoder": {"class": "copy", "from": ["lstm_fw", "lstm_bw"]},
    "enc_mean": {"class": "reduce", "mode": "mean", "axes": "T", "from": "encoder"},
    "enc_ctx": {"class": "linear", "activation": None, "from": "encoder", "n_out": 5},
    "enc_sum": {"class": "reduce", "mode": "sum", "axes": "F", "from": "enc_mean"},
    "flag": {"class": "compare", "kind": "greater", "from": "enc_sum", "value": 0.0},
    "output": {
        "class": "rec",
        "from": [],
        "cheating": False,
        "unit": {
            "output": {"class": "choice", "target": "classes", "beam_size": 3, "from": "prob", "initial_output": 0,
                       "cheating": "exclusive"},
            "end": {"class": "compare", "from": "output", "kind": "equal", "value": 0, "trainable": False},
            "embed": {"class": "linear", "activation": None, "with_bias": False, "from": "output", "n_out": 4,
                      "initial_output": 0},
            "prev_s_state": {"class": "get_last_hidden_state", "from": "prev:s", "n_out": 10},
            "att0": {"class": "linear", "activation": "tanh", "from": ["prev_s_state", "base:enc_mean"], "n_out": 5},
            "att1": {"class": "linear", "activation": "tanh", "from": "base:enc_mean", "n_out": 5},
            "att": {"class": "switch", "condition": "base:flag", "true_from": "att1", "false_from": "att0"},
            "prev_emb": {"class": "linear", "activation": None, "with_bias": False, "from": "prev:output", "n_out": 3},
            "prev_lbl": {"class": "linear", "activation": None, "from": "prev:output", "n_out": 2},  # read again
            "comb": {"class": "copy", "from": ["att", "base:enc_mean"]},
            "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["prev:embed", "prev:comb", "prev_emb"], "n_out": 5,
                  "unit_opts": {"forget_bias": 1.0}, "weights_init": "glorot_uniform"},
            "energy_in": {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "att0"]},
            "energy": {"class": "linear", "activation": None, "with_bias": False, "from": "energy_in", "n_out": 1},
            "att_weights": {"class": "softmax_over_spatial", "from": "energy"},
            "ctx": {"class": "generic_attention", "weights": "att_weights", "base": "base:encoder"},
            "prob": {"class": "softmax", "from": ["s", "att", "ctx", "prev_lbl"], "target": "classes", "loss": "ce"},
        },
        "target": "classes",
        "size_target": "classes",
        "max_seq_len": "max_len_from('base:encoder')",
    },
}
"""

# RETURNN's LayerNormVariantsLSTM unit in its variants: over a sequence (both directions), as an `rnn_cell`
LAYER_NORM_LSTM = """
#!rnn.py
extern_data = {"data": {"dim": 3}, "classes": {"dim": 5, "shape": (None,), "sparse": True}}
unit_opts = {'global_norm': False, 'global_norm_joined': True, 'cell_norm': False, "dropout": 0.1}
network = {
    "l_fw": {"class": "rec", "unit": "layernormvariantslstm", "n_out": 4, "direction": 1, "from": "data"},
    "l_bw": {"class": "rec", "unit": "layernormvariantslstm", "unit_opts": unit_opts, "n_out": 4, "direction": -1, "from": "data"},
    "enc": {"class": "copy", "from": ["l_fw", "l_bw"]},
    "output": {"class": "rec", "from": [], "max_seq_len": "max_len_from('base:enc')", "target": "classes", "unit": {
        "output": {"class": "choice", "target": "classes", "beam_size": 3, "from": "prob", "initial_output": 0},
        "end": {"class": "compare", "from": "output", "value": 0},
        "s": {"class": "rnn_cell", "unit": "layernormvariantslstm", "unit_opts": unit_opts, "from": ["prev:output_emb", "base:enc_mean"], "n_out": 4},
        "s2": {"class": "rnn_cell", "unit": "layernormvariantslstm", "unit_opts": {"per_gate_norm": True, "global_norm": False, "hidden_norm": True, "cell_norm_in_output": False}, "from": ["prev:output_emb", "prev:s2", "base:enc_mean"], "n_out": 4},
        "output_emb": {"class": "linear", "from": "output", "n_out": 3, "initial_output": 0},
        "prob": {"class": "softmax", "from": ["s", "s2"], "loss": "ce", "target": "classes"}}},
    "enc_mean": {"class": "reduce", "mode": "mean", "axes": "T", "from": "enc"},
}
"""

# ZoneoutLSTM (behavior_version 0: the output is the cell's own h, the state the zoned one; or
# use_zoneout_output), over a sequence and as an `rnn_cell`
ZONEOUT_LSTM = """
#!rnn.py
extern_data = {"data": {"dim": 3}, "classes": {"dim": 5, "shape": (None,), "sparse": True}}
zo = {"zoneout_factor_cell": 0.15, "zoneout_factor_output": 0.05}
network = {
    "l_fw": {"class": "rec", "unit": "zoneoutlstm", "unit_opts": zo, "n_out": 4, "direction": 1, "from": "data"},
    "l_bw": {"class": "rec", "unit": "zoneoutlstm", "unit_opts": dict(zo, use_zoneout_output=True), "n_out": 4, "direction": -1, "from": "data"},
    "enc": {"class": "copy", "from": ["l_fw", "l_bw"]},
    "output": {"class": "rec", "from": [], "max_seq_len": "max_len_from('base:enc')", "target": "classes", "unit": {
        "output": {"class": "choice", "target": "classes", "beam_size": 3, "from": "prob", "initial_output": 0},
        "end": {"class": "compare", "from": "output", "value": 0},
        "s": {"class": "rnn_cell", "unit": "zoneoutlstm", "unit_opts": zo, "from": ["prev:output_emb", "prev:s", "base:enc_mean"], "n_out": 4},
        "s2": {"class": "rnn_cell", "unit": "ZoneoutLSTM", "unit_opts": dict(zo, use_zoneout_output=True), "from": ["prev:output_emb", "s"], "n_out": 4},
        "output_emb": {"class": "linear", "from": "output", "n_out": 3, "initial_output": 0},
        "prob": {"class": "softmax", "from": ["s", "s2"], "loss": "ce", "target": "classes"}}},
    "enc_mean": {"class": "reduce", "mode": "mean", "axes": "T", "from": "enc"},
}
"""


def test_unit_options_cheating_size_target_and_a_switch_state_verify(tmp_path):
    cfg = tmp_path / "dec.config"
    cfg.write_text(DECODER.lstrip())
    model = tmp_path / "model.py"
    proc = run_netc("import", cfg, "-o", model)
    assert proc.returncode == 0, proc.stderr
    assert "note: `unit_opts.rec_weight_dropout` dropped on `lstm_fw`, `lstm_bw`: dropout on the LSTM's" in proc.stderr
    assert "note: `cheating` dropped on `output/output`: RETURNN's search keeps the true label" in proc.stderr
    text = model.read_text()
    assert "s, s_c = LstmCell(att1_dim)(concat(embed, comb, prev_emb), (s, s_c))" in text
    assert "comb = zeros(batch, att1_dim + lstm_fw_dim + lstm_fw_dim)  # initial state" in text  # a concat: its dims
    # `prev:output` of the choice: a label state, from the choice's initial output
    assert "output_output = full(batch, value=0, class_dim=vocab)  # initial state: the label before" in text
    assert "prev_emb = Embedding(feat)(output_output)" in text
    assert "prev_lbl = Linear(prev_lbl_dim)(one_hot(output_output))" in text  # labels at each read (a refusal before)
    # the cell's state after the previous step (RETURNN's (c, h) concatenated)
    assert "prev_s_state = concat(s_c_prev, s_prev)" in text
    assert "att = where(flag, att1, att0)" in text
    # one head: the weights' dim of size 1 summed away, as RETURNN squeezes it
    assert "ctx = dot(reduce_sum(att_weights, axis=energy_dim), encoder, reduce=time)" in text
    for extra in ([], ["--search"]):
        out = run_netc("verify", model, *extra)
        assert out.returncode == 0 and "verify: ok" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize(
    "old, new, error",
    [
        (
            '"unit_opts": {"rec_weight_dropout": 0.1}, ',
            '"unit_opts": {"use_peepholes": True}, ',
            "layer `lstm_bw` (rec): unit_opts {use_peepholes: True} of unit 'lstmp' not supported",
        ),
        (
            '"unit_opts": {"forget_bias": 1.0}',
            '"unit_opts": {"forget_bias": 0.5, "use_peepholes": True}',  # another forget bias is written out
            "layer `output/s` (rnn_cell): unit_opts {use_peepholes: True} of unit 'lstmblock' not supported",
        ),
        (
            '"from": ["prev_s_state", "base:enc_mean"]',
            '"from": ["prev_s_state", "base:enc_mean", "data"]',
            "layer `output` (rec): `data` read in the unit of a rec layer without `from`",
        ),
        ('"size_target": "classes"', '"size_target": "data"', "size_target 'data': another length than its"),
    ],
)
def test_unit_options_netc_does_not_compute_are_refused_by_name(tmp_path, old, new, error):
    cfg = tmp_path / "dec.config"
    assert old in DECODER
    cfg.write_text(DECODER.lstrip().replace(old, new))
    proc = run_netc("import", cfg, "-o", tmp_path / "model.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert error in proc.stderr, proc.stderr


LN_LSTM_TWO_POOLS = LN_LSTM_POOL.replace(
    '"output": {"class": "softmax", "from": "l1_fw"',
    '"l1_pool": {"class": "pool", "mode": "max", "padding": "same", "pool_size": (2,), "from": "l1_fw"},\n'
    '    "output": {"class": "softmax", "from": "l1_pool"',
)


def test_corpus_runner_imports_verifies_matches_and_tells_configs_returnn_rejects(tmp_path):
    corpus = tmp_path / "corpus"
    (corpus / "asr").mkdir(parents=True)
    # options of an older RETURNN the installed one rejects: Theano's `sampling: 1` (its default),
    # a training-only `compute_priors`; the match stage takes them out of the original
    old = DECODER.lstrip().replace('"bias_init": 0.0}', '"bias_init": 0.0, "sampling": 1}')
    old = old.replace(
        '"target": "classes", "loss": "ce"}', '"target": "classes", "loss": "ce", "compute_priors": True}'
    )
    (corpus / "asr" / "dec.config").write_text(old)
    theano = DECODER.lstrip().replace('"bias_init": 0.0}', '"bias_init": 0.0, "sampling": 2}')
    (corpus / "asr" / "theano.config").write_text(theano)
    (corpus / "asr" / "broken.config").write_text(DECODER.lstrip().replace('"max_seq_len":', '"max_seq_len" '))
    (corpus / "lm").mkdir()
    (corpus / "lm" / "ln_lstm.config").write_text(LAYER_NORM_LSTM.lstrip())
    # an older RETURNN's output layer: a RASR loss, no `n_out` (the target's classes), Theano's options
    frames = (
        '"enc": {"class": "copy", "from": ["l_fw", "l_bw"]},\n    "frames": {"class": "softmax", "from": "enc", '
        '"loss": "sprint", "is_output_layer": True, "ce_smoothing": WrapEpochValue(lambda ep: 0.1 * ep), '
        '"loss_like_ce": True, "sprint_opts": {}},\n'
        # an `eval` whose `source(0)` RETURNN before 2019-08 read as it is (later: out_type's layout)
        '    "frame_sum": {"class": "eval", "from": "data", "eval": "tf.reduce_sum(source(0), axis=-1)", '
        '"out_type": {"shape": (None,), "dim": None}, "is_output_layer": True},'
    )
    zoneout = ZONEOUT_LSTM.lstrip().replace('"enc": {"class": "copy", "from": ["l_fw", "l_bw"]},', frames, 1)
    zoneout = zoneout.replace("#!rnn.py\n", "#!rnn.py\nfrom returnn.pretrain import WrapEpochValue\n", 1)
    (corpus / "lm" / "zoneout.config").write_text(zoneout)
    # two pools after layer-norm LSTMs: on the runner's drawn lengths (7, 6, 4) the second pool's
    # 3 frames read RETURNN's padding (differs by 4e-2); the match stage draws multiples of 4
    (corpus / "lm" / "ln_pool.config").write_text(LN_LSTM_TWO_POOLS.lstrip())
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, ROOT / "tools" / "import_corpus.py", corpus, "--out", out, "-j", "1"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    records = {r["config"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    for name in ("asr/dec.config", "lm/ln_lstm.config", "lm/zoneout.config"):  # the original = the imported
        good = records[name]
        assert good["outcome"] == "imported", good
        assert good["verify"] == {"status": "ok", "train": "ok", "search": "ok"}
        assert good["match"]["status"] == "ok", good
    notes = " ".join(records["asr/dec.config"]["notes"])
    assert "`sampling: 1` taken out of `lstm_bw`: an option of an older RETURNN" in notes, notes
    assert "`compute_priors` dropped on `output/prob`: an option of an older RETURNN" in notes, notes
    assert records["asr/dec.config"]["match"]["note"] == (
        "matched with `sampling: 1` (an option of an older RETURNN at its default), `compute_priors` (an option of an "
        "older RETURNN, training-only) taken out of the original (the installed RETURNN rejects it)"
    )
    notes = " ".join(records["lm/zoneout.config"]["notes"])
    assert "the classes of `frames` (a softmax with a RASR loss and no `n_out`) are those of `classes`" in notes
    assert "`ce_smoothing` dropped on `frames`" in notes and "`sprint_opts` dropped on `frames`" in notes, notes
    assert "`source(i)` of `frame_sum` read as it is, as RETURNN before 2019-08 did" in notes, notes
    note = records["lm/zoneout.config"]["match"]["note"]
    assert "`n_out: 5` given" in note and "`source(i)` of `frame_sum` read as it is" in note, note
    pooled = records["lm/ln_pool.config"]
    assert pooled["verify"] == {"status": "ok", "train": "ok"} and pooled["match"]["status"] == "ok", pooled
    assert pooled["warnings"] == 2  # each pool's: RETURNN's reads the padding
    assert "`unit_opts.dropout` dropped on `l_bw`, `output/s`" in " ".join(records["lm/ln_lstm.config"]["notes"])
    theano = records["asr/theano.config"]
    assert theano["outcome"] == "invalid", theano  # RETURNN built it and failed at the option
    assert "unexpected keyword argument 'sampling'" in theano["returnn_error"]
    assert "option sampling: 2 of an older RETURNN (the Theano backend's frame subsampling" in theano["errors"][0]
    broken = records["asr/broken.config"]
    assert broken["outcome"] == "invalid" and "SyntaxError" in broken["invalid"], broken
    table = (out / "table.md").read_text()
    assert (
        "| folder | configs | imported | (by --no-exec) | refused | not RETURNN's | errors | verified | matched "
        "| original not buildable here |" in table
    )
    assert "| asr | 3 | 1 | 0 | 0 | 2 | 0 | 1 | 1 | 0 |" in table
    assert "| lm | 3 | 3 | 0 | 0 | 0 | 0 | 3 | 3 | 0 |" in table
    assert "`zoneout` of `l_fw`, `l_bw`, `output/s` and 1 more: each state is (1 - z) * new + z * previous" in " ".join(
        records["lm/zoneout.config"]["notes"]
    )


def test_corpus_runner_stops_a_worker_over_its_memory_bound_and_keeps_the_stage_it_reached(tmp_path):
    corpus = tmp_path / "corpus" / "lm"
    corpus.mkdir(parents=True)
    (corpus / "ln_lstm.config").write_text(LAYER_NORM_LSTM.lstrip())
    out = tmp_path / "report"
    proc = subprocess.run(  # 20 MB: the worker passes it while it starts, before the import ends
        [sys.executable, ROOT / "tools" / "import_corpus.py", corpus.parent, "--out", out, "-j", "1"]
        + ["--stages", "import", "--max-memory", "0.02"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    (record,) = map(json.loads, (out / "results.jsonl").read_text().splitlines())
    assert record["outcome"] == "error" and "over the bound of 0.0 GB (--max-memory)" in record["cause"], record
    # a worker stopped after the import keeps the import's outcome; the stage it was in says why
    sys.path.insert(0, str(ROOT / "tools"))
    from import_corpus import Worker, stopped

    worker = Worker(argparse.Namespace(out=str(out)))
    worker.job = {"config": "lm/ln_lstm.config"}
    worker.partial = {"config": "lm/ln_lstm.config", "folder": "lm", "outcome": "imported", "stage": "verify"}
    assert worker.memory() > 0  # its process group's
    worker.kill()

    rec = stopped(worker, "memory", "used 9 GB")
    assert rec == {
        "config": "lm/ln_lstm.config",
        "folder": "lm",
        "outcome": "imported",
        "verify": {"status": "memory", "cause": "used 9 GB"},
    }


def test_match_stage_takes_out_load_on_init_of_files_not_here(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    from corpus_match import strip_load_on_init

    here = tmp_path / "lm.ckpt"
    (tmp_path / "lm.ckpt.index").write_text("")  # a TF checkpoint's files: kept
    lm = {"class": "subnetwork", "load_on_init": str(here), "subnetwork": {}}
    net = {
        "output": {
            "class": "rec",
            "unit": {"lm": {"class": "subnetwork", "load_on_init": "/cluster/lm/network.035", "subnetwork": {}}},
        },
        "lm_here": lm,
    }
    assert strip_load_on_init(net) == ["`load_on_init` of `lm` (a file not here)"]
    assert "load_on_init" not in net["output"]["unit"]["lm"] and lm["load_on_init"] == str(here)


def test_a_layer_entry_that_is_not_options_is_refused_and_returnn_rejects_it_too(tmp_path):
    # a layer left None (its options meant to be filled in by a call whose name missed an f-string);
    # a "#" key is one of RETURNN's meta options (`#copy_param_mode`), no layer
    config = tmp_path / "none_entry.config"
    config.write_text(
        LAYER_NORM_LSTM.lstrip().replace(
            '"output": {', '"unused": None,\n    "#copy_param_mode": "subset",\n    "output": {', 1
        )
    )
    proc = run_netc("import", config, "-o", tmp_path / "m.py")
    assert (
        proc.returncode == 1 and "its entry is NoneType, not a dict of options (RETURNN rejects it too)" in proc.stderr
    )
    sys.path.insert(0, str(ROOT / "tools"))
    from corpus_match import returnn_error

    assert returnn_error(str(config), False) is not None  # the runner's check: "not RETURNN's"


def test_corpus_runner_takes_a_list_in_its_order_and_merges_verify_batches_into_one_table(tmp_path):
    corpus = tmp_path / "corpus"
    long = "ln_lstm." + "pretrain_less2_rep6.mlr50.emit2." * 5 + "config"  # names alike but for the folder
    for folder in ("lm", "asr"):
        (corpus / folder).mkdir(parents=True)
        (corpus / folder / long).write_text(LAYER_NORM_LSTM.lstrip())
    listed = tmp_path / "todo.txt"
    listed.write_text(f"lm/{long}\nnot/in/the/corpus.config\n")
    whole, batch = tmp_path / "whole", tmp_path / "batch"
    runner = [sys.executable, ROOT / "tools" / "import_corpus.py", corpus, "-j", "1"]
    proc = subprocess.run(runner + ["--out", whole, "--stages", "import"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    models = [r["model"] for r in map(json.loads, (whole / "results.jsonl").read_text().splitlines())]
    assert len(set(models)) == 2 and all(Path(m).exists() for m in models), models  # one file each
    proc = subprocess.run(
        runner + ["--out", batch, "--stages", "import,verify", "--list", listed], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "1 net-dict configs, 1 to run" in proc.stderr  # the listed config the corpus has
    (record,) = map(json.loads, (batch / "results.jsonl").read_text().splitlines())
    assert record["config"] == f"lm/{long}" and record["verify"]["status"] == "ok", record
    table = subprocess.run(
        runner + ["--out", whole, "--table", "--stages", "import,verify", "--merge", batch],
        capture_output=True,
        text=True,
    ).stdout
    assert "| lm | 1 | 1 | 0 | 0 | 0 | 0 | 1 |" in table, table  # the batch's verify result
    assert "| asr | 1 | 1 | 0 | 0 | 0 | 0 | 0 |" in table, table  # imported, not verified yet
    assert "| **all** | 2 | 2 | 0 | 0 | 0 | 0 | 1 |" in table, table
