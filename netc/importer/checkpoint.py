"""`netc import --checkpoint`: the original's TensorFlow checkpoint as the imported model's
parameters, by the importer's name map (`ImportResult.params`: each TF variable -> the model's
RETURNN name, torch `state_dict` key and shape).

The checkpoint is read by TensorFlow in a subprocess (`_read_checkpoint`, the interpreter RETURNN
runs in), so netc itself never imports TensorFlow. It must hold every variable of the imported
network with the model's shape, and nothing else but TensorFlow's bookkeeping (`global_step`,
an optimizer's slots `<variable>/Adam`, ..., `beta1_power`, `beta2_power`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping

import numpy as np

from netc import tf_quiet
from netc.errors import CompileError

_MARK = "\n@@netc-checkpoint@@\n"
BOOKKEEPING = {"global_step", "beta1_power", "beta2_power"}  # TF's step counter, Adam's powers


def read_checkpoint(prefix: str, python: str | None = None) -> dict[str, np.ndarray]:
    """Every variable of the TF checkpoint at `prefix` (`net-model/network.040`), by name."""
    if not os.path.isfile(prefix + ".index"):
        where = f" (there is {prefix}.index)" if os.path.isfile(prefix) and prefix.endswith(".index") else ""
        raise CompileError(None, f"no TF checkpoint here: {prefix}.index is missing{where}", file=prefix)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "variables.npz")
        proc = subprocess.run(
            [python or sys.executable, "-m", "netc.importer._read_checkpoint"],
            input=json.dumps({"prefix": os.path.abspath(prefix), "out": out}),
            capture_output=True,
            text=True,
            env=tf_quiet.env(),
        )
        if _MARK not in proc.stdout:
            tail = (tf_quiet.strip_notices(proc.stderr).strip().splitlines() or ["no output"])[-1]
            raise CompileError(None, f"cannot read the TF checkpoint: {tail}", file=prefix)
        data = json.loads(proc.stdout.split(_MARK, 1)[1])
        if "error" in data:
            raise CompileError(None, f"cannot read the TF checkpoint: {data['error']}", file=prefix)
        with np.load(out) as arrays:
            return {name: arrays[f"arr_{i}"] for i, name in enumerate(data["names"])}


def carry(variables: Mapping[str, np.ndarray], params: Mapping[str, dict], prefix: str) -> dict[str, np.ndarray]:
    """The model's parameters (by TF variable name, float32) from the checkpoint's variables; a
    variable missing, one the imported network does not have, or a shape that differs is an
    error naming the variable."""
    slots = {k for k in variables if any(k.startswith(p + "/") for p in params)}  # optimizer state
    extra = sorted(set(variables) - set(params) - slots - BOOKKEEPING)
    missing = sorted(set(params) - set(variables))
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(f"{k} (the model's {params[k]['returnn']})" for k in missing))
        if extra:
            parts.append("variables the imported network does not have: " + ", ".join(extra))
        raise CompileError(None, "the checkpoint does not fit the imported network: " + "; ".join(parts), file=prefix)
    out = {}
    for name, p in params.items():
        value = variables[name]
        want = list(p["shape"])[::-1] if p.get("transposed") else list(p.get("tf_shape", p["shape"]))  # RETURNN's
        if list(value.shape) != want:
            raise CompileError(
                None,
                f"variable {name} has shape {list(value.shape)}, the imported model's {p['returnn']} has "
                f"{list(p['shape'])}"
                + (f" (transposed: {want})" if p.get("transposed") else "")
                + (f" (in TF: {want})" if "tf_shape" in p else ""),
                file=prefix,
            )
        out[name] = np.asarray(model_value(value, p), dtype=np.float32)
    return out


def model_value(value: np.ndarray, entry: Mapping) -> np.ndarray:
    """A TF variable's value as the model's parameter of the name map's `entry` (transposed where
    RETURNN keeps it so: `use_transposed_weights`; without the leading axes of size 1 of RETURNN's
    batch norm before param version 2)."""
    if "tf_shape" in entry:
        return np.asarray(value).reshape(entry["shape"])
    return np.asarray(value).T if entry.get("transposed") else value


def write_params(values: Mapping[str, np.ndarray], params: Mapping[str, dict], npz: str, pt: str) -> None:
    """`npz`: `param:<RETURNN name>` entries (`netc run --params`, `netc export --params`); `pt`:
    the torch module's `state_dict` (`load_state_dict(torch.load(pt))`, strict)."""
    import torch

    for path in (npz, pt):
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(npz, **{f"param:{params[k]['returnn']}": v for k, v in values.items()})
    torch.save({params[k]["torch"]: torch.from_numpy(v) for k, v in values.items()}, pt)
