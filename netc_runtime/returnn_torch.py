"""A `returnn-torch` config's own entry points on one padded batch, in RETURNN's PyTorch backend.

RETURNN loads the config, `get_model` makes the module, the batch becomes `extern_data` through
RETURNN's `raw_dict_to_extern_data` (as its data loader's batches do), `train_step` marks the
losses and `forward_step` the outputs (a beam search for a model with `choice`). It runs in a
process of its own: selecting RETURNN's PyTorch backend changes process-wide state (the frontend
backend, the minimum behavior version) that RETURNN's TensorFlow engine must not see.

    python -m netc_runtime.returnn_torch CONFIG BATCH_NPZ OUT_NPZ

BATCH_NPZ holds the batch as RETURNN's data loader gives it (`data:<key>`, `data:<key>:seq_len`)
and parameters (`param:<RETURNN name>`); OUT_NPZ gets `out:<output>`, `dims:<output>`,
`len:<output>:<dim>` (each dynamic dim's lengths), `loss:<loss>` (as marked: summed over frames)
and `norm:<loss>` (the frames RETURNN divides its score by).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np

from netc.emit_returnn_torch.emitter import emit_returnn_torch
from netc.ir.interface import input_dyn_dims
from netc.ir.model import Graph
from netc.ir.search import search_dims, search_plan
from netc_runtime.backends import Result, output_dims


def run_returnn_torch(g: Graph, inputs, lens, params, config_text: str | None = None) -> Result:
    """Outputs of `forward_step` (the search's for a model with `choice`) and the losses of
    `train_step`; raises RuntimeError with RETURNN's message when the config fails."""
    plan = search_plan(g)
    data = run_entry_points(config_text or emit_returnn_torch(g), returnn_batch(g, inputs, lens), params)
    dims = search_dims(g) if plan else output_dims(g)
    outputs = {k[len("out:") :]: v for k, v in data.items() if k.startswith("out:")}
    outputs.update({k[len("loss:") :]: v for k, v in data.items() if k.startswith("loss:")})
    out_lens: dict[str, dict[str, np.ndarray]] = {name: {} for name in outputs}
    for name in outputs:
        marked = data.get(f"dims:{name}")
        if marked is not None and marked.tolist() != dims[name]:
            raise RuntimeError(
                f"forward_step marked {name!r} with dims {marked.tolist()}, the model's are {dims[name]}"
            )
        for axis, d in enumerate(dims[name]):
            if f"len:{name}:{axis}" in data:
                out_lens[name][d] = data[f"len:{name}:{axis}"]
    return Result(outputs, dims, out_lens)


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


def run_entry_points(config_text: str, batch: dict[str, np.ndarray], params) -> dict[str, np.ndarray]:
    """The config's train_step and forward_step on `batch` with `params` (by RETURNN name), in a
    RETURNN process of its own: what OUT_NPZ holds (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="netc_returnn_torch_") as work:
        config, batch_file, out_file = (os.path.join(work, f) for f in ("model.config", "batch.npz", "out.npz"))
        with open(config, "w", encoding="utf-8") as f:
            f.write(config_text)
        np.savez(  # prefixed keys: no data key can be savez's own `file` argument
            batch_file,
            **{f"data:{k}": v for k, v in batch.items()},
            **{f"param:{k}": np.asarray(v, dtype=np.float32) for k, v in params.items()},
        )
        cmd = [sys.executable, "-m", "netc_runtime.returnn_torch", config, batch_file, out_file]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"RETURNN (PyTorch) failed on the config:\n{proc.stderr[-4000:]}")
        found = np.load(out_file)
        return {k: found[k] for k in found.files}


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
    out = {}
    with torch.no_grad():
        extern_data = raw_dict_to_extern_data(raw, extern_data_template=template, device="cpu", with_eval_targets=True)
        rf.init_train_step_run_ctx(train_flag=False, step=0, epoch=1)
        try:
            cfg.typed_value("train_step")(model=model, extern_data=extern_data)
        except ValueError as e:
            if "there is nothing to train" not in str(e):
                raise
        for name, loss in rf.get_run_ctx().losses.items():
            out[f"loss:{name}"] = loss.get_summed_loss().raw_tensor.numpy()
            norm = loss.get_inv_norm_factor()
            out[f"norm:{name}"] = np.asarray(norm if isinstance(norm, int) else norm.raw_tensor)
        # the forward task's extern_data: without what a search does without (the targets)
        extern_data = raw_dict_to_extern_data(raw, extern_data_template=template, device="cpu")
        rf.init_forward_step_run_ctx(step=0, epoch=1)
        cfg.typed_value("forward_step")(model=model, extern_data=extern_data)
        for name, tensor in rf.get_run_ctx().outputs.data.items():
            out[f"out:{name}"] = tensor.raw_tensor.numpy()
            out[f"dims:{name}"] = np.asarray(["batch" if d.is_batch_dim() else d.name for d in tensor.dims])
            for axis, d in enumerate(tensor.dims):
                if d.dyn_size_ext is not None and not d.is_batch_dim():
                    out[f"len:{name}:{axis}"] = d.dyn_size_ext.raw_tensor.numpy()
    np.savez(out_path, **out)


if __name__ == "__main__":
    _run(*sys.argv[1:4])
