"""`netc import` against RETURNN: each config of tests/import_configs/ is built in real RETURNN
(TensorFlow, one process for all tests) with its own random parameters and run on a padded batch
with unequal lengths; the imported model, its parameters carried across by the importer's name
map, must give the same outputs and losses on netc's RETURNN config and its torch module."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, netc_in_process, run_netc, verify_in_process

from netc.compiler import compile_graph
from netc.importer.checkpoint import model_value
from netc.ir.interface import interface
from netc.naming import lens_name
from netc_runtime.backends import run_backend
from netc_runtime.verify import abs_diff

CONFIGS = ROOT / "tests" / "import_configs"
# config, --set options, the lengths of each dynamic dim of the inputs (in order of appearance)
CASES = {
    "blstm_ctc": ("blstm_ctc.config", [], [[9, 6, 4], [3, 2, 1]]),
    "lstm_lm": ("lstm_lm.config", [], [[7, 5, 2]]),
    "stacked_loop": ("stacked_loop.config", [], [[8, 3, 5], [8, 3, 5]]),  # frame-wise targets
    "dot_scores": ("dot_scores.config", [], [[5, 7, 2]]),
    "lstm_decoder": ("lstm_decoder.config", [], [[6, 4, 5], [3, 2, 4]]),
    "attention": ("attention.config", [], [[12, 8, 10], [3, 2, 4]]),  # even: RETURNN's pool is exact
    "eval_layers": ("eval_layers.config", [], [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
    "task_train": ("task_dependent.config", [], [[6, 4, 5], [2, 1, 2]]),
    "task_search": ("task_dependent.config", [("task", "search")], [[6, 4, 5], [2, 1, 2]]),
    "conv_encoder": ("conv_encoder.config", [], [[13, 9, 11], [3, 2, 4]]),  # strided conv: time 6, 4, 5
    "gates": ("gates.config", [], [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
    "dim_tags_attention": ("dim_tags_attention.config", [], [[9, 6, 4]]),
    "transformer": ("transformer.config", [], [[7, 4, 6], [7, 4, 6]]),  # frame-wise targets
    "rna_transducer": ("rna_transducer.config", [], [[7, 4, 6]]),  # the alignment over the frames' own dim
    "rna_search": ("rna_search.config", [], [[7, 4, 6]]),  # a `choice` per frame: teacher forcing in training
    "transformer_decoder": ("transformer_decoder.config", [], [[6, 4, 5], [4, 2, 3]]),
    "shared_parts": ("shared_parts.config", [], [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
    "conformer": ("conformer.config", [], [[12, 8, 10], [3, 2, 4]]),  # even: RETURNN's pool is exact
    "transformer_class": ("transformer_class.config", [], [[7, 4, 6], [7, 4, 6]]),  # frame-wise targets
    "pretrain": ("pretrain.config", [], [[16, 12, 20], [3, 2, 2]]),  # multiples of 4: two pools of 2
    "front_ends": ("front_ends.config", [], [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
    # strided 2-D convs: "same" with time stride 2 agrees on lengths congruent to the longest's modulo 2
    "conv2d_strided": (
        "conv2d_strided.config",
        [],
        [[9, 7, 3], [1, 1, 1]],
    ),  # 2 frames after the convs: CTC of 2 equal labels would be infeasible (inf)
    "conv2d_strided_even": ("conv2d_strided.config", [], [[10, 8, 4], [2, 1, 1]]),
    "pretrain_2": ("pretrain.config", [("enc_num_layers", "2")], [[16, 12, 20], [3, 2, 2]]),
    "fold_stacks": ("fold_stacks.config", [], [[6, 3, 5], [6, 3, 5]]),  # frame-wise targets
    "tied_lm": ("tied_lm.config", [], [[7, 5, 2]]),  # the output layer's W is the embedding's (reuse_params)
    "tied_rec_lm": ("tied_rec_lm.config", [], [[7, 5, 2]]),  # the same in a rec unit
    # RETURNN's documented examples (its docs' and demos' networks), frame-wise targets but the decoder's
    "doc_feedforward": ("doc_feedforward.config", [], [[5, 2, 4]]),
    "doc_rec_relu": ("doc_rec_relu.config", [], [[5, 2, 4]]),
    "doc_native_lstm2": ("doc_native_lstm2.config", [], [[5, 2, 4]]),
    "doc_blstm": ("doc_blstm.config", [], [[5, 2, 4]]),
    "doc_rec_explicit_lstm": ("doc_rec_explicit_lstm.config", [], [[5, 2, 4]]),
    "doc_rec_self_att": ("doc_rec_self_att.config", [], [[5, 2, 4]]),
    "doc_rel_pos_self_att": ("doc_rel_pos_self_att.config", [], [[5, 2, 4]]),
    "doc_decoder": ("doc_decoder.config", [], [[5, 2, 4], [3, 2, 4]]),  # labels, not frame-wise
    "hard_attention": ("hard_attention.config", [], [[7, 4, 6], [3, 2, 4]]),  # two choices a step
    # shallow fusion with an EOS threshold: scores of -inf (`mask_inf`) in the outputs
    "fused_eos": ("fused_eos_threshold.config", [], [[6, 4, 5], [3, 2, 4]]),
    # a factored hybrid's label parts (`tf.floordiv`, `tf.floormod`), registered as inputs
    "factored_labels": ("factored_labels.config", [], [[6, 3, 5]]),
}
DOC_CASES = sorted(c for c in CASES if c.startswith("doc_"))
TOLERANCE = 1e-5


def run_original(config: Path, sets, lengths: list[list[int]], seed: int = 3, save: str | None = None) -> dict:
    """The config's network in RETURNN (training graph, dropout off at run time) on a random batch,
    padded with zeros as RETURNN's datasets pad: inputs and lengths by extern_data key, outputs of
    `output` and the output layers, losses (summed over frames, RETURNN's `get_loss_value`),
    parameters (random: also those RETURNN initialises to a constant, biases, norms' scales and
    statistics). `save`: also a TF checkpoint at that prefix, as training leaves it (the variables,
    the global step, Adam's slots)."""
    import tensorflow as tf
    from returnn.config import Config, set_global_config
    from returnn.log import log
    from returnn.tf.native_op import OpMaker
    from returnn.tf.network import TFNetwork

    tf.compat.v1.disable_eager_execution()
    log.initialize(verbosity=[0])
    OpMaker.with_cuda = False
    args = [a for k, v in sets for a in (f"++{k}", v)]
    cfg = Config()
    set_global_config(cfg)
    cfg.parse_cmd_args(args)
    cfg.load_file(str(config))
    cfg.parse_cmd_args(args)
    rng = np.random.default_rng(seed)
    with tf.Graph().as_default() as graph:
        train_flag = tf.compat.v1.placeholder(tf.bool, shape=(), name="train_flag")
        net = TFNetwork(config=cfg, train_flag=train_flag)
        net.construct_from_dict(cfg.typed_value("network"))
        feed, inputs, lens, tag_lens = {train_flag: False}, {}, {}, {}
        registered = {
            ld.get("register_as_extern_data") for ld in cfg.typed_value("network").values() if isinstance(ld, dict)
        }
        for key, data in net.extern_data.data.items():
            dyn = [d for d in data.dim_tags if d.is_dynamic() and not d.is_batch_dim()]
            # a layer's (`register_as_extern_data`; a reinterpreted input's has the input's placeholder)
            if not dyn or data.placeholder.op.type != "Placeholder" or key in registered:
                continue
            tag = dyn[0]
            if tag not in tag_lens:
                tag_lens[tag] = np.asarray(lengths[len(tag_lens)], np.int32)
            n = tag_lens[tag]
            if data.sparse:
                x = rng.integers(0, data.dim, size=(len(n), max(n))).astype(np.int32)
                for i, k in enumerate(n):
                    x[i, k:] = 0
            else:
                x = rng.standard_normal((len(n), max(n), data.dim)).astype(np.float32)
                for i, k in enumerate(n):
                    x[i, k:] = 0.0
            inputs[key], lens[key] = x, n
            feed[data.placeholder] = x
            feed[data.get_sequence_lengths()] = n
        losses, _, _ = net.get_losses_initialized()
        names = [n for n, layer in net.layers.items() if n == "output" or layer.is_output_layer()]
        fetch = {f"out:{n}": net.get_layer(n).output.copy_as_batch_major().placeholder for n in names}
        # (an error measure such as `edit_distance` has no value: nothing is trained on it)
        fetch.update({f"loss:{n}": v for n, loss in losses.items() if (v := loss.get_loss_value()) is not None})
        with tf.compat.v1.Session(graph=graph) as session:
            net.initialize_params(session)
            for v in net.get_params_list():
                value = session.run(v)
                if value.size > 1 and np.all(value == value.flat[0]):  # zeros, ones: random instead
                    if "variance" in v.name:
                        new = rng.uniform(0.5, 1.5, value.shape)
                    else:
                        new = value + 0.5 * rng.standard_normal(value.shape)
                    v.load(new.astype(value.dtype), session)
            # the parameters the outputs are computed from (a batch norm with RETURNN's defaults before
            # behavior version 12 moves its statistics outside training too: the run changes them)
            params = {v.name[:-2]: session.run(v) for v in net.get_params_list()}
            if save:
                _save_checkpoint(net, session, save)
            out = session.run(fetch, feed_dict=feed)
    return {"inputs": inputs, "lens": lens, "fetch": out, "params": params}


def _save_checkpoint(net, session, prefix: str) -> None:
    """A checkpoint as training leaves one: every variable of the graph by its name (tf.compat.v1's
    Saver), with the global step and an Adam optimizer's slots and powers (made, not applied)."""
    import tensorflow as tf

    step = net.global_train_step_var  # RETURNN's `global_step` (not among the graph's global variables)
    trainable = [v for v in net.get_params_list() if v.trainable]
    values = [v for loss in net.get_losses_initialized()[0].values() if (v := loss.get_loss_value()) is not None]
    total = tf.add_n([tf.reduce_sum(v) for v in values])
    opt = tf.compat.v1.train.AdamOptimizer()
    opt.minimize(total, var_list=trainable, global_step=step)
    done = {v.name for v in net.get_params_list()}
    rest = list({v.name: v for v in [*tf.compat.v1.global_variables(), step] if v.name not in done}.values())
    session.run(tf.compat.v1.variables_initializer(rest))
    tf.compat.v1.train.Saver([*net.get_params_list(), *rest]).save(session, prefix, write_state=False)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Each case imported by the real CLI (model and name map) and run in RETURNN, once."""
    cache = {}

    def get(case: str):
        if case not in cache:
            file, sets, lengths = CASES[case]
            tmp = tmp_path_factory.mktemp(case)
            model, names = tmp / f"{case}.py", tmp / "names.json"
            opts = [a for k, v in sets for a in ("--set", f"{k}={v}")]
            netc_in_process("import", CONFIGS / file, "-o", model, "--param-map", names, *opts, check=True)
            cache[case] = (model, json.loads(names.read_text()), run_original(CONFIGS / file, sets, lengths))
        return cache[case]

    return get


def _inputs(g, original: dict) -> tuple[dict, dict]:
    """The original's batch as netc's inputs (by the model's input names) and lengths (by dim)."""
    kinds = {d.name: d.kind for d in g.dims}
    inputs, lens = {}, {}
    for inp in g.inputs:
        inputs[inp.name] = original["inputs"][inp.name]
        for d in inp.annotated_dims:
            if kinds[d] == "dynamic":
                lens[d] = original["lens"][inp.name]
    return inputs, lens


def _valid_diff(a: np.ndarray, b: np.ndarray, n: np.ndarray) -> float:
    assert a.shape[0] == b.shape[0] and a.shape[2:] == b.shape[2:], (a.shape, b.shape)
    return max(float(abs_diff(a[i, :k], b[i, :k]).max()) for i, k in enumerate(n))


@pytest.mark.parametrize("backend", ["returnn", "torch"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_imported_model_gives_the_originals_numbers(imported, case, backend):
    model, names, orig = imported(case)
    _compare(case, model, names, orig, backend)


def _compare(case: str, model: Path, names: dict, orig: dict, backend: str) -> None:
    g = compile_graph(str(model))
    params = {names["params"][k]["returnn"]: model_value(v, names["params"][k]) for k, v in orig["params"].items()}
    assert len(params) == len(orig["params"]) == len(g.params), (sorted(orig["params"]), names["params"])
    inputs, lens = _inputs(g, orig)
    res = run_backend(backend, str(model), inputs, lens, params, g)
    diffs = {}
    for layer, out in names["outputs"].items():
        ours, theirs = res.outputs[out], orig["fetch"][f"out:{layer}"]
        dyn = [d for d in res.dims[out] if d in res.lens.get(out, {})]
        if not dyn and ours.shape != theirs.shape:  # an axis of size 1 (`keep_dims`) where netc's order puts it
            ours, theirs = (a.reshape(a.shape[0], *(n for n in a.shape[1:] if n != 1)) for a in (ours, theirs))
        diffs[layer] = _valid_diff(ours, theirs, res.lens[out][dyn[0]]) if dyn else float(abs_diff(ours, theirs).max())
    for layer, loss in names["losses"].items():
        theirs = float(orig["fetch"][f"loss:{layer}"])
        assert theirs > 0.1, (layer, theirs)  # a real loss
        diffs[f"loss {layer}"] = abs(float(res.outputs[loss]) - theirs) / max(1.0, abs(theirs))
    print(case, backend, {k: f"{v:.1e}" for k, v in diffs.items()})
    assert names["outputs"] and diffs
    assert all(d <= TOLERANCE for d in diffs.values()), diffs  # a NaN difference fails too


def test_eos_threshold_sets_eos_to_minus_inf_where_the_original_does(imported):
    """The EOS threshold of a fusion function (`tf.range(tf.shape(x)[-1])`, `-float("inf")`) holds
    -inf where RETURNN's does, not a large finite number, and finite scores elsewhere."""
    model, names, orig = imported("fused_eos")
    theirs = orig["fetch"]["out:fused_scores"]
    valid = [theirs[i, :k] for i, k in enumerate(orig["lens"]["classes"])]
    eos = np.concatenate([v[..., 0] for v in valid])
    assert np.isneginf(eos).any() and np.isfinite(eos).any(), eos  # the threshold both ways
    assert all(np.isfinite(v[..., 1:]).all() for v in valid)
    _compare("fused_eos", model, names, orig, "torch")


def run_original_search(config: Path, original: dict, sets=()) -> dict:
    """The config's network in RETURNN's search (`search_flag`), with the training run's
    parameters and batch: each sequence's best hypothesis (the beam's first) and its score."""
    import tensorflow as tf
    from returnn.config import Config, set_global_config
    from returnn.tf.network import TFNetwork

    args = [a for k, v in sets for a in (f"++{k}", v)]
    cfg = Config()
    set_global_config(cfg)
    cfg.parse_cmd_args(args)
    cfg.load_file(str(config))
    cfg.parse_cmd_args(args)
    with tf.Graph().as_default() as graph:
        net = TFNetwork(config=cfg, train_flag=False, search_flag=True)
        net.construct_from_dict(cfg.typed_value("network"))
        feed = {}
        for key, data in net.extern_data.data.items():
            if key in original["inputs"] and any(d.is_dynamic() and not d.is_batch_dim() for d in data.dim_tags):
                feed[data.placeholder] = original["inputs"][key]
                feed[data.get_sequence_lengths()] = original["lens"][key]
        layer = net.get_layer("output")
        choices = layer.get_search_choices()
        fetch = {"labels": layer.output.copy_as_batch_major().placeholder, "scores": choices.beam_scores}
        with tf.compat.v1.Session(graph=graph) as session:
            for v in net.get_params_list():
                v.load(original["params"][v.name[:-2]], session)
            out = session.run({k: v for k, v in fetch.items() if k in ("labels", "scores")}, feed_dict=feed)
    beam = out["scores"].shape[1]
    return {"labels": out["labels"][::beam], "scores": out["scores"][:, 0]}


@pytest.mark.parametrize("backend", ["returnn", "torch"])
def test_rna_search_gives_the_originals_best_labels(imported, backend):
    """An RNA-style transducer (a `choice` per encoder frame, the label side under
    `masked_computation`) searched: the imported model's beam search finds the original's best
    labels with its score, RETURNN's search of the original config with the same parameters."""
    model, names, orig = imported("rna_search")
    # parameters 4 times the training run's and the blank's bias raised: blanks and labels
    params = {k: 4.0 * v for k, v in orig["params"].items()}
    params["output/rec/output_prob/b"][0] += 8.0  # (the blank is class 0)
    orig = {**orig, "params": params}
    theirs = run_original_search(CONFIGS / "rna_search.config", orig)
    g = compile_graph(str(model))
    params = {names["params"][k]["returnn"]: model_value(v, names["params"][k]) for k, v in orig["params"].items()}
    inputs, lens = _inputs(g, orig)
    res = run_backend(backend, str(model), inputs, lens, params, g, search=True)
    n = orig["lens"]["data"]
    ours = res.outputs[names["outputs"]["output"]]
    assert [list(r[:k]) for r, k in zip(ours, n)] == [list(r[:k]) for r, k in zip(theirs["labels"], n)]
    assert np.abs(res.outputs["scores"] - theirs["scores"]).max() <= TOLERANCE, (res.outputs["scores"], theirs)


@pytest.mark.parametrize(
    "config, sets",
    [
        ("fused_decoder.config", []),
        ("fused_eos_threshold.config", []),
        ("fused_eos_threshold.config", [("eos_axis", "1")]),  # the setups' axis number (a step's labels)
    ],
)
@pytest.mark.parametrize("backend", ["returnn", "torch"])
def test_fused_search_gives_the_originals_best_labels(tmp_path, backend, config, sets):
    """A decoder whose `choice` takes log-probabilities it fused itself (`input_type: "log_prob"`:
    the AM's plus 0.5 times an LM's; with an EOS threshold, EOS at -inf where it is below gamma
    times the best other label) searched: the imported model's beam search (netc's `choice` with
    `input_type="log_prob"`, the scores summed as they are) finds the original's best labels with
    its score, RETURNN's search of the original config with the same parameters."""
    config = CONFIGS / config
    model, map_file = tmp_path / "fused.py", tmp_path / "names.json"
    opts = [a for k, v in sets for a in ("--set", f"{k}={v}")]
    proc = netc_in_process("import", config, "-o", model, "--param-map", map_file, *opts, check=True)
    # the setups' `axis=1` is a step's labels, not what RETURNN's training graph reduces: warned
    assert ("`tf.reduce_max(..., axis=1)` in a rec unit is read over a step's layout" in proc.stderr) == bool(sets)
    names = json.loads(map_file.read_text())
    # (with the EOS threshold no hypothesis ends: inputs of one length, as RETURNN's bound is the
    # batch's longest, netc's each sequence's)
    orig = run_original(config, sets, [[6, 4, 5] if config.name == "fused_decoder.config" else [5, 5, 5], [3, 2, 4]])
    # RETURNN's training network has no LM (nothing it trains reads it): its parameters drawn here
    rng = np.random.default_rng(5)
    params = {
        k: orig["params"].get(k, rng.normal(0.0, 0.5, v["shape"]).astype(np.float32))
        for k, v in names["params"].items()
    }
    # (with the EOS threshold its `eval` is an output layer: RETURNN's training network has the LM)
    assert len(params) > len(orig["params"]) or config.name == "fused_eos_threshold.config"
    # 3 times as large (labels of every class) and EOS (label 0) more likely: hypotheses end before
    # the bound (RETURNN's is the batch's, netc's each sequence's)
    params = {k: np.float32(3.0) * v for k, v in params.items()}
    params["output/rec/output_prob/b"] = params["output/rec/output_prob/b"] + np.float32(2.0) * (np.arange(7) == 0)
    orig = {**orig, "params": params}
    theirs = run_original_search(config, orig, sets)
    g = compile_graph(str(model))
    params = {names["params"][k]["returnn"]: model_value(v, names["params"][k]) for k, v in orig["params"].items()}
    inputs, lens = _inputs(g, orig)
    res = run_backend(backend, str(model), inputs, lens, params, g, search=True)
    out = names["outputs"]["output"]
    (dec,) = [d for d in res.dims[out] if d in res.lens[out]]
    n = res.lens[out][dec]
    ours = res.outputs[out]
    assert [list(r[:k]) for r, k in zip(ours, n)] == [list(r[:k]) for r, k in zip(theirs["labels"], n)]
    if config.name == "fused_decoder.config":
        assert len({len(r[:k]) for r, k in zip(ours, n)}) > 1 and all(r[k - 1] == 0 for r, k in zip(ours, n))
    else:  # the threshold keeps EOS below it at -inf: no hypothesis ends before its bound (RETURNN's neither)
        assert all(0 not in list(r[:k]) for r, k in zip(ours, n)) and set(n) == {10}
    assert np.abs(res.outputs["scores"] - theirs["scores"]).max() <= TOLERANCE, (res.outputs["scores"], theirs)


@pytest.mark.parametrize("case", ["conformer", "lstm_lm", "tied_lm"])
def test_checkpoint_drives_the_imported_model(tmp_path, case):
    """`netc import --checkpoint`: the original's TF checkpoint (saved as training leaves it) gives
    the model's parameters; with the npz `netc run` gives the original's outputs and losses on
    each backend, and the torch module (`netc compile --target torch`) with the `state_dict`
    loaded strictly gives them too."""
    import importlib.util

    import torch

    file, sets, lengths = CASES[case]
    prefix = tmp_path / "net-model" / "network.040"
    orig = run_original(CONFIGS / file, sets, lengths, seed=11, save=str(prefix))
    model, names = tmp_path / f"{case}.py", tmp_path / "names.json"
    opts = [a for k, v in sets for a in ("--set", f"{k}={v}")]
    import tensorflow as tf

    saved = dict(tf.train.list_variables(str(prefix)))
    assert "global_step" in saved and any(k.endswith("/Adam_1") for k in saved), sorted(saved)  # skipped
    run_netc("import", CONFIGS / file, "-o", model, "--param-map", names, "--checkpoint", prefix, *opts, check=True)
    names = json.loads(names.read_text())
    params = np.load(tmp_path / f"{case}.npz")
    assert len(params.files) == len(orig["params"]) == len(names["params"])
    g = compile_graph(str(model))
    inputs, lens = _inputs(g, orig)
    batch = tmp_path / "in.npz"
    np.savez(batch, **{f"in:{k}": v for k, v in inputs.items()}, **{f"len:{d}": v for d, v in lens.items()})
    for backend in ("returnn", "torch", "eager"):
        out = tmp_path / f"out_{backend}.npz"
        netc_in_process("run", model, "--backend", backend, "--inputs", batch, "--params", tmp_path / f"{case}.npz",
                        "-o", out, check=True)  # fmt: skip
        res = np.load(out)
        outs = {k[len("out:") :]: res[k] for k in res.files if k.startswith("out:")}
        made = {k.split(":")[2]: res[k] for k in res.files if k.startswith("outlen:")}
        dims = {k[len("dims:") :]: list(res[k]) for k in res.files if k.startswith("dims:")}
        _assert_originals(case, backend, names, orig, outs, {**lens, **made}, dims)

    proc = verify_in_process(model, "--params", tmp_path / f"{case}.npz")  # eager = torch = RETURNN
    assert proc.returncode == 0 and "verify: ok" in proc.stdout, proc.stdout

    torch_file = tmp_path / "module.py"
    netc_in_process("compile", model, "--target", "torch", "-o", torch_file, check=True)
    spec = importlib.util.spec_from_file_location(f"imported_{case}", torch_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    module = mod.Model()
    module.load_state_dict(torch.load(tmp_path / f"{case}.pt"), strict=True)
    module.eval()
    args = {k: torch.as_tensor(v) for k, v in inputs.items()}
    args.update({lens_name(d): torch.as_tensor(v, dtype=torch.int64) for d, v in lens.items()})
    with torch.no_grad():
        outs = {k: v.numpy() for k, v in module(**args).items()}
    made = {d: outs[key] for d, key in interface(g).made_lens.items()}
    _assert_originals(case, "state_dict", names, orig, outs, {**lens, **made}, dict(module.output_dims))


@pytest.mark.parametrize(
    "variables, message",
    [
        ({"output/W": (4, 3)}, "missing output/b (the model's output/b)"),
        (
            {"output/W": (4, 3), "output/b": (3,), "old/W": (4, 4)},
            "variables the imported network does not have: old/W",
        ),
        ({"output/W": (4, 2), "output/b": (3,)}, "variable output/W has shape [4, 2], the imported model's output/W"),
    ],
)
def test_checkpoint_that_does_not_fit_is_an_error_naming_the_variable(tmp_path, variables, message):
    from netc_runtime.checkpoint import write_tf_checkpoint

    prefix = tmp_path / "network.001"
    write_tf_checkpoint({k: np.ones(shape, np.float32) for k, shape in variables.items()}, str(prefix))
    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
        network = {"output": {"class": "linear", "n_out": 3, "from": "data"}}
        """,
        "--checkpoint",
        str(prefix),
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{prefix}: error: ") and message in first, first
    assert not (tmp_path / "out.npz").exists() and not (tmp_path / "out.pt").exists()


def test_verify_params_of_another_shape_is_an_error(tmp_path):
    """`netc verify --params`: a parameter of another shape than the model's is an error naming it."""
    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
        network = {"output": {"class": "linear", "n_out": 3, "from": "data"}}
        """,
    )
    assert proc.returncode == 0, proc.stderr
    np.savez(tmp_path / "p.npz", **{"param:output/W": np.ones((4, 2), np.float32)})
    proc = run_netc("verify", tmp_path / "out.py", "--params", tmp_path / "p.npz")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().endswith("p.npz: param:output/W has shape [4, 2], the model's is [4, 3]"), proc.stderr


def test_checkpoint_that_is_none_is_an_error(tmp_path):
    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
        network = {"output": {"class": "linear", "n_out": 3, "from": "data"}}
        """,
        "--checkpoint",
        "net-model/network.007",
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("net-model/network.007: error: no TF checkpoint here: net-model/network.007.index")


def _assert_originals(case, how, names, orig, outs, lens, dims) -> None:
    """Each output (on its valid frames of `lens`, by the output's `dims`) and loss is the original's."""
    diffs = {}
    for layer, out in names["outputs"].items():
        ours, theirs = outs[out], orig["fetch"][f"out:{layer}"]
        dyn = [d for d in dims[out] if d in lens]
        diffs[layer] = _valid_diff(ours, theirs, lens[dyn[0]]) if dyn else float(np.abs(ours - theirs).max())
    for layer, loss in names["losses"].items():
        theirs = float(orig["fetch"][f"loss:{layer}"])
        diffs[f"loss {layer}"] = abs(float(outs[loss]) - theirs) / max(1.0, abs(theirs))
    print(case, how, {k: f"{v:.1e}" for k, v in diffs.items()})
    assert names["outputs"] and names["losses"] and all(d <= TOLERANCE for d in diffs.values()), (how, diffs)


@pytest.mark.parametrize("backend", ["returnn", "torch"])
def test_librispeech_2018_imports_and_gives_the_originals_numbers(tmp_path_factory, backend):
    """The goal: the 2018 LibriSpeech attention network (as tests/test_librispeech.py writes out
    the published config's `network`) imports without a refusal and, its parameters carried across,
    gives the original's labels, output probabilities and losses in training, on lengths that are multiples of 8 (where
    RETURNN's `pool` is exact)."""
    import pprint

    from test_librispeech import FEAT, ORIGINAL, VOCAB

    tmp = tmp_path_factory.getbasetemp() / "librispeech_2018"
    config, model, names = tmp / "librispeech_2018.config", tmp / "librispeech_2018.py", tmp / "names.json"
    if not names.exists():
        tmp.mkdir(exist_ok=True)
        net = {**ORIGINAL, "probs": {"class": "copy", "from": "output/output_prob", "is_output_layer": True}}
        data = {
            "data": {"dim": FEAT, "shape": (None, FEAT)},
            "classes": {"dim": VOCAB, "shape": (None,), "sparse": True},
        }
        config.write_text(f"#!rnn.py\nextern_data = {data!r}\nnetwork = {pprint.pformat(net, width=110)}\n")
        run_netc("import", config, "-o", model, "--param-map", names, check=True)
    source = model.read_text()  # lstm0 ... lstm5 fw/bw: six instances of one class, the pooling between them
    assert "class LstmBlock(Module):" in source and source.count(" = LstmBlock()  # layers 'lstm") == 6, source
    orig = run_original(config, [], [[32, 16, 24], [4, 2, 3]])
    _compare("librispeech_2018", model, json.loads(names.read_text()), orig, backend)


@pytest.mark.parametrize(
    "case",
    [
        "conv_encoder",
        "gates",
        "dim_tags_attention",
        "transformer",
        "rna_transducer",
        "transformer_decoder",
        "shared_parts",
        "conformer",
        "transformer_class",
        "pretrain",
        "fold_stacks",
        "fused_eos",
        "factored_labels",
        *DOC_CASES,
    ],
)
def test_imported_model_verifies(imported, case):
    """The imported model is a netc model like any other: eager = torch = RETURNN (`netc verify`)."""
    model = imported(case)[0]
    proc = verify_in_process(model)
    assert proc.returncode == 0 and "verify: ok" in proc.stdout and "mismatch" not in proc.stdout, proc.stdout


def test_task_decides_the_network(imported):
    """`--set task=search` is seen by the config as RETURNN's `++task search` is."""
    train = imported("task_train")[0].read_text()
    search = imported("task_search")[0].read_text()
    assert "mark_as_loss" in train and "mark_as_loss" not in search
    assert "--set task=search" in search.splitlines()[0]


def test_repeated_stacks_fold_into_modules(imported):
    """Layers named alike up to a number whose statements are the same up to what they read are
    one `Module` class and an instance per number, the original layers named at each instance;
    the parameters move to the instance's path, and the name map follows (the original-vs-imported
    tests check the numbers)."""
    model, names = imported("blstm_ctc")[:2]
    source = model.read_text()
    assert (
        "class LstmBlock(Module):\n"
        "    def __init__(self):\n"
        "        self.fw = Lstm(lstm0_fw_dim)\n"
        "        self.bw = Lstm(lstm0_fw_dim, direction=-1)\n"
        "\n"
        "    def __call__(self, x, x2):\n"
        "        fw = self.fw(x)\n"
        "        bw = self.bw(x2)\n"
        "        return fw, bw\n"
    ) in source
    lines = [line.strip() for line in source.splitlines()]
    assert "lstm0 = LstmBlock()  # layers 'lstm0_fw', 'lstm0_bw'" in lines
    assert "lstm0_fw, lstm0_bw = lstm0(data, data)" in lines
    assert "lstm1 = LstmBlock()  # layers 'lstm1_fw', 'lstm1_bw'" in lines
    # each layer's dropout of its input is its own (its own mask in training): an argument each
    assert (
        "lstm1_fw, lstm1_bw = lstm1(dropout(concat(lstm0_fw, lstm0_bw), 0.1), dropout(concat(lstm0_fw, lstm0_bw), 0.1))"
        in lines
    )
    assert not any(line.startswith("lstm1_bw = ") for line in lines)
    assert names["params"]["lstm1_bw/rec/W_re"]["netc"] == "lstm1/bw/W_re"
    assert names["params"]["lstm1_bw/rec/W_re"]["torch"] == "lstm1.bw.W_re"
    # a stack ending in its own layer (`enc0` concatenates `enc0_fw`, `enc0_bw`) returns that only
    lines = [line.strip() for line in imported("task_train")[0].read_text().splitlines()]
    assert "enc0_mod = EncBlock()  # layers 'enc0_fw', 'enc0_bw', 'enc0'" in lines
    assert "enc1 = enc1_mod(dropout(enc0, 0.1), dropout(enc0, 0.1))" in lines and "out = concat(fw, bw)" in lines
    # a dim each block makes (its self-attention's view of time) is an argument of the call
    source = imported("conformer")[0].read_text()
    assert source.count(" = ConformerBlock()  # 28 layers, 'conformer_block_0") == 2
    assert (
        "conformer_block_02 = conformer_block_02_mod(conformer_block_01, conformer_block_02_self_att_kv_time)" in source
    )
    # the block's input and the network's `input` are arguments; an inner layer read later is returned
    lines = [line.strip() for line in imported("fold_stacks")[0].read_text().splitlines()]
    assert "def __call__(self, x, x2):" in lines and "res = proj + x2" in lines and "return ff, out" in lines
    assert "block_1_ff, block_1 = block_1_mod(dropout(block_0, 0.1), input)" in lines
    assert "side1_lin = tanh(Linear(side1_lin_dim)(block_1))" in lines  # `side<i>`: other sizes
    # the two blocks' self-attentions have other heads: nothing folds
    assert "class " not in imported("transformer")[0].read_text()


@pytest.mark.parametrize(
    "second, why",
    [
        ('"n_out": 12', "another dim: another construction"),
        ('"n_out": 8, "direction": 1', "RETURNN's default direction written out: the same, folds"),
        ('"n_out": 8, "direction": -1', "backwards: another construction"),
    ],
)
def test_stacks_that_differ_in_a_construction_are_not_folded(tmp_path, second, why):
    """A fold is exact or none: the groups' constructions (dims, options) must be the same."""
    config = tmp_path / "stack.config"

    def layer(src: str) -> str:
        return '{"class": "rec", "unit": "nativelstm2", "n_out": 8, "from": "' + src + '"}'

    config.write_text(
        "#!rnn.py\n"
        'extern_data = {"data": {"dim": 4, "shape": (None, 4)}}\n'
        "network = {\n"
        f'    "l0_a": {layer("data")},\n'
        f'    "l0_b": {layer("l0_a")},\n'
        f'    "l1_a": {layer("l0_b")},\n'
        f'    "l1_b": {{"class": "rec", "unit": "nativelstm2", "from": "l1_a", {second}}},\n'
        '    "output": {"class": "copy", "from": "l1_b"},\n'
        "}\n"
    )
    proc = run_netc("import", config, "-o", tmp_path / "out.py", "--param-map", tmp_path / "names.json")
    source = (tmp_path / "out.py").read_text()
    names = json.loads((tmp_path / "names.json").read_text())["params"]
    if "folds" in why:
        assert proc.returncode == 0 and "class L" in source and names["l1_b/rec/W"]["netc"] == "l1/b/W", why
    else:
        assert proc.returncode == 0 and "class " not in source and names["l1_b/rec/W"]["netc"] == "l1_b/W", why


# netc's own RETURNN configs imported back: models whose layers the importer maps (a loop over a
# sequence with `rec_unstack`, `rec_last_output`, `<rec>/output` and `<rec>/<layer>`; `nativelstm2`; embeddings;
# `as_is` losses; sparse cross entropy layers; `layer_norm`, `batch_norm`, `compare`, `switch`, `cast`)
ROUND_TRIP = [
    "examples/elman.py",
    "tests/models/native_lstm.py",
    "tests/models/losses.py",
    "tests/models/ops_embedding.py",
    "tests/models/ops_layer_norm.py",
    "tests/models/ops_batch_norm.py",
    "tests/models/ops_where.py",
    "tests/models/ops_cast.py",
]


@pytest.mark.parametrize("model", ROUND_TRIP)
def test_round_trip_of_netcs_own_config(tmp_path, model):
    """compile → import gives a model that verifies (eager = torch = RETURNN), and that, with the
    parameters carried across by the name map, gives the original model's outputs and losses."""
    from netc_runtime.verify import random_inputs, random_lengths, random_params
    from netc_runtime.verify import verify as run_verify

    config, back, names = tmp_path / "config.py", tmp_path / "imported.py", tmp_path / "names.json"
    run_netc("compile", ROOT / model, "--target", "returnn", "-o", config, check=True)
    run_netc("import", config, "-o", back, "--param-map", names, check=True)
    g = compile_graph(str(back))
    comps, _ = run_verify(str(back), g)
    assert comps and all(c.ok for c in comps), comps

    g0 = compile_graph(str(ROOT / model))
    rng = np.random.default_rng(1)
    lens = random_lengths(g0, 3, 7, rng)
    inputs, params = random_inputs(g0, lens, rng), random_params(g0, rng)
    mapping = json.loads(names.read_text())
    assert sorted(mapping["params"]) == sorted(params)
    ours = {mapping["params"][k]["returnn"]: v for k, v in params.items()}
    orig = run_backend("returnn", str(ROOT / model), inputs, lens, params, g0)
    res = run_backend("returnn", str(back), inputs, lens, ours, g)
    pairs = {**mapping["outputs"], **mapping["losses"]}
    assert set(pairs) == set(orig.outputs), (pairs, list(orig.outputs))
    for theirs, mine in pairs.items():
        a, b = np.asarray(orig.outputs[theirs]), np.asarray(res.outputs[mine])
        assert a.shape == b.shape and np.allclose(a, b, atol=TOLERANCE, rtol=0), theirs


def _import_error(tmp_path, text: str, *sets: str):
    path = tmp_path / "bad.config"
    path.write_text(textwrap.dedent(text).lstrip())
    return path, run_netc("import", path.name, "-o", "out.py", *sets, cwd=tmp_path)


def _assert_at(proc, path: Path, line: int, col_text: str, message: str) -> None:
    """A located error: exit 1, no traceback, `file:line:col: error: message` with the line and caret."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    first, source_line, caret = proc.stderr.splitlines()[:3]
    text = path.read_text().splitlines()[line - 1]
    col = text.index(col_text)
    assert first.startswith(f"{path.name}:{line}:{col + 1}: error: "), first
    assert message in first, first
    assert source_line.strip() == text.strip() and caret.index("^") - 4 == col


def test_unsupported_layer_is_located_and_listed(tmp_path):
    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
        network = {
            "output": {"class": "linear", "n_out": 3, "from": "att"},
            "att": {"class": "twod_lstm", "n_out": 3, "from": ["data", "data"]},
        }
        """,
    )
    _assert_at(proc, path, 5, '"att"', "layer `att` (twod_lstm): this layer class is not supported")
    header = (tmp_path / "out.py").read_text().splitlines()[:3]
    assert "#   att (twod_lstm): this layer class is not supported by `netc import` yet" in header


def test_layer_class_returnn_does_not_have_is_refused_as_returnns_rejection(tmp_path):
    """A class of a setup's own RETURNN fork (the latent-attention setups' `hmm_factorization`, the
    old `gauss_weighting`): RETURNN gives it no meaning, which the refusal says (the corpus runner
    then checks that RETURNN rejects the config)."""
    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
        network = {
            "output": {"class": "linear", "n_out": 3, "from": "att"},
            "att": {"class": "hmm_factorization", "from": "data", "top_k": 2, "n_out": 3},
        }
        """,
    )
    msg = "layer `att` (hmm_factorization): RETURNN rejects it: it has no layer class 'hmm_factorization'"
    _assert_at(proc, path, 5, '"att"', msg)
    assert "hmm_factorization" in _returnn_error(path)


def test_eval_converting_a_source_to_fewer_axes_is_refused_as_returnns_rejection(tmp_path):
    """An `eval` of two sources whose `out_type` has fewer axes than a source it reads by
    `source(i)` (the local-attention setups' argmax position of the attention weights, `shape: ()`):
    RETURNN converts the source to the output's layout (`auto_convert`) and fails, which the refusal
    says. (Of one source, the import reads it as RETURNN before 2019-08 did, as it is:
    tests/test_import_corpus_recunits.py, the runner's test.)"""
    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
        network = {
            "output": {"class": "linear", "n_out": 3, "from": "data"},
            "pos": {"class": "eval", "from": ["output", "data"], "is_output_layer": True,
                    "eval": "tf.squeeze(tf.argmax(source(0), axis=1, output_type=tf.int32), axis=1)",
                    "out_type": {"shape": (), "batch_dim_axis": 0, "dtype": "int32"}},
        }
        """,
    )
    msg = "layer `pos` (eval): RETURNN rejects it: `source(0)` converts its input of 3 axes to the layout of `out_type`, of 1"
    _assert_at(proc, path, 5, '"pos"', msg)
    assert "copy_compatible_to" in _returnn_error(path)


def _returnn_error(path: Path) -> str:
    """RETURNN's own error building the config (the corpus runner's check of a "RETURNN rejects it")."""
    sys.path.insert(0, str(ROOT / "tools"))
    from corpus_match import returnn_error

    why = returnn_error(str(path), False)
    assert why is not None, "RETURNN built the config"
    return why


def test_unsupported_layer_made_in_a_loop_is_located_at_its_class(tmp_path):
    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
        network = {"output": {"class": "copy", "from": "cut2"}}
        for i in range(1, 3):
            network["cut%i" % i] = {"class": "twod_lstm", "n_out": i, "from": ["data", "data"]}
        """,
    )
    _assert_at(proc, path, 5, '"twod_lstm"', "layer `cut2` (twod_lstm): this layer class is not supported")


def test_unsupported_option_names_it(tmp_path):
    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
        network = {
            "output": {"class": "linear", "n_out": 3, "copy_output_loss_from_source_idx": 0},
        }
        """,
    )
    _assert_at(
        proc, path, 4, '"output"', "layer `output` (linear): option copy_output_loss_from_source_idx not supported"
    )


@pytest.mark.parametrize(
    ("tie", "message"),
    [
        ('{"map": {"W": {"reuse_layer": "emb", "custom": None}, "b": None}}', "reuse_params {'map': "),
        ('{"map": {"W": "emb"}}', "reuse_params map without `b` for a layer with a bias"),
        ('{"map": {"W": "hid", "b": None}}', "reuse_params of 'hid''s W, whose dims differ from this layer's"),
    ],
)
def test_tied_weights_not_supported_are_refused_at_the_layer(tmp_path, tie, message):
    """A `reuse_params` map netc cannot write as `weight=` is a located refusal, not a bad model."""
    path, proc = _import_error(
        tmp_path,
        f"""
        #!rnn.py
        extern_data = {{"data": {{"dim": 5, "sparse": True, "shape": (None,)}}}}
        network = {{
            "emb": {{"class": "linear", "n_out": 4, "with_bias": False, "from": "data"}},
            "hid": {{"class": "linear", "n_out": 3, "from": "emb"}},
            "output": {{"class": "linear", "n_out": 5, "from": "emb", "use_transposed_weights": True, "reuse_params": {tie}}},
        }}
        """,
    )
    _assert_at(proc, path, 6, '"output"', "layer `output` (linear): " + message)


def test_config_that_fails_to_load_is_located_in_the_config(tmp_path):
    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        def layer(n):
            return {"class": "linear", "n_out": n, "activation": act}

        network = {"output": layer(3)}
        """,
    )
    _assert_at(proc, path, 3, "act}", "the config fails to load: NameError: name 'act' is not defined")


def test_set_reaches_the_config_before_it_runs(tmp_path):
    path, proc = _import_error(
        tmp_path,
        """
        #!rnn.py
        task = config.value("task", "train")
        assert task == "train", "not for " + task
        """,
        "--set",
        "task=search",
    )
    _assert_at(proc, path, 3, "task ==", "AssertionError: not for search")


@pytest.mark.parametrize(
    "network, message",
    [
        ('{"output": {"class": "copy", "from": 3}}', "layer `output` (copy): a source 3 that is not a layer name"),
        (
            '{"output": {"class": "tanh", "from": "output"}, "x": None}',
            "layer `output` (tanh): RETURNN rejects it: it has no layer class 'tanh'",
        ),
        ('{"output": {"class": "activation", "activation": "tanh", "from": "output"}}', "it reads itself (a cycle)"),
        ("lambda epoch: {}", "the config has no dict of layers as `network`"),
    ],
)
def test_malformed_networks_are_errors_not_tracebacks(tmp_path, network, message):
    path = tmp_path / "bad.config"
    path.write_text(f'#!rnn.py\nextern_data = {{"data": {{"dim": 4, "shape": (None, 4)}}}}\nnetwork = {network}\n')
    proc = run_netc("import", path.name, "-o", "out.py", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert message in proc.stderr.splitlines()[0], proc.stderr


@pytest.mark.parametrize(
    "code, message",
    [
        (
            "tf.reduce_sum(source(0), axis=-1)",
            "eval 'tf.reduce_sum(source(0), axis=-1)': a value of fewer dims than its sources' (or labels) without `out_type`",
        ),
        (  # a TF axis number other than -1 names an axis of RETURNN's layout, which netc does not know
            "tf.squeeze(source(0), axis=1)",
            "eval 'tf.squeeze(source(0), axis=1)': `tf.squeeze(source(0), axis=1)` (axis=-1, the feature axis, is; "
            "other axis numbers of a `source(i, auto_convert=False)` whose layout in RETURNN netc knows",
        ),
        (
            "tf.math.reduce_logsumexp(source(0), axis=-1, keepdims=True)",
            "eval 'tf.math.reduce_logsumexp(source(0), axis=-1, keepdims=True)': a reduction with `keepdims=True` as "
            "the layer's value (as an operand it is) not supported",
        ),
        (
            "tf.to_float(source(0)) + tf.floordiv(source(0), 3)",
            "eval 'tf.to_float(source(0)) + tf.floordiv(source(0), 3)': `tf.floordiv(source(0), 3)` (floor division "
            "and modulo of labels' numbers, in an `eval` whose `out_type` is labels, are) not supported",
        ),
        (  # netc's numbers are finite: -inf only as a `tf.where` branch (`mask_inf`)
            "tf.where(tf.greater(source(0), 0.0), source(0), float('inf'))",
            "eval \"tf.where(tf.greater(source(0), 0.0), source(0), float('inf'))\": `tf.where(tf.greater(source(0), "
            "0.0), source(0), float('inf'))` with a branch of +inf (−inf is) not supported",
        ),
        (
            "source(0) + float('-inf')",
            "eval \"source(0) + float('-inf')\": `source(0) + float('-inf')`: arithmetic on an infinite value not "
            "supported",
        ),
        (
            "tf.expand_dims(source(0), 0)",
            "eval 'tf.expand_dims(source(0), 0)': `tf.expand_dims` as the layer's value (as an operand it is) not "
            "supported",
        ),
        (
            "tf.range(tf.shape(source(0))[0])",
            "eval 'tf.range(tf.shape(source(0))[0])': `tf.range(tf.shape(source(0))[0])` (`tf.range(tf.shape(x)[-1])`, "
            "x's feature axis, is) not supported",
        ),
        ("tf.erf(source(0))", "eval 'tf.erf(source(0))': `tf.erf` with 1 argument not supported"),
        ("source(0)[:, ::-1]", "eval 'source(0)[:, ::-1]': `source(0)[:, ::-1]` not supported"),
        ("source(2) * 2", "eval 'source(2) * 2': `source(2)` but it has 1 sources"),
        ("__import__('os').system('true')", "eval \"__import__('os').system('true')\": `__import__"),
        ("source(0) +", "eval 'source(0) +' is not a Python expression"),
        ("2 ** source(0)", "eval '2 ** source(0)': `2 ** source(0)` (a tensor to a number's power is) not"),
    ],
)
def test_eval_outside_the_restricted_language_is_refused_at_the_layer(tmp_path, code, message):
    path, proc = _import_error(
        tmp_path,
        f"""
        #!rnn.py
        extern_data = {{"data": {{"dim": 4, "shape": (None, 4)}}}}
        network = {{
            "output": {{"class": "eval", "from": "data", "eval": {code!r}}},
        }}
        """,
    )
    _assert_at(proc, path, 4, '"output"', f"layer `output` (eval): {message}")


@pytest.mark.parametrize(
    "code, message",
    [
        (  # [B, T, F] known (enforce_batch_major), but TF's argmax over T counts its padded frames
            "tf.argmax(source(0, auto_convert=False), axis=1)",
            "`tf.argmax(source(0, auto_convert=False), axis=1)` over a time axis (its padded frames count in TF; "
            "an argmax over a `softmax_over_spatial`'s weights is supported, and an argmin/argmax of elementwise "
            "functions of their cumulative sum)",
        ),
        (  # a cumulative sum over T is netc's, but its padded frames repeat the last valid one only of weights
            "tf.argmin(tf.cumsum(source(0, auto_convert=False), axis=1) - 0.5, axis=1)",
            "`tf.argmin(tf.cumsum(source(0, auto_convert=False), axis=1) - 0.5, axis=1)` over a time axis",
        ),
        ("tf.reduce_max(source(0, auto_convert=False), axis=0)", "over the batch axis"),
        # converting to `out_type`'s fewer axes RETURNN rejects: read as it is (RETURNN before 2019-08), its layout
        ("tf.reduce_max(source(0), axis=1)", "`tf.reduce_max(source(0, auto_convert=False), axis=1)` over a time axis"),
    ],
)
def test_eval_axis_numbers_of_a_known_layout_are_refused_where_tf_differs(tmp_path, code, message):
    """Axis numbers of a source read `auto_convert=False` whose RETURNN layout netc knows name its
    dims (the local-attention setups: tests/test_import_corpus_layers.py); where TF's op would read
    padded frames or the batch axis, a refusal."""
    path, proc = _import_error(
        tmp_path,
        f"""
        #!rnn.py
        extern_data = {{"data": {{"dim": 4, "shape": (None, 4)}}}}
        network = {{
            "bm": {{"class": "reinterpret_data", "enforce_batch_major": True, "from": "data"}},
            "output": {{"class": "eval", "from": "bm", "eval": {code!r}, "out_type": {{"shape": (4,), "dim": 4}}}},
        }}
        """,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    col = path.read_text().splitlines()[4].index('"output"') + 1
    errors = [
        x for x in proc.stderr.splitlines() if x.startswith(f"{path.name}:5:{col}: error: layer `output` (eval): ")
    ]
    assert len(errors) == 1 and message in errors[0], proc.stderr


DECODER = """
#!rnn.py
extern_data = {"data": {"dim": 4, "shape": (None, 4)}, "classes": {"dim": 5, "shape": (None,), "sparse": True}}
network = {
    "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
    "output": {
        "class": "rec",
        "from": [],
        "unit": {
            "output": {"class": "choice", "target": "classes", "beam_size": 4, "from": ["prob"]},
            "end": {"class": "compare", "from": ["output"], "value": 0},
            "emb": {"class": "linear", "with_bias": False, "from": ["output"], "n_out": 3},
            "prob": {"class": "softmax", "from": ["prev:emb", "base:enc"], "target": "classes", "loss": "ce"},
        },
        "target": "classes",
        "max_seq_len": "max_len_from('base:data')",
    },
}
"""


@pytest.mark.parametrize(
    "old, new, line, at, message",
    [
        (
            '"value": 0}',
            '"kind": "greater", "value": 0}',
            10,
            '"end"',
            "layer `output/end` (compare): `end` other than `compare` of one layer with an integer `value`",
        ),
        (
            "\"max_len_from('base:data')\"",
            "None",
            5,
            '"output"',
            "layer `output` (rec): max_seq_len None (a decoder needs",
        ),
        (
            '"class": "softmax", "from": ["prev:emb", "base:enc"], "target": "classes", "loss": "ce"',
            '"class": "linear", "n_out": 5, "activation": "softmax", "from": ["prev:emb", "base:enc"]',
            9,
            '"output"',
            "layer `output/output` (choice): `choice` of `prob`, not a `softmax` layer",
        ),
        (
            '"from": ["prev:emb", "base:enc"]',
            '"from": ["prev:output", "base:enc"]',  # `prev:output` is a label state: read with `enc`
            12,
            '"prob"',
            "layer `output/prob` (softmax): labels (sparse) among several inputs (RETURNN rejects it too)",
        ),
        (
            '"target": "classes",\n        "max_seq_len"',
            '"target": "classes", "include_eos": True,\n        "max_seq_len"',
            5,
            '"output"',
            "layer `output` (rec): include_eos on a decoder with an `end` layer",
        ),
        (  # over the frames of `from`: ends with them, no `end` layer
            '"from": [],',
            '"from": "data",',
            5,
            '"output"',
            "layer `output` (rec): a decoder over the frames of `from` with an `end` layer (it ends with the frames; "
            "RNN-T's unit",
        ),
        (  # a position chosen beside the label, each step, trained on the label's target too
            '"end": {',
            '"t": {"class": "choice", "target": "classes", "beam_size": 4, "from": ["prob"]},\n            "end": {',
            5,
            '"output"',
            "layer `output` (rec): 2 `choice`s (output, t) of one target: netc's choices each take their own",
        ),
    ],
)
def test_decoder_forms_not_supported_are_refused_at_the_layer(tmp_path, old, new, line, at, message):
    assert old in DECODER
    path, proc = _import_error(tmp_path, DECODER.replace(old, new))
    _assert_at(proc, path, line, at, message)


TRIANGLE = """
#!rnn.py
extern_data = {
    "data": {"dim": 4, "shape": (None, 4)},
    "classes": {"dim": 5, "shape": (None,), "sparse": True},
    "trans": {"dim": 6, "shape": (None,), "sparse": True},
}
network = {
    "enc": {"class": "reduce", "mode": "mean", "axes": "T", "from": "data"},
    "first": {
        "class": "rec",
        "from": [],
        "unit": {
            "output": {"class": "choice", "target": "trans", "beam_size": 1, "from": ["prob"]},
            "end": {"class": "compare", "from": ["output"], "value": 0},
            "emb": {"class": "linear", "with_bias": False, "from": ["output"], "n_out": 3},
            "prob": {"class": "softmax", "from": ["prev:emb", "base:enc"], "target": "trans", "loss": "ce"},
        },
        "target": "trans",
        "max_seq_len": "max_len_from('base:data')",
    },
    "first_states": {"class": "reduce", "mode": "mean", "axes": "T", "from": "first/emb"},
    "output": {
        "class": "rec",
        "from": [],
        "unit": {
            "output": {"class": "choice", "target": "classes", "beam_size": 4, "from": ["prob"]},
            "end": {"class": "compare", "from": ["output"], "value": 0},
            "emb": {"class": "linear", "with_bias": False, "from": ["output"], "n_out": 3},
            "prob": {"class": "softmax", "from": ["prev:emb", "base:first_states"], "target": "classes", "loss": "ce"},
        },
        "target": "classes",
        "max_seq_len": "max_len_from('base:data')",
    },
}
"""


def test_a_decoder_searched_over_another_decoders_result_is_refused_at_a_decoder(tmp_path):
    """The speech-translation "triangle" models: a transcript decoded first, a translation decoder
    reading its states. A netc network searches in one loop: the model would compile for no target."""
    path, proc = _import_error(tmp_path, TRIANGLE)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (error,) = [x for x in proc.stderr.splitlines() if ": error: " in x]
    assert error.endswith(": a netc network searches in one loop"), error
    assert "layer `first` (rec): a decoder with `choice` besides `output`" in error, error


@pytest.mark.parametrize(
    "layer, message",
    [
        (
            '{"class": "split_dims", "axis": "T", "dims": (2, -1), "from": "data"}',
            "layer `output` (split_dims): only a static axis (F or a dim tag) split into `dims` is supported",
        ),
        (
            '{"class": "split_dims", "axis": "F", "dims": (3, 3), "from": "data"}',
            "layer `output` (split_dims): dims [3, 3] do not multiply to the axis' 4",
        ),
        (
            '{"class": "merge_dims", "axes": "T", "from": "data"}',
            "layer `output` (merge_dims): axes 'T' (`static`, `except_batch`, `except_time` or a list of all the static "
            "dims of [batch, time, ...] where",
        ),
        (
            '{"class": "pool", "mode": "max", "padding": "same", "pool_size": (2,), "in_spatial_dims": ["F"], "from": "data"}',
            "layer `output` (pool): in_spatial_dims ['F'] (the time dim is supported)",
        ),
        (
            '{"class": "reduce_out", "mode": "max", "num_pieces": 3, "from": "data"}',
            "layer `output` (reduce_out): mode 'max' with num_pieces 3 (max/sum, dividing F, are supported)",
        ),
        (
            '{"class": "softmax_over_spatial", "window_start": 1, "window_size": 2, "from": "data"}',
            "layer `output` (softmax_over_spatial): window_start: a layer (RETURNN takes no number)",
        ),
        (
            '{"class": "pool", "mode": "avg", "padding": "same", "pool_size": (2,), "from": "data"}',
            "layer `output` (pool): only `mode: max`, `padding: same`, one `pool_size` k and strides k over time",
        ),
        (
            '{"class": "decide", "from": "data"}',
            "layer `output` (decide): `decide` of a decoder's labels (a rec layer with `choice`) is supported",
        ),
        (
            '{"class": "generic_attention", "weights": "data", "base": "data", "from": "data"}',
            "layer `output` (generic_attention): `weights` and `base` layers (and no `from`) are supported",
        ),
    ],
)
def test_attention_and_pool_forms_not_supported_are_refused_at_the_layer(tmp_path, layer, message):
    path, proc = _import_error(
        tmp_path,
        f"""
        #!rnn.py
        extern_data = {{"data": {{"dim": 4, "shape": (None, 4)}}}}
        network = {{
            "output": {layer},
        }}
        """,
    )
    _assert_at(proc, path, 4, '"output"', message)


@pytest.mark.parametrize(
    "layer, message",
    [
        (
            '{"class": "conv", "filter_size": (3,), "padding": "same", "strides": 2, "n_out": 4}',
            "padding 'same' with strides > 1 (its windows depend on the batch's longest sequence)",
        ),
        ('{"class": "conv", "filter_size": (3, 3, 3), "padding": "same", "n_out": 4}', "filter_size [3, 3, 3] (one"),
        ('{"class": "conv", "filter_size": (3, 3), "padding": "same", "n_out": 4}', "a 2-D conv of [batch, time, fea"),
        (
            '{"class": "conv", "filter_size": (3, 3), "padding": "causal", "n_out": 4}',
            "padding 'causal' ('same' or 'valid' are supported)",
        ),
        (
            '{"class": "conv", "filter_size": (3, 3), "padding": "same", "dilation_rate": (1, 2), "n_out": 4}',
            "dilation_rate [1, 2] (a 2-D conv: 1 is supported)",
        ),
        ('{"class": "pool", "mode": "max", "padding": "same", "pool_size": (1, 2)}', "of [batch, time, feature, chan"),
        ('{"class": "split_dims", "axis": "F", "dims": (-1, -1)}', "dims [-1, -1]: sizes (positive, one may be -1)"),
        ('{"class": "conv", "filter_size": (3,), "padding": 1, "n_out": 4}', "padding 1 ('same' or 'valid'"),
        ('{"class": "conv", "filter_size": (3,), "padding": "same", "n_out": 6, "groups": 4}', "groups 4 (dividing"),
        (
            '{"class": "batch_norm", "masked_time": True, "update_sample_only_in_training": False,'
            ' "delay_sample_update": True}',
            "update_sample_only_in_training False with delay_sample_update True not supported",
        ),
        (
            '{"class": "batch_norm", "masked_time": False, "param_version": 2, "update_sample_only_in_training": True}',
            "masked_time False not supported (netc's statistics are those of the valid frames)",
        ),
        (
            '{"class": "batch_norm", "masked_time": True, "param_version": 2, "use_sample": 0.5}',
            "use_sample 0.5 not supported",
        ),
        ('{"class": "layer_norm", "epsilon": 1e-5}', "epsilon 1e-05 (netc's `LayerNorm` has RETURNN's 1e-6)"),
        ('{"class": "gating", "activation": "tanh", "n_out": 3}', "n_out/out_dim other than half the input's"),
        ('{"class": "compare", "from": ["data", "data"], "value": 1.0}', "one source with a number `value`, or two"),
        ('{"class": "switch", "condition": "data", "true_from": "data", "false_from": [1]}', "false_from [1] (a"),
        ('{"class": "constant", "value": 1, "dtype": "float64"}', "dtype 'float64' (float32, int32, bool are"),
        (
            '{"class": "length", "add_time_axis": True}',
            "dtype int32 or float32 (and no add_time_axis; sparse of int32)",
        ),
        ('{"class": "cast", "dtype": "float16"}', "dtype 'float16' (float32, int32, bool are supported)"),
        ('{"class": "expand_dims", "axis": "B"}', "axis 'B' (F, T, spatial or a number is supported)"),
        ('{"class": "split", "size_splits": [1, 2]}', "parts [1, 2] do not add up to the feature dim's 4"),
        ('{"class": "reinterpret_data", "set_axes": {"F": 1}}', "set_axes {'F': 1} (with enforce_batch_major, of a ["),
        (
            '{"class": "reinterpret_data", "enforce_batch_major": True, "set_axes": {"T": 2, "F": 1}}',
            "set_axes {'T': 2, 'F': 1} (with enforce_batch_major, of a [B, T, F] value: T 1 and F 2",
        ),
        (
            '{"class": "eval", "eval": "tf.exp(source(0))", "loss": "ce", "target": "classes",'
            ' "loss_opts": {"input_type": "logits"}}',
            "a ce loss on a layer of probabilities with input_type 'logits'",
        ),
        (
            '{"class": "eval", "eval": "tf.exp(source(0))", "loss": "ce", "target": "classes"}',
            "a ce loss on values whose feature dim is not the target's classes",
        ),
        (
            '{"class": "reinterpret_data", "size_base": 3}',
            "size_base: a layer of one time dim, the base of one time dim",
        ),
        ('{"class": "window", "window_size": 3, "stride": 0}', "stride 0 (a positive int)"),
        ('{"class": "window", "window_size": 3, "padding": "valid", "window_left": 1}', "window_left/window_right wi"),
        ('{"class": "window", "window_size": 3, "padding": "causal"}', "padding 'causal' ('same' or 'valid' are supp"),
        ('{"class": "window", "window_size": 3, "window_left": 2, "window_right": 1}', "window_left 2 and window_ri"),
        ('{"class": "window", "window_size": 3, "axis": "F"}', "axis 'F' (the time dim is supported)"),
        ('{"class": "gather_nd", "position": 0}', "position 0 (a layer is supported)"),
        ('{"class": "gather_nd", "position": "data:classes"}', "a position layer of one int per sequence, along"),
        (
            '{"class": "self_attention", "num_heads": 3, "total_key_dim": 4, "n_out": 4}',
            "num_heads dividing total_key_dim and n_out",
        ),
        (
            '{"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4, "key_shift": "data"}',
            "key_shift 'data' (a relative_positional_encoding layer is)",
        ),
        ('{"class": "positional_encoding", "n_out": 5}', "5 channels (an even number, at least 4, is supported)"),
        ('{"class": "transposed_conv", "filter_size": (3, 3), "n_out": 4}', "filter_size [3, 3] (one size: over time)"),
        ('{"class": "transposed_conv", "filter_size": (3,), "padding": "full", "n_out": 4}', "padding 'full' ('same'"),
        ('{"class": "transposed_conv", "filter_size": (3,), "output_padding": 1, "n_out": 4}', "output_padding 1 not"),
        ('{"class": "transposed_conv", "filter_size": (3,), "remove_padding": 1, "n_out": 4}', "remove_padding 1 not"),
        (
            '{"class": "relative_positional_encoding", "n_out": 4}',
            "RETURNN's learned table of clipped relative positions (Shaw et al.) is imported only where a",
        ),
        (
            '{"class": "masked_computation", "mask": "data", "unit": {"class": "copy"}}',
            "mask `data` is not one bool per frame [batch, time]",
        ),
        (
            '{"class": "masked_computation", "mask": "data", "unit": {"class": "linear", "n_out": 3}}',
            "outside a rec unit, a unit other than `copy` of its input (the masked frames as they are) not",
        ),
        (
            '{"class": "masked_computation", "mask": "data", "masked_from": "data", "unit": {"class": "copy"}}',
            "option masked_from outside a rec unit not supported",
        ),
        ('{"class": "unmask", "mask": "data"}', "outside a rec unit not supported (in a rec unit it is)"),
        ('{"class": "gather", "axis": "T", "position": -1}', "position -1 (a position from 0 is supported)"),
        (
            '{"class": "gather", "axis": "T", "position": 0, "clip_to_valid": True}',
            "of labels, or with clip_to_valid, not",
        ),
        ('{"class": "gather", "axis": "F", "position": "data:classes"}', "a position layer of one int per sequence"),
        ('{"class": "linear", "n_out": 4, "reuse_params": "data"}', "reuse_params 'data' (a `linear` layer's name"),
        (
            '{"class": "activation", "activation": "relu", "opts": {"eps": 1.0}}',
            "opts {'eps': 1.0} of activation 'relu'",
        ),
        ('{"class": "activation", "activation": "safe_log", "opts": {"beta": 1}}', "opts {'beta': 1} of safe_log (eps"),
        ('{"class": "subnetwork", "subnetwork": {"a": {"class": "copy"}}}', "a `subnetwork` dict with an `output`"),
        (
            '{"class": "softmax", "loss": "ctc", "target": "classes", "loss_opts": {"ctc_opts": '
            '{"ignore_longer_outputs_than_inputs": True, "ctc_merge_repeated": False}}}',
            "ctc_opts ctc_merge_repeated=False not supported (netc's CTC loss is TF's default)",
        ),
    ],
)
def test_layer_forms_not_supported_are_refused_at_the_layer(tmp_path, layer, message):
    """Each form of the layers `netc import` maps that netc cannot give exactly is a located error."""
    cls = layer.split('"class": "')[1].split('"')[0]
    path, proc = _import_error(
        tmp_path,
        f"""
        #!rnn.py
        extern_data = {{"data": {{"dim": 4, "shape": (None, 4)}}, "classes": {{"dim": 3, "sparse": True}}}}
        network = {{
            "output": {{"class": "copy", "from": "x", "is_output_layer": True}},
            "x": {layer},
        }}
        """,
    )
    _assert_at(proc, path, 5, '"x"', f"layer `x` ({cls}): {message}")


def test_doc_decoder_prev_of_lstm_step_starts_at_its_initial_state(tmp_path):
    """`prev:s` of an LSTM step with an `initial_state` is its `h` state, which starts at the
    initial state's `h` (RETURNN's initial output of the step), not at zeros; no second initial
    statement resets it. (The numbers of this variant match the original's too.)"""
    text = (CONFIGS / "doc_decoder.config").read_text()
    old = '"p": {"class": "softmax", "from": "s",'
    assert old in text
    config = tmp_path / "prev_s.config"
    config.write_text(text.replace(old, '"p": {"class": "softmax", "from": ["s", "prev:s"],'))
    run_netc("import", config, "-o", tmp_path / "m.py", check=True)
    lines = [line.strip() for line in (tmp_path / "m.py").read_text().splitlines()]
    assert [line for line in lines if line.startswith("s = ")] == [
        "s = input_last_h  # initial state",
        "s = tanh(s_c) * sigmoid(s_go)",
    ], lines
    assert "s_prev = s  # the previous step's" in lines and "p_logits = Linear(vocab)(concat(s, s_prev))" in lines


@pytest.mark.parametrize(
    "lstm, layer, at, message",
    [
        ("", '{"class": "get_last_hidden_state", "from": "data", "n_out": 4}', '"x"',
         "layer `x` (get_last_hidden_state): of `data`: only of a `rec` LSTM layer (nativelstm2)"),
        ("", '{"class": "get_last_hidden_state", "from": "lstm", "key": "flat", "n_out": 6}', '"x"',
         "layer `x` (get_last_hidden_state): key 'flat' not supported (`*`, `c`, `h` are)"),
        ("", '{"class": "get_last_hidden_state", "from": "lstm", "n_out": 3}', '"x"',
         "layer `x` (get_last_hidden_state): n_out 3: the state '*' has 6"),
        ("", '{"class": "get_last_hidden_state", "from": ["lstm", "lstm"], "n_out": 12}', '"x"',
         "layer `x` (get_last_hidden_state): of several layers (`combine`) not supported, of one is"),
        (', "direction": -1', '{"class": "get_last_hidden_state", "from": "lstm", "n_out": 6}', '"lstm"',
         "layer `lstm` (rec): get_last_hidden_state of an LSTM of direction -1 is not supported"),
        (', "initial_state": "var"', '{"class": "copy", "from": "lstm"}', '"lstm"',
         "layer `lstm` (rec): initial_state 'var' of an LSTM over a sequence (of one in a rec unit it is supported)"),
        (', "initial_state": "keep_over_epoch"', '{"class": "copy", "from": "lstm"}', '"lstm"',
         "layer `lstm` (rec): initial_state 'keep_over_epoch' of an LSTM over a sequence (the state the previous "
         "batch ended in: netc's models keep no state from one run to the next)"),
        ("", '{"class": "rec", "from": "data", "initial_state": "zeros", "unit": {"output": {"class": "copy", "from": "data:source"}}}',
         '"x"', "layer `x` (rec): initial_state of a rec layer with a subnetwork unit (use `initial_output`)"),
    ],
)  # fmt: skip
def test_last_state_and_initial_state_forms_not_supported_are_refused(tmp_path, lstm, layer, at, message):
    """`get_last_hidden_state` of other layers, keys or LSTMs, and `initial_state` where netc's
    LSTM step in a rec unit does not take it, are located errors at the layer."""
    path, proc = _import_error(
        tmp_path,
        f"""
        #!rnn.py
        extern_data = {{"data": {{"dim": 4, "shape": (None, 4)}}}}
        network = {{
            "output": {{"class": "copy", "from": "x", "is_output_layer": True}},
            "x": {layer},
            "lstm": {{"class": "rec", "unit": "nativelstm2", "n_out": 3{lstm}}},
        }}
        """,
    )
    _assert_at(proc, path, 6 if at == '"lstm"' else 5, at, message)


@pytest.mark.parametrize("version", [0, 12])
def test_defaults_follow_the_configs_behavior_version(tmp_path, version):
    """`conv`'s `with_bias` (True from behavior version 10) and `batch_norm`'s momentum (0.1 from
    12, where its other defaults become netc's) are RETURNN's defaults for the config's version."""
    bn = '{"class": "batch_norm", "masked_time": True, "from": "c"}'
    if version < 12:
        bn = bn.replace("}", ', "update_sample_only_in_training": True, "param_version": 2}')
    path, proc = _import_error(
        tmp_path,
        f"""
        #!rnn.py
        behavior_version = {version}
        extern_data = {{"data": {{"dim": 4, "shape": (None, 4)}}}}
        network = {{
            "c": {{"class": "conv", "filter_size": (3,), "padding": "same", "n_out": 4}},
            "output": {bn},
        }}
        """,
    )
    assert proc.returncode == 0, proc.stderr
    model = (tmp_path / "out.py").read_text()
    no_bias = ", with_bias=False" if version < 10 else ""
    assert f"c = Conv1d(feat, 3{no_bias})(data, axis=time)" in model, model
    assert f"BatchNorm(eps=0.001, momentum={0.1 if version >= 12 else 0.99})(c)" in model, model


@pytest.mark.parametrize(
    "rel, second, line, at, message",
    [
        ('{"fixed": True}', "", 4, '"rel"', "layer `rel` (relative_positional_encoding): option fixed not supported"),
        ('{"query_offset": 1}', "", 4, '"rel"', "(relative_positional_encoding): option query_offset not supported"),
        ('{"clipping": -1}', "", 4, '"rel"', "(relative_positional_encoding): clipping -1 (an int >= 0)"),
        ('{"n_out": 3}', "", 5, '"att"', "layer `att` (self_attention): key_shift 'rel': n_out not the heads' key dim"),
        ("{}", '"att2"', 6, '"att2"', "key_shift 'rel', which another self_attention reads too"),
    ],
)
def test_relative_positions_forms_not_supported_are_refused(tmp_path, rel, second, line, at, message):
    """A `relative_positional_encoding` is imported as the `key_shift` of one `self_attention`:
    its other options, a table of another width, or one read by two attentions are located
    errors at the layer that cannot be given."""
    path, proc = _import_error(
        tmp_path,
        f"""
        #!rnn.py
        extern_data = {{"data": {{"dim": 4, "shape": (None, 4)}}}}
        network = {{
            "rel": {{"class": "relative_positional_encoding", "n_out": 2, **{rel}}},
            "att": {{"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4, "key_shift": "rel"}},
            "att2": {{"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4, "key_shift": "rel"}},
            "output": {{"class": "copy", "from": ["att", {second or '"att"'}]}},
        }}
        """,
    )
    _assert_at(proc, path, line, at, message)


@pytest.mark.parametrize(
    "layer, message",
    [
        (
            '{"class": "masked_computation", "mask": "m", "masked_from": "base:data", "unit": {"class": "copy"}}',
            "(masked_computation): option masked_from not supported",
        ),
        (
            '{"class": "masked_computation", "mask": "data:source", "unit": {"class": "copy"}}',
            "(masked_computation): mask `data:source` is not one bool per",
        ),
        (
            '{"class": "masked_computation", "mask": "m", "unit": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 3}}',
            "(rnn_cell): an `rnn_cell` under masked_computation",
        ),
        (
            '{"class": "unmask", "from": "data:source", "mask": "m"}',
            "(unmask): of a `masked_computation` of the same unit",
        ),
        (
            '{"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4}',
            "(self_attention): in a rec unit RETURNN requires attention_left_only",
        ),
        (
            '{"class": "rec", "unit": "nativelstm2", "n_out": 3, "direction": -1}',
            "(rec): an LSTM step in a rec unit of",
        ),
        (
            '{"class": "window", "from": "data:source", "window_size": 3, "window_right": 0}',
            "(window): in a rec unit (RETURNN's window over the steps so far) not supported",
        ),
        (
            '{"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data:source", "initial_state": "base:data"}',
            "(rec): initial_state 'base:data': the LSTM's state (c, h) takes a dict with the keys `c` and `h`",
        ),
        (
            '{"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data:source", "initial_state": {"c": "r", "h": 0}}',
            "(rec): initial_state 'c': 'r' (zeros or a layer outside the rec unit, `base:x`)",
        ),
        (
            '{"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data:source", "initial_state": ["ones", 0]}',
            "(rec): initial_state 'c': 'ones' (zeros or a layer outside the rec unit, `base:x`)",
        ),
        (
            '{"class": "rec", "unit": "nativelstm2", "n_out": 3, "from": "data:source",'
            ' "initial_state": {"c": "base:data", "h": "zeros"}}',
            "(rec): initial_state 'c': `base:data` is not [batch, 3]",
        ),
        (
            '{"class": "rec", "unit": "NativeLstm", "n_out": 3, "from": "data:source", "initial_state": ["base:x0", 0]}',
            "(rec): initial_state of a `nativelstm` (v1) unit (RETURNN refuses it: use nativelstm2)",
        ),
        (
            '{"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4, "attention_left_only": True,'
            ' "key_shift": "m"}',
            "(self_attention): key_shift in a rec unit not supported",
        ),
    ],
)
def test_unit_layer_forms_not_supported_are_refused_at_the_layer(tmp_path, layer, message):
    """Forms of the layers of rec units (masked computations, LSTM steps, self-attention over the
    steps) that netc cannot give exactly are located errors at the unit's layer."""
    path, proc = _import_error(
        tmp_path,
        f"""
        #!rnn.py
        extern_data = {{"data": {{"dim": 4, "shape": (None, 4)}}}}
        network = {{"output": {{"class": "rec", "from": "data", "unit": {{
            "m": {{"class": "compare", "from": "r", "kind": "greater", "value": 0.0}},
            "x": {layer},
            "output": {{"class": "copy", "from": "x"}},
            "r": {{"class": "reduce", "mode": "max", "axes": "F", "from": "data:source"}},
        }}}}}}
        """,
    )
    _assert_at(proc, path, 5, '"x"', f"layer `output/x` {message}")


def test_same_conv_that_may_read_nonzero_padding_is_warned_about(tmp_path):
    """RETURNN's unmasked 'same' conv reads the frames after a shorter sequence's end, which netc's
    Conv1d never does: a warning (located at the layer, on stderr) and a comment line at the conv
    in the model, for every such conv whose input is not a raw input (padded with zeros); the
    model is still written, with its parameters."""
    path = tmp_path / "convs.config"
    path.write_text(
        textwrap.dedent(
            """
            #!rnn.py
            extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
            network = {
                "raw": {"class": "conv", "from": "data", "filter_size": (3,), "padding": "same", "n_out": 4},
                "proj": {"class": "linear", "from": "raw", "n_out": 4},
                "unmasked": {"class": "conv", "from": "proj", "filter_size": (3,), "padding": "same", "n_out": 4},
                "masked": {"class": "conv", "from": "unmasked", "filter_size": (3,), "padding": "same", "n_out": 4,
                           "use_time_mask": True},
                "pointwise": {"class": "conv", "from": "masked", "filter_size": (1,), "padding": "same", "n_out": 4},
                "output": {"class": "copy", "from": "pointwise"},
            }
            """
        ).lstrip()
    )
    proc = run_netc("import", path.name, "-o", "out.py", "--param-map", "names.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if ": warning: " in line]
    col = path.read_text().splitlines()[5].index('"unmasked"') + 1
    assert len(warnings) == 1, proc.stderr
    assert warnings[0].startswith(f"convs.config:6:{col}: warning: layer `unmasked` (conv): RETURNN's 'same' conv")
    lines = (tmp_path / "out.py").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("unmasked = "))
    assert lines[at - 1].strip().startswith("# warning: layer 'unmasked': RETURNN's 'same' conv without"), lines
    assert sum("# warning:" in line for line in lines) == 1
    params = json.loads((tmp_path / "names.json").read_text())["params"]
    assert params["unmasked/W"]["netc"] == "unmasked/W" and params["raw/W"]["netc"] == "raw/W", params


def test_window_and_2d_conv_that_may_read_nonzero_padding_are_warned_about(tmp_path):
    """RETURNN's `window` reads the frames after a shorter sequence's end where it looks right of a
    frame, as its unmasked 'same' 2-D `conv` and a `transposed_conv` whose filter is longer than
    its stride do: a warning (located at the layer) and a comment
    line at its statement where the input is not a raw input (or what only reshapes one: a
    `split_dims` of it); a window over the past frames only, or over a raw input, gets none."""
    path = tmp_path / "windows.config"
    path.write_text(
        textwrap.dedent(
            """
            #!rnn.py
            extern_data = {"data": {"dim": 4, "shape": (None, 4)}}
            network = {
                "raw": {"class": "window", "from": "data", "window_size": 3},
                "stacked": {"class": "merge_dims", "from": "raw", "axes": "except_time"},
                "proj": {"class": "linear", "from": "stacked", "n_out": 4},
                "centred": {"class": "window", "from": "proj", "window_size": 3},
                "past": {"class": "window", "from": "proj", "window_size": 3, "window_right": 0},
                "centred_stacked": {"class": "merge_dims", "from": "centred", "axes": "except_time"},
                "past_stacked": {"class": "merge_dims", "from": "past", "axes": "except_time"},
                "split_raw": {"class": "split_dims", "from": "data", "axis": "F", "dims": (-1, 1)},
                "cnn_raw": {"class": "conv", "from": "split_raw", "filter_size": (3, 3), "padding": "same",
                            "n_out": 2},
                "split_proj": {"class": "split_dims", "from": "proj", "axis": "F", "dims": (-1, 1)},
                "cnn": {"class": "conv", "from": "split_proj", "filter_size": (3, 3), "padding": "same", "n_out": 2},
                "up": {"class": "transposed_conv", "from": "proj", "filter_size": (3,), "strides": (2,), "n_out": 4,
                       "is_output_layer": True},
                "cnn_raw_merged": {"class": "merge_dims", "from": "cnn_raw", "axes": "static"},
                "cnn_merged": {"class": "merge_dims", "from": "cnn", "axes": "static"},
                "output": {"class": "copy", "from": ["centred_stacked", "past_stacked", "cnn_raw_merged", "cnn_merged"]},
            }
            """
        ).lstrip()
    )
    proc = run_netc("import", path.name, "-o", "out.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if ": warning: " in line]
    col = path.read_text().splitlines()[6].index('"centred"') + 1
    col2 = path.read_text().splitlines()[14].index('"cnn"') + 1
    col3 = path.read_text().splitlines()[15].index('"up"') + 1
    warnings.sort(key=lambda w: int(w.split(":")[1]))  # in the order the layers are met: by line
    assert len(warnings) == 3, proc.stderr
    assert warnings[0].startswith(f"windows.config:7:{col}: warning: layer `centred` (window): RETURNN's window")
    assert warnings[1].startswith(f"windows.config:15:{col2}: warning: layer `cnn` (conv): RETURNN's 'same' conv")
    assert warnings[2].startswith(f"windows.config:16:{col3}: warning: layer `up` (transposed_conv): RETURNN's")
    lines = (tmp_path / "out.py").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("centred = "))
    assert lines[at - 1].strip().startswith("# warning: layer 'centred': RETURNN's window reads"), lines
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("cnn = "))
    assert "netc's Conv2d reads zeros" in lines[at - 1], lines
    assert sum("# warning:" in line for line in lines) == 3
