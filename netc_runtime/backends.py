"""The three ways to run a model on one padded batch: eager, emitted torch, emitted RETURNN config.

All take and give numpy arrays: inputs by input name (batch-major, annotation order),
lengths by dynamic dim name, parameters by RETURNN variable name; outputs by name in the
compiler's dim order, plus each output's dynamic-dim lengths.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
import warnings
from dataclasses import dataclass, field

import numpy as np

from netc.compiler import compile_graph
from netc.emit_tf.emitter import dim_vars, emit_returnn
from netc.emit_torch.module import emit_torch
from netc.ir.interface import interface
from netc.ir.model import Graph
from netc.ir.search import SCORES, network_params, search_dims, search_plan
from netc.ir.uses import values_by_id
from netc.naming import lens_name
from netc_runtime.checkpoint import assign_in_pieces
from netc_runtime.scratch import CurrentStdout, prepare_returnn, scratch_file


@dataclass
class Result:
    outputs: dict[str, np.ndarray]
    dims: dict[str, list[str]]
    lens: dict[str, dict[str, np.ndarray]]  # output -> dynamic dim -> lengths
    grads: dict[str, np.ndarray] = field(default_factory=dict)  # RETURNN variable -> d(sum of losses)


def _import_file(path: str, prefix: str):
    name = f"{prefix}_{abs(hash(os.path.abspath(path)))}_{len(sys.modules)}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def _imported(path: str, prefix: str):
    """`path` imported for one run, and out of `sys.modules` after it: an eager model file's
    network holds its parameters (gigabytes for a large model)."""
    mod = _import_file(path, prefix)
    try:
        yield mod
    finally:
        sys.modules.pop(mod.__name__, None)


def output_dims(g: Graph) -> dict[str, list[str]]:
    values = values_by_id(g)
    dims = {o.name: list(values[o.value].dims) for o in g.outputs}
    dims.update({loss.name: [] for loss in g.losses})  # losses are scalars
    return dims


def _input_lens(g: Graph, lens: dict[str, np.ndarray], dims: dict[str, list[str]]) -> dict[str, dict[str, np.ndarray]]:
    kinds = {d.name: d.kind for d in g.dims}
    return {o: {d: np.asarray(lens[d]) for d in ds if kinds[d] == "dynamic"} for o, ds in dims.items()}


def valid_mask(dims: list[str], lens: dict[str, np.ndarray], g: Graph, shape) -> np.ndarray:
    kinds = {d.name: d.kind for d in g.dims}
    mask = np.ones(shape, dtype=bool)
    if "batch" not in dims:  # a scalar (a loss): nothing to mask
        return mask
    b_ax = dims.index("batch")
    for ax, d in enumerate(dims):
        if kinds[d] == "dynamic":
            idx = np.arange(shape[ax])
            m = idx[None, :] < np.asarray(lens[d])[:, None]  # [batch, size]
            view = [1] * len(shape)
            view[b_ax], view[ax] = shape[b_ax], shape[ax]
            order = sorted([(b_ax, 0), (ax, 1)])
            m = m if order[0][1] == 0 else m.T
            mask = mask & m.reshape(view)
    return mask


def run_eager(model_path: str, g: Graph, inputs, lens, params, search: bool = False, train: bool = False) -> Result:
    """Eager mode; `train=True` runs it in training mode (dropout, `training()`)."""
    import torch

    with _imported(model_path, "netc_model") as mod:
        net = getattr(mod, g.network).train(train)
        net.load_returnn_params(params)
        args = {k: torch.as_tensor(v) for k, v in inputs.items()}
        args.update({lens_name(d): torch.as_tensor(v) for d, v in lens.items()})
        outs, out_lens = net.run(**args, search=search)
    return Result(
        {k: v.numpy() for k, v in outs.items()},
        search_dims(g) if search else output_dims(g),
        {o: {d: np.asarray(v) for d, v in ls.items()} for o, ls in out_lens.items()},
    )


def load_torch_module(g: Graph, directory: str | None = None, text: str | None = None):
    """Write the emitted module (or `text`) to a file and import it (so tracebacks show real lines)."""
    text = text or emit_torch(g)
    if directory is None:
        path = scratch_file(f"{g.network}_torch.py", text)
    else:
        path = os.path.join(directory, f"{g.network}_torch.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return _import_file(path, "netc_torch")


def run_torch(
    g: Graph,
    inputs,
    lens,
    params,
    module_text: str | None = None,
    search: bool = False,
    train: bool = False,
    device: str = "cpu",
) -> Result:
    """The emitted torch module; `train=True` runs it in training mode (dropout, `training()`);
    `device`: where the module and the batch are put (the module follows its inputs)."""
    import torch

    mod = load_torch_module(g, text=module_text)
    model = mod.Model()
    model.load_returnn_params(params)
    model.train(train)
    model.to(device)
    args = {k: torch.as_tensor(v, device=device) for k, v in inputs.items()}
    args.update({lens_name(d): torch.as_tensor(v, dtype=torch.int64, device=device) for d, v in lens.items()})
    with torch.no_grad():
        outs = model(**args, **({"search": True} if search else {}))
    outs = {k: v.cpu().numpy() for k, v in outs.items()}
    if search:
        plan = search_plan(g)
        dims, made = search_dims(g), {d: outs[key] for d, key in plan.made_lens.items()}
    else:
        dims = dict(model.output_dims)
        dims.update({name: [] for name in model.losses})
        made = {d: outs[key] for d, key in interface(g).made_lens.items()}  # dims made by loops
    outputs = {k: v for k, v in outs.items() if k in dims}
    return Result(outputs, dims, _input_lens(g, {**lens, **made}, dims))


@contextlib.contextmanager
def _stdout_kept_for_errors():
    """RETURNN prints its TF thread set-up, and on a failure its template networks, to stdout,
    and TensorFlow warns of deprecated Keras classes RETURNN builds on: stdout and stderr stay
    the caller's, and what RETURNN printed or warned goes with an exception (a note)."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            yield
    except Exception as e:
        said = printed.getvalue().strip() + "".join(f"\n{w.category.__name__}: {w.message}" for w in warned)
        if said.strip():
            e.add_note(f"RETURNN printed:\n{said.strip()}")
        raise


@dataclass
class ReturnnSession:
    """A RETURNN network built for one batch: `session.run(fetch, feed_dict=feed)` computes it
    (as often as wanted: the benchmarks time it); `dims` and `lens` describe the outputs."""

    session: object  # tf.compat.v1.Session
    net: object  # returnn.tf.network.TFNetwork
    fetch: dict
    feed: dict
    dims: dict[str, list[str]]
    lens: dict[str, np.ndarray]


@contextlib.contextmanager
def returnn_session(
    g: Graph,
    inputs,
    lens,
    params,
    config_text: str | None = None,
    train_flag: bool = False,
    search: bool = False,
    load_checkpoint: str | None = None,
    grads: bool = False,
    session_config=None,
):
    """Real RETURNN on TensorFlow (graph mode): load the config with RETURNN's own loader,
    build the `TFNetwork`, load parameters by variable name (and first, with `load_checkpoint`,
    a TF checkpoint with RETURNN's own loader), and yield what feeds the padded batch and fetches
    the outputs (`ReturnnSession`). `train_flag=True` builds the network as for training (dropout
    active); `search=True` decodes with the beam (RETURNN's search mode) and fetches what
    `search_dims` lists. `grads=True` also fetches the gradient of the sum of the losses (RETURNN's
    own) with respect to every parameter, as training would apply it (built for training:
    RETURNN's loops only back-propagate then). `session_config`: TF's `ConfigProto`."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.log import log
    from returnn.tensor import batch_dim
    from returnn.tf.native_op import OpMaker
    from returnn.tf.network import TFNetwork

    prepare_returnn()
    tf.compat.v1.disable_eager_execution()
    log.initialize(verbosity=[0])  # RETURNN prints every layer template otherwise
    tf.get_logger().setLevel("CRITICAL")  # RETURNN raises real errors; TF logs unused-object noise as ERROR
    path = scratch_file("netc.config.py", config_text or emit_returnn(g))
    cfg = Config()
    cfg.load_file(path)
    plan = search_plan(g) if search else None
    dims = search_dims(g) if search else output_dims(g)
    fed = lens  # a search that takes no input is fed its target: the batch size (see below)
    if plan:  # a search makes the lengths of its loop's axis; the targets' are not given
        lens = {d: v for d, v in lens.items() if d in plan.input_dims}
        fed = fed if not plan.inputs else lens
    OpMaker.with_cuda = False  # CPU only: native ops (`nativelstm2`) must compile without CUDA
    OpMaker.log_stream = CurrentStdout()  # its compiler lines go where stdout is redirected
    with tf.Graph().as_default() as graph, _stdout_kept_for_errors():
        # eval: losses are built (and what needs a `choice` target); search: the beam decodes
        net = TFNetwork(
            config=cfg, train_flag=train_flag or grads, eval_flag=bool(g.losses) and not search, search_flag=search
        )
        layers = cfg.typed_value("network")
        if search:  # as the config's get_network() does for RETURNN's search task
            layers = cfg.typed_value("search_network")
        net.construct_from_dict(layers)

        config_dims = dim_vars(g)

        def dim_obj(name: str):
            return batch_dim if name == "batch" else cfg.typed_value(config_dims[name])

        def tags(name: str, data) -> list:  # searching, the loop's axis is a dim RETURNN made
            searched = [t for t in data.dim_tags if t.dyn_size_ext is not None and not t.is_batch_dim()]
            return [searched[0] if plan and d == plan.loop.axis else dim_obj(d) for d in dims[name]]

        fetch = {}
        # outputs that are a loss's layer in training's network (the search network has no loss)
        folded = {} if plan else cfg.typed_value("netc_output_layers") or {}
        for name in plan.outputs if plan else [o.name for o in g.outputs]:
            data = net.get_layer(folded.get(name, name)).output
            out = data.copy_transpose(tags(name, data))
            fetch[name] = out.placeholder
            for d, tag in zip(dims[name], out.dim_tags):
                if d not in lens and tag.dyn_size_ext is not None:  # a dim made by a loop (`end`, search)
                    fetch[f"len:{d}"] = tag.dyn_size_ext.placeholder
        if plan:  # `decide` takes the best hypothesis: the highest beam score
            beam_scores = net.get_layer(plan.loop.name).get_search_choices().beam_scores
            fetch[SCORES] = tf.reduce_max(beam_scores, axis=1)
        feed = {}
        for inp in g.inputs:
            # a search that takes no input has the batch size of its target (its labels unread),
            # as RETURNN's search task reads the target from the data for it
            if plan is None or inp.name not in plan.targets or not plan.inputs:
                feed[net.extern_data.data[inp.name].placeholder] = inputs[inp.name]
        for d, v in fed.items():
            feed[dim_obj(d).dyn_size_ext.placeholder] = np.asarray(v, dtype=np.int32)
        with tf.compat.v1.Session(graph=graph, config=session_config) as session:
            net.initialize_params(session)
            if load_checkpoint:
                net.load_params_from_file(load_checkpoint, session=session)
            variables = {v.name[:-2]: v for v in net.get_params_list()}
            # RETURNN builds only the parameters its network computes with (a search has no
            # auxiliary loss, training's `choice` is the target): the model's others are not assigned
            unused = {p.name for p in g.params} - network_params(g, search)
            params = {name: value for name, value in params.items() if name not in unused}
            missing = [name for name in params if name not in variables]
            if missing:
                raise KeyError(f"RETURNN has no variable {missing[0]!r}; it has {sorted(variables)}")
            assign_in_pieces(session, [(variables[name], value) for name, value in params.items()])
            if g.losses and not search:
                holders, _, _ = net.get_losses_initialized()
                for loss in g.losses:
                    fetch[loss.name] = holders[loss.name].get_loss_value()
            if grads:
                total = tf.add_n([fetch[loss.name] for loss in g.losses])
                for name, d in zip(variables, tf.gradients(total, list(variables.values()))):
                    if d is not None:  # None: no loss reads the variable
                        fetch[f"grad:{name}"] = tf.convert_to_tensor(d)  # a sparse gather's is IndexedSlices
            yield ReturnnSession(session, net, fetch, feed, dims, lens)


def run_returnn(
    g: Graph,
    inputs,
    lens,
    params,
    config_text: str | None = None,
    save_checkpoint: str | None = None,
    train_flag: bool = False,
    search: bool = False,
    load_checkpoint: str | None = None,
    grads: bool = False,
) -> Result:
    """The outputs (and with `grads`, gradients) of RETURNN's network for one batch
    (`returnn_session`, run once); `save_checkpoint` then saves its parameters there."""
    with returnn_session(g, inputs, lens, params, config_text, train_flag, search, load_checkpoint, grads) as built:
        outs = built.session.run(built.fetch, feed_dict=built.feed)
        if save_checkpoint:
            built.net.save_params_to_file(save_checkpoint, session=built.session)
    grad_values = {k[len("grad:") :]: outs.pop(k) for k in list(outs) if k.startswith("grad:")}
    return returnn_result(g, outs, built.dims, built.lens, grad_values)


def returnn_result(g: Graph, outs: dict, dims: dict, lens: dict, grads: dict | None = None) -> Result:
    """What a `ReturnnSession`'s run fetched, as a `Result`: padded frames zeroed."""
    made = {k[len("len:") :]: v for k, v in outs.items() if k.startswith("len:")}
    out_lens = _input_lens(g, {**lens, **made}, dims)
    outputs = {}
    for k, v in outs.items():  # RETURNN leaves whatever it computed in padded frames: zeros, as elsewhere
        if not k.startswith("len:"):
            outputs[k] = np.where(valid_mask(dims[k], out_lens[k], g, v.shape), v, np.zeros((), v.dtype))
    return Result(outputs, dims, out_lens, grads or {})


BACKENDS = ("eager", "torch", "returnn")
BACKEND_NAMES = {"eager": "eager", "torch": "the torch module", "returnn": "RETURNN (TensorFlow)"}


def run_backend(
    backend: str, model_path: str, inputs, lens, params, g: Graph | None = None, search: bool = False
) -> Result:
    """One backend on one batch; `search=True` decodes with the beam (a model with `choice`)."""
    g = g or compile_graph(model_path)
    if backend == "eager":
        return run_eager(model_path, g, inputs, lens, params, search=search)
    if backend == "torch":
        return run_torch(g, inputs, lens, params, search=search)
    if backend == "returnn":
        return run_returnn(g, inputs, lens, params, search=search)
    raise ValueError(f"unknown backend {backend!r}")
