"""`netc import` of transducer units trained full-sum (configs written here, in the idiom of the
corpus's RNN-T and RNA setups): in training RETURNN's loop optimisation computes the unit on the
(frame, label) lattice (the label-side network under a `masked_computation` with `masked_from`,
the joint a `linear` of both with `out_type` [T, U+1, B, F]) and the config's own function
computes the loss; netc writes the lattice outside any loop and the loss as `rnnt_loss` where the
function is the RNN-T loss with the blank last (docs/import.md, "Transducers trained full-sum")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import run_netc

ROOT = Path(__file__).resolve().parent.parent

# a stand-in for warp-transducer's TF binding (the corpus's configs import it from RETURNN's `extern`,
# which is not installed here): its RNN-T loss, labels read as classes as they are and `blank_label`
# the blank, as a plain forward recursion in numpy (no gradient): the original's loss, computed
# independently of netc, for the runner's match stage
WARP_STANDIN = """
import numpy as np
import tensorflow as tf


def _costs(acts, labels, frame_lens, label_lens, blank):
    out = []
    for b in range(acts.shape[0]):
        x = acts[b].astype(np.float64)
        top = x.max(-1, keepdims=True)
        logp = x - top - np.log(np.exp(x - top).sum(-1, keepdims=True))
        n_t, n_u = int(frame_lens[b]), int(label_lens[b])
        alpha = np.full((n_t, n_u + 1), -np.inf)
        alpha[0, 0] = 0.0
        for t in range(n_t):
            for u in range(n_u + 1):
                terms = [alpha[t, u]] if t == 0 and u == 0 else []
                if t > 0:
                    terms.append(alpha[t - 1, u] + logp[t - 1, u, blank])
                if u > 0:
                    terms.append(alpha[t, u - 1] + logp[t, u - 1, labels[b, u - 1]])
                alpha[t, u] = np.logaddexp.reduce(terms)
        out.append(-(alpha[n_t - 1, n_u] + logp[n_t - 1, n_u, blank]))
    return np.array(out, np.float32)


def rnnt_loss(acts, labels, input_lengths, label_lengths, blank_label=0):
    return tf.numpy_function(
        lambda a, l, t, u: _costs(a, l, t, u, blank_label), [acts, labels, input_lengths, label_lengths], tf.float32
    )
"""

RNNT = """
#!rnn.py
import os
task = "train"
num_labels = 5
blank_idx = BLANK
extern_data = {
    "data": {"dim": 3, "shape": (None, 3)},
    "bpe": {"dim": num_labels, "shape": (None,), "sparse": True},
}


def transducer_cost(source, **kwargs):
    IMPORT
    scores = source(0, as_data=True, auto_convert=False)
    labels = source(1, as_data=True, auto_convert=False)
    frames = source(2, as_data=True, auto_convert=False)
    frame_lens = frames.get_sequence_lengths()
    label_lens = labels.get_sequence_lengths()
    cost = COST(scores.get_placeholder_as_batch_major(), labels.get_placeholder_as_batch_major(),
                     frame_lens, label_lens, blank_label=blank_idx)
    cost.set_shape((None,))
    return cost


def cost_out(sources, **kwargs):
    from returnn.tf.util.data import Data
    return Data(name="transducer_cost", shape=())


network = {
    "fw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "direction": 1, "from": "data"},
    "bw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "direction": -1, "from": "data"},
    "encoder": {"class": "copy", "from": ["fw", "bw"]},
    "enc_len": {"class": "length", "from": "encoder", "sparse": True},
    "pred_in0": {"class": "copy", "from": "data:bpe"},
    "pred_in1": {"class": "prefix_in_time", "from": "pred_in0", "prefix": 0},
    "pred_in": {"class": "copy", "from": "pred_in1"},
    "output": {
        "class": "rec", "from": "encoder", "include_eos": True, "target": "bpe",
        "max_seq_len": "max_len_from('base:encoder') * 2",
        "unit": {
            "enc0": {"class": "gather_nd", "from": "base:encoder", "position": "prev:t"},
            "enc": {"class": "copy", "from": ENC},
            "prev_label": {"class": "reinterpret_data", "from": "prev:output", "set_sparse_dim": num_labels},
            "pred": {"class": "masked_computation", "mask": "prev:emit", "from": "prev_label",
                     "masked_from": "base:pred_in" if task == "train" else None,
                     "unit": {"class": "subnetwork", "from": "data", "subnetwork": {
                         "embed": {"class": "linear", "activation": None, "with_bias": False, "from": "data", "n_out": 3},
                         "lstm": LSTM,
                         "output": {"class": "copy", "from": "lstm"}}}},
            "joint": {"class": "linear", "from": ["enc", "pred"], "activation": None, "n_out": 6, "dropout": 0.1,
                      "out_type": {"batch_dim_axis": 2, "shape": (None, None, 6), "time_dim_axis": 0}},
            "joint_max": {"class": "reduce_out", "mode": "max", "num_pieces": 2, "from": "joint"},
            "label_lp": {"class": "linear", "from": "joint_max", "activation": "log_softmax", "n_out": num_labels},
            "emit0": {"class": "linear", "from": "joint_max", "activation": None, "n_out": 1},
            "emit_lp": {"class": "activation", "from": "emit0", "activation": "log_sigmoid"},
            "blank_lp": {"class": "eval", "from": "emit0", "eval": "tf.compat.v1.log_sigmoid(-source(0))"},
            "label_emit_lp": {"class": "combine", "kind": "add", "from": ["label_lp", "emit_lp"]},
            "scores": {"class": "copy", "from": SCORES},
            "cost": {"class": "eval", "from": ["scores", "base:data:bpe", "base:encoder"], "eval": transducer_cost,
                     "out_type": cost_out, "loss": "as_is"},
            "output": {"class": "choice", "target": "bpe", "beam_size": 3, "from": "scores", "input_type": "log_prob",
                       "initial_output": 0, "cheating": "exclusive" if task == "train" else None},
            "not_blank": {"class": "compare", "from": "output", "value": blank_idx, "kind": "not_equal",
                          "initial_output": True},
            "emit": {"class": "copy", "from": "not_blank", "initial_output": True},
            "zero": {"class": "constant", "value": 0},
            "one": {"class": "constant", "value": 1},
            "dt": {"class": "switch", "condition": "not_blank", "true_from": "zero", "false_from": "one"},
            "t": {"class": "combine", "from": ["prev:t", "dt"], "kind": "add", "initial_output": 0},
            "end": {"class": "compare", "from": ["t", "base:enc_len"], "kind": "greater"},
        },
    },
}
"""

WARP = "from extern.HawkAaronWarpTransducer import rnnt_loss"
RNA = "from rna_tf_impl import tf_forward_shifted_rna"
LAST = '["label_emit_lp", "blank_lp"]'
FIRST = '["blank_lp", "label_emit_lp"]'
TRAIN_ENC = '"data:source" if task == "train" else "enc0"'


NATIVE = '{"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "embed"}'
ZONEOUT = '{"class": "rnn_cell", "unit": "ZoneoutLSTM", "n_out": 4, "from": "embed", "unit_opts": {"zoneout_factor_cell": 0.15, "zoneout_factor_output": 0.05}}'


def config(tmp_path, blank="num_labels", scores=LAST, imp=WARP, cost="rnnt_loss", enc=TRAIN_ENC, lstm=NATIVE):
    text = (
        RNNT.replace("LSTM", lstm)
        .replace("BLANK", blank)
        .replace("SCORES", scores)
        .replace("IMPORT", imp)
        .replace("COST", cost)
    )
    cfg = tmp_path / "rnnt.config"
    cfg.write_text(text.replace("ENC", enc).lstrip())
    return cfg


def test_rnnt_unit_trained_full_sum_is_the_lattice_and_rnnt_loss_and_verifies(tmp_path):
    model = tmp_path / "model.py"
    proc = run_netc("import", config(tmp_path), "-o", model)
    assert proc.returncode == 0, proc.stderr
    assert "layer `output`: a transducer trained full-sum" in proc.stderr
    text = model.read_text()
    # the labels with the begin label before them, the label-side network over them (the masked unit)
    assert "pred_in1 = pad_frames(pred_in0, axis=bpe_time, left=1, value=0, out_axis=pred_in1_time)" in text
    assert "embed = Embedding(feat)(pred_in)  # layer 'output/pred/embed'" in text
    assert "lstm = Lstm(fw_dim)(embed)  # layer 'output/pred/lstm'" in text
    # the joint: the encoder's frames by the labels' (RETURNN's `out_type` [T, U+1, B, F])
    assert "concat(expand(output_enc, pred_in1_time), expand(output_pred, time))" in text
    assert (
        'mark_as_loss(rnnt_loss(output_scores, bpe, axis=vocab + emit0_dim, time_axis=time, blank_index=5), "cost")'
        in text
    )
    assert "output = bpe" in text
    out = run_netc("verify", model)
    assert out.returncode == 0 and "verify: ok" in out.stdout, out.stdout + out.stderr


def test_an_rnn_cell_of_the_label_side_runs_over_the_labels(tmp_path):
    # a cell in the masked computation's unit: RETURNN runs it over `masked_from`'s frames
    model = tmp_path / "model.py"
    proc = run_netc("import", config(tmp_path, lstm=ZONEOUT), "-o", model)
    assert proc.returncode == 0, proc.stderr
    text = model.read_text()
    assert "# layer 'lstm': a zoneoutlstm unit, step by step" in text
    assert "rnnt_loss(output_scores, bpe" in text
    out = run_netc("verify", model)
    assert out.returncode == 0 and "verify: ok" in out.stdout, out.stdout + out.stderr


def test_the_setups_own_rnnt_log_likelihood_negated_is_the_rnnt_loss(tmp_path):
    model = tmp_path / "model.py"
    own = "from rnnt_tf_impl import tf_forward_shifted"
    proc = run_netc("import", config(tmp_path, imp=own, cost="-tf_forward_shifted"), "-o", model)
    assert proc.returncode == 0, proc.stderr
    assert "rnnt_loss(output_scores, bpe, axis=vocab + emit0_dim, time_axis=time, blank_index=5)" in model.read_text()
    # not negated: the log-likelihood, not a cost
    proc = run_netc("import", config(tmp_path, imp=own, cost="tf_forward_shifted"), "-o", model)
    assert proc.returncode == 0, proc.stderr
    assert "`tf_forward_shifted(...)`: the RNN-T log-likelihood, not its cost, which netc has no op for" in proc.stderr
    assert "rnnt_loss" not in model.read_text()


def test_a_loss_function_netc_cannot_compute_is_left_out_with_a_note(tmp_path):
    # the RNN-T loss with the blank first, reading label k as class k (label 0 as the blank too)
    model = tmp_path / "model.py"
    proc = run_netc("import", config(tmp_path, blank="0", scores=FIRST), "-o", model)
    assert proc.returncode == 0, proc.stderr
    assert (
        "note: loss of layer `output/cost` left out: the config's function `transducer_cost` computes the RNN-T loss"
        in proc.stderr
    )
    text = model.read_text()
    assert "rnnt_loss" not in text
    # the lattice's log-probabilities an output: the unit's parameters are the model's
    assert 'return {"output_scores": output_scores, "output": output}' in text
    # RNA's loss (one label per frame), which netc has no op for
    proc = run_netc("import", config(tmp_path, imp=RNA, cost="-tf_forward_shifted_rna"), "-o", model)
    assert proc.returncode == 0, proc.stderr
    assert (
        "the loss of rna_tf_impl.tf_forward_shifted_rna (not the RNN-T loss), which netc has no op for" in proc.stderr
    )
    assert "output = bpe" in model.read_text()


def test_a_step_value_read_on_the_lattice_is_refused_at_the_rec_layer(tmp_path):
    # the encoder's frame at the position the loop counts: RETURNN leaves it in the loop
    proc = run_netc("import", config(tmp_path, enc='"enc0"'), "-o", tmp_path / "model.py")
    assert proc.returncode != 0
    assert "error: layer `output` (rec): `prev:t` read on the (frame, label) lattice" in proc.stderr


def test_corpus_runner_matches_the_original_with_its_rnnt_loss(tmp_path):
    corpus = tmp_path / "corpus"
    (corpus / "asr" / "extern").mkdir(parents=True)
    (corpus / "asr" / "extern" / "__init__.py").write_text("")
    (corpus / "asr" / "extern" / "HawkAaronWarpTransducer.py").write_text(WARP_STANDIN.lstrip())
    config(tmp_path).rename(corpus / "asr" / "rnnt.config")
    config(tmp_path, blank="0", scores=FIRST).rename(corpus / "asr" / "blank0.config")
    out = tmp_path / "report"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(corpus / "asr")]))
    proc = subprocess.run(
        [sys.executable, ROOT / "tools" / "import_corpus.py", corpus, "--out", out, "-j", "1"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    records = {r["config"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    for name in ("asr/rnnt.config", "asr/blank0.config"):
        rec = records[name]
        assert rec["outcome"] == "imported" and rec["verify"] == {"status": "ok", "train": "ok"}, rec
        assert rec["match"]["status"] == "ok", rec
    # the loss itself: RETURNN's original (the stand-in's recursion) against netc's `rnnt_loss`
    assert "loss output/cost" in records["asr/rnnt.config"]["match"]["cause"], records["asr/rnnt.config"]
