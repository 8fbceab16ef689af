"""`netc import` of the latent-attention configs' decoder idioms (configs written here): the
attention energies' `set_axes` restating their time axis by a part of its tag's name
(`stag:lstm`, the encoder's pooled frames), a learned initial output (`initial_output: "var"`),
the `choice` options `search` at its value for training (`task != "train"`) and
`control_dependencies_on_output` (a function of checks); the local-window hard attention: a
`choice` of an encoder position (the probabilities of a `softmax_over_spatial` from the previous
position on), trained on a linear alignment a config function computes from the lengths
(`positions.py`) and reaches through `register_as_extern_data` and `extra.search:`, a `ce` loss on
the positions' probabilities, the position an int state (`initial_output: -1`) clipped by
`tf.clip_by_value` with tensor bounds, the sequences' lengths as `sparse` labels, the loss's
`fake_upper_bound` (each frame's loss at most that, its gradient the loss's own). Each run through
the corpus runner: imported, verified (training and search) and matched against RETURNN running
the original."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import run_netc

ROOT = Path(__file__).resolve().parent.parent
LATENT = """
#!rnn.py
task = "train"


def search_checks(layer, **kwargs):
    return []


extern_data = {
    "classes": {"dim": 6, "shape": (None,), "sparse": True},
    "data": {"dim": 3, "shape": (None, 3)},
}
network = {
    "lstm0_fw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "direction": 1, "from": "data"},
    "lstm0_pool": {"class": "pool", "mode": "max", "padding": "same", "pool_size": (2,), "from": "lstm0_fw",
                   "use_time_mask": True},
    "encoder": {"class": "copy", "from": "lstm0_pool"},
    "enc_ctx": {"class": "linear", "activation": None, "from": "encoder", "n_out": 5},
    "output": {
        "class": "rec",
        "from": [],
        "unit": {
            "s_transformed": {"class": "linear", "activation": None, "with_bias": False, "from": "s", "n_out": 5},
            "energy_in": {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "s_transformed"]},
            "energy_tanh": {"class": "activation", "activation": "tanh", "from": "energy_in"},
            "energy": {"class": "linear", "activation": None, "with_bias": False, "from": "energy_tanh", "n_out": 1},
            "energy1": {"class": "squeeze", "axis": "f", "from": "energy"},
            "energy2": {"class": "reinterpret_data", "from": "energy1", "set_axes": {"t": "stag:lstm"}},
            "att_weights": {"class": "softmax_over_spatial", "from": "energy2", "axis": "stag:lstm"},
            "att": {"class": "generic_attention", "weights": "att_weights", "base": "base:encoder"},
            "s": {"class": "rec", "unit": "nativelstm2", "from": ["prev:target_embed", "prev:att"], "n_out": 6},
            "readout": {"class": "linear", "from": ["s", "prev:target_embed", "att"], "activation": "tanh", "n_out": 5},
            "output_prob": {"class": "softmax", "from": "readout", "target": "classes", "loss": "ce"},
            "target_embed": {"class": "linear", "activation": None, "with_bias": False, "from": "output", "n_out": 3,
                             "initial_output": "var"},
            "output": {"class": "choice", "target": "classes", "beam_size": 3, "from": "output_prob",
                       "initial_output": 0, "control_dependencies_on_output": search_checks,
                       "search": task != "train", "length_normalization": task != "train"},
            "end": {"class": "compare", "from": "output", "value": 0},
        },
        "target": "classes",
        "max_seq_len": "max_len_from('base:encoder') * 3",
    },
}
"""

LOCAL = """
#!rnn.py
task = "train"


def search_checks(layer, **kwargs):
    return []


def linear_positions(source, **kwargs):
    import tensorflow as tf
    from returnn.tf.util.basic import where_bc

    labels = source(0, as_data=True, auto_convert=False)
    frames = source(1, as_data=True, auto_convert=False)
    n_frames = frames.get_sequence_lengths()
    n_labels = labels.get_sequence_lengths()
    shape = tf.shape(labels.placeholder)
    steps = tf.expand_dims(tf.range(shape[labels.time_dim_axis]), axis=0)
    x = tf.cast(steps + 1, tf.float32)
    per_label = tf.maximum(tf.cast(n_frames - 1, tf.float32), 0.0) / tf.maximum(tf.cast(n_labels, tf.float32), 1.0)
    per_label = tf.maximum(per_label, 1.0)
    x = x * tf.expand_dims(per_label, axis=1)
    x = tf.cast(tf.round(x), tf.int32)
    x = tf.minimum(x, tf.expand_dims(n_frames - 1, axis=1))
    x = where_bc(tf.less(steps, tf.expand_dims(n_labels, axis=1)), x, 0)
    return x


extern_data = {
    "classes": {"dim": 6, "shape": (None,), "sparse": True},
    "data": {"dim": 3, "shape": (None, 3)},
}
network = {
    "lstm0_fw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "direction": 1, "from": "data"},
    "lstm0_pool": {"class": "pool", "mode": "max", "padding": "same", "pool_size": (2,), "from": "lstm0_fw",
                   "use_time_mask": True},
    "encoder": {"class": "copy", "from": "lstm0_pool"},
    "enc_ctx": {"class": "linear", "activation": None, "from": "encoder", "n_out": 5},
    "enc_seq_len": {"class": "length", "from": "encoder", "sparse": True},
    "t_linear": {"class": "eval", "from": ["data:classes", "encoder"], "eval": linear_positions,
                 "out_type": {"batch_dim_axis": 0, "time_dim_axis": 1, "shape": (None,), "sparse": True,
                              "dtype": "int32", "dim": None},
                 "size_target": "classes"},
    "1_t_base": {"class": "copy", "from": "t_linear", "register_as_extern_data": "t_base"},
    "2_t_target": {"class": "copy", "from": "extra.search:t_fallback", "register_as_extern_data": "t_target"},
    "t_fallback": {"class": "copy", "from": "data:t_base"},
    "output": {
        "class": "rec",
        "from": [],
        "unit": {
            "s_transformed": {"class": "linear", "activation": None, "with_bias": False, "from": "s", "n_out": 5},
            "energy_in": {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "s_transformed"]},
            "energy_tanh": {"class": "activation", "activation": "tanh", "from": "energy_in"},
            "energy": {"class": "linear", "activation": None, "with_bias": False, "from": "energy_tanh", "n_out": 1},
            "energy1": {"class": "squeeze", "axis": "f", "from": "energy"},
            "energy2": {"class": "reinterpret_data", "from": "energy1", "set_axes": {"t": "stag:lstm"}},
            "prev_t_plus1": {"class": "eval", "from": "prev:t", "eval": "source(0) + 1"},
            "t_start": {"class": "eval", "from": ["prev_t_plus1", "base:enc_seq_len"],
                        "eval": "tf.minimum(source(0), source(1) - 1)"},
            "t_weights": {"class": "softmax_over_spatial", "from": "energy2", "axis": "stag:lstm", "start": "t_start"},
            "t_weights1": {"class": "reinterpret_data", "from": "t_weights", "set_axes": {"f": "stag:lstm"},
                           "target": "t_target", "loss": "ce",
                           "loss_opts": {"scale": 0.1, "fake_upper_bound": 0.9}},
            "t0": {"class": "choice", "from": "t_weights1", "target": "t_target", "cheating": True, "beam_size": 3,
                   "keep_beams": False, "control_dependencies_on_output": search_checks,
                   "length_normalization": False, "initial_output": -1},
            "t1": {"class": "eval", "from": ["t0", "t_start", "base:enc_seq_len"],
                   "eval": "tf.clip_by_value(source(0), source(1), source(2) - 1)"},
            "t": {"class": "copy", "from": "t1", "initial_output": -1},
            "window_start": {"class": "eval", "from": "t", "eval": "source(0) - 1"},
            "att_weights": {"class": "softmax_over_spatial", "from": "energy2", "axis": "stag:lstm",
                            "window_start": "window_start", "window_size": 3},
            "att": {"class": "generic_attention", "weights": "att_weights", "base": "base:encoder"},
            "s": {"class": "rec", "unit": "nativelstm2", "from": ["prev:target_embed", "prev:att"], "n_out": 6},
            "readout": {"class": "linear", "from": ["s", "prev:target_embed", "att"], "activation": "tanh", "n_out": 5},
            "output_prob": {"class": "softmax", "from": "readout", "target": "classes", "loss": "ce"},
            "target_embed": {"class": "linear", "activation": None, "with_bias": False, "from": "output", "n_out": 3,
                             "initial_output": "var"},
            "output": {"class": "choice", "target": "classes", "beam_size": 3, "from": "output_prob",
                       "initial_output": 0, "control_dependencies_on_output": search_checks,
                       "search": task != "train", "length_normalization": task != "train"},
            "end": {"class": "compare", "from": "output", "value": 0},
        },
        "target": ["classes", "t_target"],
        "size_target": "t_target",
        "max_seq_len": "max_len_from('base:encoder') * 3",
    },
}
"""


# the fertility variant: the window starts at the step's target position where that is before the
# previous one (`data:t_target` read in the unit, training's only), the chosen positions' fertility
# accumulated over the encoder's frames (`scatter_nd`) fed back into the energies, the position's
# scores scaled in the search (`prob_scale`)
FERTILITY = (
    LOCAL.replace(
        """    "enc_seq_len": {"class": "length", "from": "encoder", "sparse": True},""",
        """    "enc_seq_len": {"class": "length", "from": "encoder", "sparse": True},
    "inv_fertility": {"class": "linear", "activation": "sigmoid", "with_bias": False, "from": "encoder", "n_out": 1},""",
    )
    .replace(
        """            "energy_in": {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "s_transformed"]},""",
        """            "weight_feedback": {"class": "linear", "activation": None, "with_bias": False,
                                "from": "prev:accum_att_weights1", "n_out": 5},
            "energy_in": {"class": "combine", "kind": "add",
                          "from": ["base:enc_ctx", "s_transformed", "weight_feedback"]},""",
    )
    .replace(
        """            "t_start": {"class": "eval", "from": ["prev_t_plus1", "base:enc_seq_len"],
                        "eval": "tf.minimum(source(0), source(1) - 1)"},""",
        """            "t_start": {"class": "eval", "from": ["prev:t", "data:t_target"],
                        "eval": "tf.minimum(source(0), source(1))"},""",
    )
    .replace('"cheating": True, "beam_size": 3,', '"cheating": True, "beam_size": 3, "prob_scale": 0.5,')
    # the chosen frame itself, as these configs attend (`att_hard`)
    .replace(
        """"att": {"class": "generic_attention", "weights": "att_weights", "base": "base:encoder"},""",
        """"att": {"class": "gather_nd", "position": "t", "from": "base:encoder"},""",
    )
    .replace(
        """            "t": {"class": "copy", "from": "t1", "initial_output": -1},""",
        """            "t": {"class": "copy", "from": "t1", "initial_output": -1},
            "fertility": {"class": "gather_nd", "position": "t", "from": "base:inv_fertility"},
            "fertility1": {"class": "squeeze", "axis": "f", "from": "fertility"},
            "t_ext": {"class": "expand_dims", "from": "t", "axis": "spatial", "dim": 1},
            "sparse_fertility": {"class": "scatter_nd", "position": "t_ext", "position_axis": "static:-1",
                                 "output_dim_via_time_from": "base:inv_fertility", "from": "fertility1"},
            "accum_att_weights": {"class": "eval", "from": ["sparse_fertility", "prev:accum_att_weights"],
                                  "eval": "source(0) * 0.5 + source(1)"},
            "accum_att_weights1": {"class": "expand_dims", "from": "accum_att_weights", "axis": "f"},""",
    )
)


def _run(tmp_path, configs: dict[str, str]) -> dict[str, dict]:
    corpus = tmp_path / "corpus"
    (corpus / "asr").mkdir(parents=True)
    for name, text in configs.items():
        (corpus / "asr" / name).write_text(text.lstrip())
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, ROOT / "tools" / "import_corpus.py", corpus, "--out", out, "-j", "1"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return {r["config"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def test_local_window_hard_attention_on_a_computed_alignment_imports_verifies_and_matches(tmp_path):
    records = _run(tmp_path, {"local.config": LOCAL})
    rec = records["asr/local.config"]
    assert rec["outcome"] == "imported", rec
    assert rec["verify"] == {"status": "ok", "train": "ok", "search": "ok"}, rec
    assert rec["match"]["status"] == "ok" and rec["match"]["max"] < 1e-4, rec  # the position loss too
    model = Path(rec["model"]).read_text()
    # the alignment: positions over the encoder's frames, computed before the loop
    assert "cast(where(range_over(classes_time) < " in model and "class_dim=lstm0_pool_time)" in model, model
    assert "round(" in model
    assert 'choice(t_weights1, target=l2_t_target, beam=3, length_normalization=False, input_type="prob")' in model
    assert "t1 = minimum(maximum(t0, t_start), enc_seq_len - 1)" in model
    assert "- stop_gradient(" in model and ", 0.9))" in model  # the loss's fake upper bound
    assert 't = full(batch, value=-1, dtype="int32")  # initial state' in model
    notes = " ".join(rec["notes"])
    assert "`cheating` dropped on `output/t0`" in notes and "`loss_scale` dropped on `output/t_weights1`" in notes


def test_latent_attention_decoder_idioms_import_verify_and_match(tmp_path):
    corpus = tmp_path / "corpus"
    (corpus / "asr").mkdir(parents=True)
    (corpus / "asr" / "latent.config").write_text(LATENT.lstrip())
    # the same with a tag part that names no dim of the energies: refused at the layer, naming it
    (corpus / "asr" / "other_tag.config").write_text(
        LATENT.lstrip().replace('{"t": "stag:lstm"}', '{"t": "stag:frames"}')
    )
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, ROOT / "tools" / "import_corpus.py", corpus, "--out", out, "-j", "1"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    records = {r["config"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    good = records["asr/latent.config"]
    assert good["outcome"] == "imported", good
    assert good["verify"] == {"status": "ok", "train": "ok", "search": "ok"}, good
    # the learned initial output is a parameter of both: carried by name (`init_target_embed_var`)
    assert good["match"]["status"] == "ok" and good["match"]["max"] < 1e-4, good
    notes = " ".join(good["notes"])
    assert "`control_dependencies_on_output` dropped on `output/output`: checks (TensorFlow assertions)" in notes
    assert "`search` of `output/output`: False (its value as the config loads, for training)" in notes
    model = Path(good["model"]).read_text()
    assert "target_embed = Bias(feat)(zeros(batch, feat))  # initial state: learned" in model
    bad = records["asr/other_tag.config"]
    assert bad["outcome"] == "refused", bad
    assert "layer `output/energy2` (reinterpret_data): set_axes {'t': 'stag:frames'}" in bad["errors"][0], bad


def test_a_positions_function_with_a_call_it_does_not_know_is_refused_naming_it(tmp_path):
    cfg = tmp_path / "local.config"
    old = "    x = tf.cast(tf.round(x), tf.int32)\n"
    assert old in LOCAL
    cfg.write_text(LOCAL.lstrip().replace(old, old + "    x = tf.sort(x)\n"))
    proc = run_netc("import", cfg, "-o", tmp_path / "model.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "layer `t_linear` (eval): eval linear_positions (line 24): `tf.sort(x)` (of lengths and positions)" in (
        proc.stderr
    ), proc.stderr


def test_match_stage_takes_out_the_search_in_training_the_import_leaves_out():
    """The original's monitors of a search it runs in training (`extra.search:output` and the
    zero-scale losses reading it) go, as the import leaves them out; `extra.search:` of a layer
    that searches nothing (the alignment's fallback) stays."""
    sys.path.insert(0, str(ROOT / "tools"))
    from corpus_match import strip_training_search

    net = {
        "output": {"class": "rec", "from": [], "unit": {"output": {"class": "choice", "from": "p"}}},
        "extra.search:output": {"class": "rec", "from": [], "unit": {"output": {"class": "choice", "from": "p"}}},
        "extra.search:t": {"class": "decide", "from": "extra.search:output"},
        "t_err": {"class": "eval", "from": ["extra.search:t", "fallback"], "loss": "as_is", "loss_scale": 0},
        "fallback": {"class": "copy", "from": "data:t_base"},
        "t_target": {"class": "copy", "from": "extra.search:fallback", "register_as_extern_data": "t_target"},
    }
    taken = strip_training_search(net)
    assert sorted(net) == ["fallback", "output", "t_target"]
    assert taken == [
        "`t_err`, `extra.search:t`, `extra.search:output` (they read a search in training, which the import leaves out)"
    ]


def test_a_window_starting_at_an_argmax_read_as_a_float_compiles_and_verifies(tmp_path):
    """The local-attention median setups' window start: the argmax's labels over the frames as a
    float (`tf.to_float(source(0)) - k`, whole numbers), which the window compares with the frames'
    positions as floats. (Only a position a `choice` made is a number to an `eval`: taking any
    labels over the frames so made the comparison int32 against float32 and the model did not
    compile.) TensorFlow 2 has no `tf.to_float`, nor does RETURNN's window take a float start here:
    the netc model is verified, not compared with the original."""
    text = (ROOT / "tests" / "import_configs" / "corpus_local_attention.config").read_text()
    old = '"window_start": "p_t3_in", "window_size": win},'
    assert old in text
    text = text.replace(
        old,
        '"window_start": "p_t3", "window_size": win},\n'
        '            "p_t3": {"class": "eval", "from": "p_t3_in", "eval": "tf.maximum(tf.to_float(source(0)) - 1.0, 0.0)",\n'
        '                     "out_type": {"sparse": False, "dtype": "float32"}},',
    )
    cfg = tmp_path / "median.config"
    cfg.write_text(text)
    model = tmp_path / "median.py"
    proc = run_netc("import", cfg, "-o", model)
    assert proc.returncode == 0, proc.stderr
    assert "cast(range_over(" in model.read_text() and '"float32") >= p_t3' in model.read_text(), model.read_text()
    out = run_netc("verify", model)
    assert out.returncode == 0 and "verify: ok" in out.stdout, out.stdout + out.stderr


def test_fertility_and_the_targets_frame_in_the_unit_import_verify_and_match(tmp_path):
    """The window's start reads the step's target position (training's `t_target[i]`; a search
    starts at the previous position), the fertility is a state over the encoder's frames."""
    assert FERTILITY.count("data:t_target") == 1 and FERTILITY.count("sparse_fertility") == 2
    assert '"att": {"class": "gather_nd"' in FERTILITY
    rec = _run(tmp_path, {"fertility.config": FERTILITY})["asr/fertility.config"]
    assert rec["outcome"] == "imported", rec
    assert rec["verify"] == {"status": "ok", "train": "ok", "search": "ok"}, rec
    # the installed RETURNN cannot build the original (as the corpus's fertility configs, written for
    # an older one): the `expand_dims` of the fertility's previous value in the loop fails its broadcast
    assert rec["match"]["status"] == "unbuildable" and "need to broadcast" in rec["match"]["cause"], rec
    model = Path(rec["model"]).read_text()
    assert "for i in range(" in model, model
    branches = (
        "if searching():\n            t_start = t\n        else:\n            t_start = minimum(t, l2_t_target[i])"
    )
    assert branches in model, model
    assert "accum_att_weights = zeros(batch, lstm0_pool_time)" in model, model
    assert "choice(log(t_weights1) * 0.5, target=l2_t_target" in model and 'input_type="log_prob"' in model, model


def test_other_reads_of_the_targets_frame_are_refused_naming_them(tmp_path):
    cfg = tmp_path / "fertility.config"
    minimum = '"eval": "tf.minimum(source(0), source(1))"}'
    assert minimum in FERTILITY
    cfg.write_text(FERTILITY.lstrip().replace(minimum, '"eval": "source(0) + source(1)"}'))
    proc = run_netc("import", cfg, "-o", tmp_path / "model.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "layer `output/t_start` (eval): eval 'source(0) + source(1)' reads the step's frame" in proc.stderr, (
        proc.stderr
    )
