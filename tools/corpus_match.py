"""The "matched" stage of tools/import_corpus.py: the original config's network built by RETURNN
(TensorFlow, graph mode, training network with dropout off) with random parameters, against the
imported model on netc's RETURNN config and its torch module, the original's parameters carried
by the importer's name map; on one padded batch with unequal lengths (netc verify's lengths,
padding zeros as RETURNN's datasets pad). Outputs on valid frames and losses within `TOLERANCE`
(a loss relative to its size)."""

from __future__ import annotations

import copy
import os

import numpy as np

TOLERANCE = 1e-4


def original_network(path: str, no_exec: bool, network: str = "network"):
    """The config as the importer loaded it (its file checks answered; with `no_exec` the values
    netc evaluated from its syntax), in this process: RETURNN's `Config`, the net dict, and each
    input's `Tensor` kwargs (`same_dim_tags_as` made `dims`)."""
    import json

    from returnn.config import Config, set_global_config

    from netc.importer import _child
    from netc.importer._as_run import AsRun, network_of

    config = Config()
    set_global_config(config)
    if no_exec:
        from netc.importer.noexec import evaluate_config

        data = json.loads(json.dumps(evaluate_config(path, [], network)))
        config.typed_dict.update(_child._rebuild(data))
        net_dict, _ = network_of(config, network)
    else:
        with AsRun(path) as run:
            run.load(config)
            net_dict, _ = network_of(config, network)
    inputs = {key: _child.input_kwargs(key, opts) for key, opts in _child._data_kwargs(config).items()}
    config.typed_dict["extern_data"] = inputs
    return config, net_dict


def as_tf1() -> None:
    """The corpus's configs were written for TensorFlow 1: the top-level names TF 2 keeps only in
    `tf.compat.v1` (`tf.random_uniform`, `tf.to_float`, ...) given back, as on their cluster, so that
    RETURNN builds the original (a SpecAugment function's training branch calls them)."""
    import tensorflow as tf

    for key in dir(tf.compat.v1):
        if not key.startswith("_") and not hasattr(tf, key):
            setattr(tf, key, getattr(tf.compat.v1, key))


def returnn_error(path: str, no_exec: bool) -> str | None:
    """RETURNN (TensorFlow, graph mode) building the original config's network for training, then
    for search (a decoder's scores are built only there): None where both build, else the error's
    first line (the config is not one this RETURNN builds)."""
    import tensorflow as tf
    from returnn.log import log
    from returnn.tf.native_op import OpMaker
    from returnn.tf.network import TFNetwork

    tf.compat.v1.disable_eager_execution()
    as_tf1()
    log.initialize(verbosity=[0])
    OpMaker.with_cuda = False
    for search in (False, True):
        config, net_dict = original_network(path, no_exec)
        try:
            with tf.Graph().as_default():
                train_flag = tf.compat.v1.placeholder(tf.bool, shape=(), name="train_flag")
                net = TFNetwork(config=config, train_flag=train_flag, eval_flag=True, search_flag=search)
                net.construct_from_dict(net_dict)
        except Exception as e:  # noqa: BLE001 - RETURNN's own refusal of the config
            return f"{'search' if search else 'training'}: {_first_line(e)}"
    return None


def _classes(config) -> int | None:
    """The number of classes of the config's default target (`classes`), where it has one."""
    from returnn.tensor import Tensor

    key = config.typed_value("target", "classes")
    opts = config.typed_dict["extern_data"].get(key) if isinstance(key, str) else None
    if not isinstance(opts, dict):
        return None
    sparse = Tensor(key, **opts).sparse_dim
    return sparse.dimension if sparse is not None else None


class OriginalRejected(Exception):
    """The installed RETURNN does not build the original config's network."""


def _first_line(e: BaseException) -> str:
    """An error's first line and where RETURNN (or the config) raised it."""
    import traceback

    last = traceback.extract_tb(e.__traceback__)[-1]
    where = f" ({os.path.basename(last.filename)}:{last.lineno}: {last.line})"
    return f"{type(e).__name__}: {e}".splitlines()[0][:300] + where


def run_original(config, net_dict: dict, batch: dict, seed: int = 3) -> dict:
    """The network in RETURNN on `batch` (extern_data key -> (values, lengths)): the outputs of
    `output` and the output layers, the losses, the parameters (random, also where RETURNN starts
    from a constant)."""
    import tensorflow as tf
    from returnn.log import log
    from returnn.tf.native_op import OpMaker
    from returnn.tf.network import TFNetwork

    tf.compat.v1.disable_eager_execution()
    as_tf1()
    log.initialize(verbosity=[0])
    OpMaker.with_cuda = False
    rng = np.random.default_rng(seed)
    with tf.Graph().as_default() as graph:
        train_flag = tf.compat.v1.placeholder(tf.bool, shape=(), name="train_flag")
        net = TFNetwork(config=config, train_flag=train_flag)
        try:
            net.construct_from_dict(net_dict)
        except Exception as e:  # noqa: BLE001 - RETURNN's own refusal of the config
            raise OriginalRejected(_first_line(e)) from e
        feed = {train_flag: False}
        for key, data in net.extern_data.data.items():
            if key not in batch:
                continue
            x, n = batch[key]
            feed[data.placeholder] = x
            dyn = [i for i, d in enumerate(data.dims) if d.is_dynamic() and not d.is_batch_dim()]
            if dyn:
                feed[data.get_sequence_lengths()] = n
        losses, _, _ = net.get_losses_initialized()
        names = [n for n, layer in net.layers.items() if n == "output" or layer.is_output_layer()]
        fetch = {f"out:{n}": net.get_layer(n).output.copy_as_batch_major().placeholder for n in names}
        for n, loss in losses.items():
            if (v := loss.get_loss_value()) is not None:
                fetch[f"loss:{n}"] = v
        with tf.compat.v1.Session(graph=graph) as session:
            net.initialize_params(session)
            # each read in one run: a run per variable prunes the whole graph each time
            variables = net.get_params_list()
            for v, value in zip(variables, session.run(variables)):
                if value.size > 1 and np.all(value == value.flat[0]):
                    new = (
                        rng.uniform(0.5, 1.5, value.shape)
                        if "variance" in v.name
                        else value + 0.5 * rng.standard_normal(value.shape)
                    )
                    v.load(new.astype(value.dtype), session)
            # the parameters the outputs are computed from (a batch norm with RETURNN's defaults before
            # behavior version 12 moves its statistics outside training too: the run changes them)
            params = {v.name[:-2]: value for v, value in zip(variables, session.run(variables))}
            out = session.run(fetch, feed_dict=feed)
    return {"fetch": out, "params": params}


def pool_factors(g) -> dict[str, int]:
    """Each dim's frames per frame of the last `max_pool` or "same" `Conv2d` with a time stride over
    it (through chains of them; 1 where none subsamples it): RETURNN's windows of both depend on the
    batch's longest length unless every length is a multiple."""
    from netc.ir.walk import ops as _ops

    pools = [(a["axis"], a["size"], a["out_axis"]) for op in _ops(g.body) if op.op == "max_pool" for a in [op.attrs]]
    for op in _ops(g.body):
        a = op.attrs
        if op.op == "conv2d" and a["padding"] == "same" and a["out_axis"] is not None:
            stride = a["stride"] if isinstance(a["stride"], int) else a["stride"][0]
            pools.append((a["axis"], stride, a["out_axis"]))

    def factor(dim: str) -> int:
        return max((size * factor(out) for axis, size, out in pools if axis == dim), default=1)

    return {d.name: factor(d.name) for d in g.dims}


def pooled_lengths(g, lens: dict, rng: np.random.Generator) -> dict:
    """`lens` with each dim that a `max_pool` pools made a multiple of its pools' factor: RETURNN's
    `pool` (no `use_time_mask`) lets the padded frame after a shorter sequence into its last window
    (0 after an LSTM: max(last frame, 0)), a number of the batch that netc's `max_pool` is not
    (docs/import.md, `pool`; the importer warns); a "same" conv with a time stride pads by the
    batch's longest length (the importer warns; a strided `Conv2d` counts as a pool of its stride). On multiples the windows hold a sequence's own
    frames only, and original = imported is a claim about the import. A decoder's target bounded by
    the pooled time is drawn again within the bound the scaled lengths give (else a pooled 1-frame
    encoder would leave it 1 label long)."""
    from netc_runtime.verify import _draw, choice_target_bounds, fitted_inputs, made_lengths, tie_fitted

    factors = pool_factors(g)
    out = {d: np.asarray(n) * factors.get(d, 1) for d, n in lens.items()}
    if all(f == 1 for f in factors.values()):
        return out
    out = tie_fitted(g, out)  # an input over a pooled dim's frames: as long as it, again
    fitted = fitted_inputs(g)
    for d, (frames, scale, offset) in choice_target_bounds(g).items():
        if d in fitted:  # tied above (a frame-level alignment): as long as its frames
            continue
        known = made_lengths(g, {k: list(v) for k, v in out.items() if k != d})
        if frames in known and d in out:
            top = max(int(out[d].max()), min(7, scale * max(known[frames]) + offset))  # as verify's: at most 7
            drawn = _draw(top, len(out[d]), rng)
            out[d] = np.asarray([max(1, min(n, scale * m + offset)) for n, m in zip(drawn, known[frames])])
    return out


def strip_load_on_init(net: dict) -> list[str]:
    """Take `load_on_init` of files not here out of `net` (in rec units and subnetworks too), in
    place: the original's parameters are then its random ones, carried to the imported model as
    every other parameter (the import reads no such file either)."""
    taken = []
    for name, d in net.items():
        if not isinstance(d, dict):
            continue
        path = d.get("load_on_init")
        if isinstance(path, str) and not os.path.exists(path) and not os.path.exists(path + ".index"):
            del d["load_on_init"]
            taken.append(f"`load_on_init` of `{name}` (a file not here)")
        for sub in ("unit", "subnetwork"):
            if isinstance(d.get(sub), dict):
                taken += strip_load_on_init(d[sub])
    return taken


def strip_training_search(net: dict) -> list[str]:
    """Take out of `net`, in place, what the import leaves out for reading a search RETURNN runs in
    training (netc/importer/layers.py): the layers with a loss that read an `extra.search:` layer
    (monitors of a latent alignment's search, an MMI denominator), then the `extra.search:` layers
    nothing left reads. The installed RETURNN may not build such a search (the latent attention
    configs' score function calls an API it no longer has); nothing compared reads it."""
    from netc.importer.losses import reads_search
    from netc.importer.values import sources

    gone = [
        n
        for n, d in net.items()
        if isinstance(d, dict)
        and d.get("loss")
        and n != "output"
        and not d.get("is_output_layer")
        and reads_search(net, n)
    ]
    for n in gone:
        del net[n]
    while True:
        read = {s for d in net.values() if isinstance(d, dict) for s in sources(d) if isinstance(s, str)}
        unread = [n for n, d in net.items() if n.startswith("extra.search:") and isinstance(d, dict) and n not in read]
        if not unread:
            break
        for n in unread:
            del net[n]
        gone += unread
    if not gone:
        return []
    return [f"{', '.join(f'`{n}`' for n in gone)} (they read a search in training, which the import leaves out)"]


def match(path: str, no_exec: bool, model: str, names: dict, seed: int = 0) -> dict:
    """Original = imported on one batch: {"status": "ok" | "differs" | "fail", "cause", "max"}."""
    from netc.compiler import compile_graph
    from netc.importer.checkpoint import model_value
    from netc.importer.legacy import old_evals, strip_old
    from netc_runtime.backends import run_backend
    from netc_runtime.verify import random_inputs, random_lengths

    g = compile_graph(model)
    rng = np.random.default_rng(seed)
    lens = pooled_lengths(g, random_lengths(g, 3, 7, rng), rng)
    inputs = random_inputs(g, lens, rng)
    kinds = {d.name: d.kind for d in g.dims}
    batch, netc_inputs = {}, {}
    by_name = {inp.name: inp for inp in g.inputs}
    config, net_dict = original_network(path, no_exec)
    # the options of an older RETURNN that the import takes as no difference to the forward numbers
    # (netc/importer/legacy.py), taken out: the installed RETURNN rejects them
    taken = strip_old(net_dict, _classes(config))
    absent = strip_load_on_init(net_dict)  # parameters from files not here: the original's random ones
    absent += strip_training_search(net_dict)  # the import leaves them out too
    for key in config.typed_dict["extern_data"]:
        from netc.importer.syntax import identifier

        inp = by_name.get(identifier(key))
        if inp is None:
            continue
        x = inputs[inp.name]
        dyn = [d for d in inp.annotated_dims if kinds.get(d) == "dynamic"]
        n = lens[dyn[0]].astype(np.int32) if dyn else None
        if n is not None:  # padding zeros, as RETURNN's datasets pad
            x = x.copy()
            for i, k in enumerate(n):
                x[i, k:] = 0
        batch[key] = (x, n)
        netc_inputs[inp.name] = x
    pristine = copy.deepcopy(net_dict)
    try:
        orig = run_original(config, net_dict, batch)
    except OriginalRejected as e:
        # an `eval` of one source read as RETURNN before 2019-08 read it, as the import reads it
        # where the installed RETURNN rejects it (netc/importer/legacy.py)
        if not (evals := old_evals(pristine)):
            why = (
                f"the installed RETURNN rejects the original{' (' + ', '.join(taken) + ' taken out)' if taken else ''}"
            )
            return {"status": "unbuildable", "cause": f"{why}: {e}"}
        taken.append(f"`source(i)` of {', '.join(f'`{x}`' for x in evals)} read as it is (as RETURNN before 2019-08)")
        try:
            orig = run_original(config, pristine, batch)
        except OriginalRejected as e2:
            why = f"the installed RETURNN rejects the original (with {', '.join(taken)})"
            return {"status": "unbuildable", "cause": f"{why}: {e2}"}
    params = {}
    for tf_name, value in orig["params"].items():
        if tf_name not in names["params"]:
            return {"status": "fail", "cause": "a parameter of the original that the name map lacks"}
        params[names["params"][tf_name]["returnn"]] = model_value(value, names["params"][tf_name])
    diffs = {}
    for backend in ("returnn", "torch"):
        res = run_backend(backend, model, netc_inputs, lens, params, g)
        for layer, out in names["outputs"].items():
            ours, theirs = res.outputs[out], orig["fetch"].get(f"out:{layer}")
            if theirs is None:
                continue
            dyn = [d for d in res.dims[out] if d in res.lens.get(out, {})]
            if ours.shape[0] != theirs.shape[0] or ours.shape[2:] != theirs.shape[2:]:
                return {
                    "status": "differs",
                    "cause": f"{backend}: output {layer}: shape {ours.shape} vs {theirs.shape}",
                }
            if dyn:
                n = res.lens[out][dyn[0]]
                d = max(
                    float(np.abs(ours[i, :k].astype(np.float64) - theirs[i, :k]).max(initial=0))
                    for i, k in enumerate(n)
                )
            else:
                d = float(np.abs(ours - theirs).max(initial=0))
            diffs[f"{backend} {layer}"] = d
        for layer, loss in names["losses"].items():
            theirs = orig["fetch"].get(f"loss:{layer}")
            if theirs is not None:
                diffs[f"{backend} loss {layer}"] = abs(float(res.outputs[loss]) - float(theirs)) / max(
                    1.0, abs(float(theirs))
                )
    if not diffs:
        return {"status": "fail", "cause": "nothing to compare"}
    worst = max(diffs, key=diffs.get)
    status = "ok" if diffs[worst] <= TOLERANCE else "differs"
    out = {"status": status, "max": diffs[worst], "cause": f"{worst}: {diffs[worst]:.2e}"}
    notes = [f"{', '.join(taken)} taken out of the original (the installed RETURNN rejects it)"] if taken else []
    notes += [f"{', '.join(absent)} taken out of the original"] if absent else []
    if notes:
        out["note"] = "matched with " + "; with ".join(notes)
    return out
