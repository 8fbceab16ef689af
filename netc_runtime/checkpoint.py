"""Checkpoints of one model on RETURNN's two engines, by parameter name.

- TensorFlow (RETURNN's TF engine, `--target returnn`): a checkpoint prefix (`net-model/network.005`
  with `.index`, `.data-*`, `.meta`), variables by RETURNN name (`logits/rec/query/W`) plus
  RETURNN's `global_step`.
- PyTorch (RETURNN's PyTorch backend, `--target returnn-torch`, or the plain module): a `.pt` file,
  RETURNN's `{"model": state_dict, "epoch": ..., "step": ...}` or a bare `state_dict()`, by the
  module's parameter names (`query.W`).

Both hold the same arrays in the same layout; only the names differ (the emitted module's
`returnn_param_names`), so converting is renaming, checked against the model's parameters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from netc.emit_torch.emitter import param_attrs
from netc.ir.model import Graph
from netc.outputs import prepare

GLOBAL_STEP = "global_step"  # RETURNN's step counter in a TF checkpoint


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model, or is none: a user mistake (`error: ...`)."""


def read_tf_checkpoint(prefix: str) -> dict[str, np.ndarray]:
    """Every model variable of a TF checkpoint (RETURNN's bookkeeping such as global_step left out)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map() if name != GLOBAL_STEP}


def assign_in_pieces(session, values: list, piece_bytes: int = 1 << 28) -> None:
    """Each variable's value fed to its initializer, a run per piece of about `piece_bytes`: a run
    per variable (RETURNN's `VariableAssigner`) prunes the whole graph each time (minutes for a
    12-layer Transformer); one run for all holds a copy of every value at once (gigabytes)."""
    piece: list = []  # (initializer, value)
    size = 0
    for k, (var, value) in enumerate(values):
        piece.append((var.initializer, np.asarray(value, dtype=np.float32)))
        size += piece[-1][1].nbytes
        if size >= piece_bytes or k == len(values) - 1:
            session.run([init for init, _ in piece], {init.inputs[1]: v for init, v in piece})
            piece, size = [], 0


def write_tf_checkpoint(params: Mapping[str, np.ndarray], prefix: str, global_step: int = 0) -> None:
    """A TF checkpoint at `prefix` that RETURNN's TF engine loads (`load`, `load_epoch`, `preload_from_files`):
    the variables by RETURNN name as float32, `global_step`, and the `.meta` file RETURNN looks for."""
    import tensorflow as tf

    prepare(prefix)
    with tf.Graph().as_default() as graph:  # graph mode whatever mode the process is in
        # zeros, then the values fed: as constants the graph would hold a copy of every value, and
        # TF refuses a graph over 2 GB (one 200k-word softmax of 4096 units is 3.3 GB)
        variables = {name: tf.compat.v1.Variable(tf.zeros(np.shape(v), tf.float32)) for name, v in params.items()}
        step = tf.compat.v1.Variable(np.int64(global_step))
        saver = tf.compat.v1.train.Saver({**variables, GLOBAL_STEP: step})  # saved under these keys
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(step.initializer)
            assign_in_pieces(session, [(variables[name], v) for name, v in params.items()])
            saver.save(session, prefix, write_state=False)


@dataclass(frozen=True)
class TorchCheckpoint:
    state: dict[str, np.ndarray]  # by the module's parameter name
    epoch: int | None = None  # RETURNN's, when it wrote the file
    step: int | None = None


def read_torch_checkpoint(path: str) -> TorchCheckpoint:
    """RETURNN's PyTorch checkpoint (`{"model": state_dict, "epoch", "step", ...}`) or a bare `state_dict()`."""
    import torch

    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # not a torch file, or one that pickles more than tensors and numbers
        raise CheckpointError(
            f"{path}: not a PyTorch checkpoint (torch.load with weights_only=True: {type(e).__name__})"
        ) from None
    meta = raw if isinstance(raw, dict) and isinstance(raw.get("model"), dict) else {}
    state = meta.get("model", raw)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path}: neither a state_dict nor RETURNN's {{'model': state_dict, ...}}")
    return TorchCheckpoint(
        {k: v.detach().float().numpy() for k, v in state.items()}, meta.get("epoch"), meta.get("step")
    )


def write_torch_checkpoint(state: Mapping[str, np.ndarray], path: str, epoch: int | None, step: int | None) -> None:
    """RETURNN's PyTorch checkpoint format: RETURNN loads it (`load`, `preload_from_files`), and
    `torch.load(path)["model"]` is the module's `state_dict`."""
    import torch

    prepare(path)
    out: dict = {"model": {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in state.items()}}
    if epoch is not None:
        out["epoch"] = epoch
    if step is not None:
        out["step"] = step
    torch.save(out, path)


def torch_param_names(g: Graph) -> dict[str, str]:
    """RETURNN variable name -> the torch module's parameter name (its `returnn_param_names`)."""
    attrs = param_attrs(g.params)
    return {p.name: attrs[(p.path, p.role)] for p in g.params}


def _check(found: Mapping[str, np.ndarray], expected: Mapping[str, tuple[int, ...]], where: str) -> None:
    missing = sorted(set(expected) - set(found))
    unknown = sorted(set(found) - set(expected))
    if missing or unknown:
        parts = [f"missing {', '.join(missing)}"] if missing else []
        parts += [f"not parameters of the model: {', '.join(unknown)}"] if unknown else []
        raise CheckpointError(f"{where} does not fit the model: {'; '.join(parts)}")
    for name, shape in expected.items():
        if tuple(found[name].shape) != shape:
            raise CheckpointError(f"{where}: {name} has shape {tuple(found[name].shape)}, the model's is {shape}")


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def is_tf_checkpoint(path: str) -> bool:
    return os.path.isfile(path + ".index")


def convert_checkpoint(g: Graph, src: str, dst: str) -> str:
    """A checkpoint of the model `g` from one engine's format to the other's: `src` a `.pt` file →
    a TF checkpoint at prefix `dst`; `src` a TF checkpoint prefix → RETURNN's `.pt` file `dst`.
    Returns what was written (one line); raises CheckpointError on a mistake."""
    names = torch_param_names(g)
    shapes = {p.name: tuple(g.dim(d).size for d in p.dims) for p in g.params}
    if is_tf_checkpoint(src):
        try:
            params = read_tf_checkpoint(src)
            step = _tf_global_step(src)
        except Exception as e:  # TensorFlow's errors on a damaged checkpoint
            raise CheckpointError(f"{src}: cannot read the TF checkpoint ({_first_line(e)})") from None
        _check(params, shapes, src)
        epoch = re.search(r"\.(\d+)$", src)  # RETURNN names checkpoints <model>.<epoch>
        write_torch_checkpoint(
            {names[k]: v for k, v in params.items()}, dst, int(epoch.group(1)) if epoch else None, step
        )
        return f"wrote {dst}: PyTorch checkpoint, {len(params)} parameters" + (f", step {step}" if step else "")
    if not os.path.isfile(src):
        raise CheckpointError(f"{src}: no such file, nor a TF checkpoint ({src}.index)")
    ckpt = read_torch_checkpoint(src)
    by_attr = {attr: name for name, attr in names.items()}
    _check(ckpt.state, {names[k]: s for k, s in shapes.items()}, src)
    write_tf_checkpoint({by_attr[k]: v for k, v in ckpt.state.items()}, dst, ckpt.step or 0)
    return f"wrote {dst}: TF checkpoint, {len(ckpt.state)} parameters, global step {ckpt.step or 0}"


def _tf_global_step(prefix: str) -> int | None:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return int(reader.get_tensor(GLOBAL_STEP)) if reader.has_tensor(GLOBAL_STEP) else None


def module_param_mapping(to: Graph, path: str, source: Graph, source_path: str | None = None) -> dict[str, str]:
    """RETURNN variable names of the module at `path` (its torch name: `lm`, `lm.rec`) in `to` ->
    the same parameters' names in `source`, where the module is at `source_path` (default
    `path`): RETURNN's `preload_from_files` `var_name_mapping` for loading a module trained in
    another network (whose rec layer, and so the names' prefix, differ)."""
    src = source_path or path
    by_torch = {t: r for r, t in torch_param_names(source).items()}
    out: dict[str, str] = {}
    for name, attr in torch_param_names(to).items():
        if attr.startswith(path + "."):
            found = by_torch.get(src + attr[len(path) :])
            if found is None:
                raise CheckpointError(
                    f"{src + attr[len(path) :]} (for {name}) is not a parameter of the source network"
                )
            out[name] = found
    if not out:
        raise CheckpointError(f"no parameters under module path {path!r}")
    return out
