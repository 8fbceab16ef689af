"""A `returnn-torch` config's own entry points on one padded batch, in RETURNN's PyTorch backend.

RETURNN loads the config, `get_model` makes the module, the batch becomes `extern_data` through
RETURNN's `raw_dict_to_extern_data` (as its data loader's batches do), `train_step` marks the
losses and `forward_step` the outputs (a beam search for a model with `choice`). It runs in a
process of its own: selecting RETURNN's PyTorch backend changes process-wide state (the frontend
backend, the minimum behavior version) that RETURNN's TensorFlow engine must not see.

    python -m netc_runtime.returnn_torch CONFIG BATCH_NPZ OUT_NPZ

BATCH_NPZ holds the batch as RETURNN's data loader gives it (`data:<key>`, `data:<key>:seq_len`)
and parameters (`param:<RETURNN name>`); OUT_NPZ holds what `EntryPoints` reads back (names in
JSON, as npz keys cannot hold every string).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from netc import tf_quiet
from netc.emit_returnn_torch.emitter import emit_returnn_torch
from netc.ir.interface import input_dyn_dims
from netc.ir.model import Graph
from netc.ir.search import search_dims, search_plan
from netc_runtime.backends import Result, output_dims
from netc_runtime.failures import ForeignError, error_line
from netc_runtime.scratch import prepare_returnn, scratch_dir


@dataclass
class EntryPoints:
    """What the config's steps marked."""

    outputs: dict[str, np.ndarray]  # forward_step's, by name
    dims: dict[str, list[str]]  # each output's dim names (`batch` for the batch dim)
    lens: dict[str, dict[int, np.ndarray]]  # output -> axis -> lengths, for each dynamic dim
    losses: dict[str, np.ndarray]  # train_step's, as marked (summed over frames)
    norms: dict[str, float]  # the frames RETURNN divides each loss by for its scores


def run_returnn_torch(
    g: Graph, inputs, lens, params, config_text: str | None = None, workdir: str | None = None
) -> Result:
    """Outputs of `forward_step` (the search's for a model with `choice`) and the losses of
    `train_step`; raises ForeignError with RETURNN's exception when the config fails."""
    plan = search_plan(g)
    found = run_entry_points(config_text or emit_returnn_torch(g), returnn_batch(g, inputs, lens), params, workdir)
    dims = {**output_dims(g), **(search_dims(g) if plan else {})}  # losses are scalars
    out_lens: dict[str, dict[str, np.ndarray]] = {name: {} for name in [*found.outputs, *found.losses]}
    for name, marked in found.dims.items():
        if marked != dims[name]:
            raise RuntimeError(f"forward_step marked {name!r} with dims {marked}, the model's are {dims[name]}")
        out_lens[name] = {dims[name][axis]: v for axis, v in found.lens[name].items()}
    return Result({**found.outputs, **found.losses}, dims, out_lens)


def returnn_batch(g: Graph, inputs, lens) -> dict[str, np.ndarray]:
    """netc's batch (inputs in annotation order, lengths by dim) as RETURNN's data loader gives it
    to the config: batch-major, with `<key>:seq_len`."""
    batch = {}
    dynamic = set(input_dyn_dims(g))
    for inp in g.inputs:
        batch[inp.name] = np.transpose(inputs[inp.name], [inp.annotated_dims.index(d) for d in inp.value.dims])
        dyn = [d for d in inp.value.dims if d in dynamic]
        if dyn:
            batch[f"{inp.name}:seq_len"] = np.asarray(lens[dyn[0]], dtype=np.int32)
    return batch


def run_entry_points(config_text: str, batch: dict[str, np.ndarray], params, workdir: str | None = None) -> EntryPoints:
    """The config's train_step and forward_step on `batch` with `params` (by RETURNN name), in a
    RETURNN process of its own running in `workdir` (default: a temporary directory)."""
    prepare_returnn()  # the process started below inherits RETURNN's cache dir
    with tempfile.TemporaryDirectory(prefix="netc_returnn_torch_", dir=scratch_dir()) as tmp:
        work = workdir or tmp
        config, batch_file, out_file = (os.path.join(work, f) for f in ("model.config", "batch.npz", "out.npz"))
        with open(config, "w", encoding="utf-8") as f:
            f.write(config_text)
        np.savez(  # prefixed keys: no data key can be savez's own `file` argument
            batch_file,
            **{f"data:{k}": v for k, v in batch.items()},
            **{f"param:{k}": np.asarray(v, dtype=np.float32) for k, v in params.items()},
        )
        cmd = [sys.executable, "-m", "netc_runtime.returnn_torch", config, batch_file, out_file]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=600, env=tf_quiet.env())
        if proc.returncode != 0:
            line = Path(out_file + ".error").read_text("utf-8") if os.path.exists(out_file + ".error") else ""
            raise ForeignError(
                "RETURNN (PyTorch) failed on the config", line, tf_quiet.strip_notices(proc.stderr)[-20000:]
            )
        found = np.load(out_file)
        names = json.loads(found["names"].tobytes().decode("utf-8"))
    outs, losses = names["outputs"], names["losses"]
    return EntryPoints(
        outputs={o["name"]: found[f"out:{i}"] for i, o in enumerate(outs)},
        dims={o["name"]: o["dims"] for o in outs},
        lens={o["name"]: {a: found[f"len:{i}:{a}"] for a in o["dynamic"]} for i, o in enumerate(outs)},
        losses={name: found[f"loss:{i}"] for i, name in enumerate(losses)},
        norms={name: float(found[f"norm:{i}"]) for i, name in enumerate(losses)},
    )


def _run(config_path: str, batch_path: str, out_path: str) -> None:
    import returnn.frontend as rf
    import torch
    from returnn.config import Config, set_global_config
    from returnn.torch.data.extern_data import extern_data_template_from_config_opts, raw_dict_to_extern_data
    from returnn.util.basic import BackendEngine

    cfg = Config()
    cfg.load_file(config_path)
    set_global_config(cfg)
    BackendEngine.select_engine(config=cfg)
    batch = np.load(batch_path)
    params = {k[len("param:") :]: batch[k] for k in batch.files if k.startswith("param:")}
    raw = {k[len("data:") :]: torch.from_numpy(batch[k]) for k in batch.files if k.startswith("data:")}
    raw["seq_tag"] = np.array([f"seq-{i}" for i in range(len(next(iter(raw.values()))))])
    template = extern_data_template_from_config_opts(cfg.typed_value("extern_data"))
    model = cfg.typed_value("get_model")(epoch=1, step=0)
    model.load_returnn_params(params)
    model.eval()
    out: dict[str, np.ndarray] = {}
    names: dict[str, list] = {"outputs": [], "losses": []}
    with torch.no_grad():
        extern_data = raw_dict_to_extern_data(raw, extern_data_template=template, device="cpu", with_eval_targets=True)
        rf.init_train_step_run_ctx(train_flag=False, step=0, epoch=1)
        try:
            cfg.typed_value("train_step")(model=model, extern_data=extern_data)
        except ValueError as e:  # a model without loss: its forward_step still runs
            if "there is nothing to train" not in str(e):
                raise
        for i, (name, loss) in enumerate(rf.get_run_ctx().losses.items()):
            names["losses"].append(name)
            out[f"loss:{i}"] = loss.get_summed_loss().raw_tensor.numpy()
            norm = loss.get_inv_norm_factor()
            out[f"norm:{i}"] = np.asarray(norm if isinstance(norm, int) else norm.raw_tensor)
        # the forward task's extern_data: without what a search does without (the targets)
        extern_data = raw_dict_to_extern_data(raw, extern_data_template=template, device="cpu")
        rf.init_forward_step_run_ctx(step=0, epoch=1)
        cfg.typed_value("forward_step")(model=model, extern_data=extern_data)
        for i, (name, tensor) in enumerate(rf.get_run_ctx().outputs.data.items()):
            dynamic = [a for a, d in enumerate(tensor.dims) if d.dyn_size_ext is not None and not d.is_batch_dim()]
            dims = ["batch" if d.is_batch_dim() else d.name for d in tensor.dims]
            names["outputs"].append({"name": name, "dims": dims, "dynamic": dynamic})
            out[f"out:{i}"] = tensor.raw_tensor.numpy()
            for a in dynamic:
                out[f"len:{i}:{a}"] = tensor.dims[a].dyn_size_ext.raw_tensor.numpy()
    out["names"] = np.frombuffer(json.dumps(names).encode("utf-8"), dtype=np.uint8)
    np.savez(out_path, **out)


if __name__ == "__main__":
    tf_quiet.quiet()
    try:
        _run(*sys.argv[1:4])
    except Exception as e:  # the caller's one line: what RETURNN or the config raised
        Path(sys.argv[3] + ".error").write_text(error_line(e), "utf-8")
        raise
