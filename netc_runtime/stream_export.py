"""`netc export --streaming`: a network's step (and a transducer's decoder) as files with explicit caches.

Each file is written by `netc_runtime.export` from a step graph (`netc.stream`): the step's
inputs (frames, caches) in, its outputs (results, new caches) out. Next to it, `<file>.json`
says what the host needs to run it without netc (`netc_runtime.stream_runner`): each input's
and output's name in the file, dims, shape and dtype, which are per frame (and where the
streamed axis goes in the whole sequence), which are results after a sequence's last step, and
each cache's input, output and initial value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from netc.ir.model import Graph, Op
from netc.naming import lens_name
from netc.outputs import write_bytes
from netc.stream import StepPlan, region_graph
from netc_runtime.export import Check, Signature, check, export, onnx_output_names
from netc_runtime.npz import _params
from netc_runtime.scratch import scratch_file

SIDECAR_VERSION = 1


def sidecar_path(path: str) -> str:
    return f"{path}.json"


@dataclass(frozen=True)
class Written:
    path: str
    sig: Signature
    checked: Check


def _params_file(full: Graph, step: Graph, params_path: str | None, seed: int) -> str:
    """The step's parameters as the whole network draws them (`netc run`'s draw from `seed`,
    those in `params_path` instead), in an npz the exporter reads."""
    params = _params(full, params_path, None, seed)
    names = {p.name for p in step.params}
    path = scratch_file(f"{full.network}_{step.network}_params.npz", "")
    np.savez(path, **{f"param:{k}": v for k, v in params.items() if k in names})
    return path


def write_module(step: Graph, full: Graph, fmt: str, output: str, params_path: str | None, seed: int) -> Written:
    """`step`'s module (checked against torch), its parameters as the whole network `full` draws them."""
    params = _params_file(full, step, params_path, seed)
    sig = export(step, fmt, output, params, seed)
    try:
        checked = check(step, fmt, output, params, seed)
    except Exception:
        Path(output).unlink(missing_ok=True)  # a file that does not compute what the step does
        raise
    return Written(output, sig, checked)


def _file_names(sig: Signature, fmt: str) -> dict[str, str]:
    names = onnx_output_names(sig) if fmt == "onnx" else [n for n, _ in sig.outputs]
    return {n: f for (n, _), f in zip(sig.outputs, names)}


def _tensor(g: Graph, name: str, dims: list[str], dtype: str) -> dict:
    sizes = {d.name: d.size for d in g.dims}
    return {"name": name, "dims": dims, "shape": [sizes.get(d) for d in dims], "dtype": dtype}


def _dtypes(g: Graph) -> dict[str, str]:
    """The dtype each input of the file takes (as the module's: labels int32)."""
    return {i.name: i.value.dtype for i in g.inputs}


def write_step(plan: StepPlan, full: Graph, fmt: str, output: str, params_path: str | None, seed: int) -> Written:
    """The step module of `plan` and its sidecar."""
    step = plan.graph
    written = write_module(step, full, fmt, output, params_path, seed)
    sig, dtypes = written.sig, _dtypes(step)
    caches = {c.input: c for c in plan.caches}
    inputs = []
    for name, dims in sig.inputs:
        if name in caches or name in sig.left_out:
            continue
        if name not in dtypes:  # a `<dim>_lens` of another dynamic dim, or a search's batch size
            inputs.append({**_tensor(step, name, dims, "int64"), "kind": "lengths", "axis": None})
            continue
        kind = plan.inputs.get(name, "const")
        inputs.append({**_tensor(step, name, dims, dtypes[name]), "kind": kind, "axis": plan.input_axis.get(name)})
    files = _file_names(sig, fmt)
    values = {o.name: o.value for o in step.outputs}
    vdtype = {v.id: v.dtype for v in _values(step)}
    dims_of = dict(sig.outputs)
    outputs = [
        {
            **_tensor(step, name, dims_of[name], vdtype[values[name]]),
            "file_name": files[name],
            "kind": kind,
            "axis": plan.output_axis.get(name),
        }
        for name, kind in plan.outputs.items()
    ]
    # the lengths of dims the step's outputs have that ops make (`<dim>_lens`), as the file returns them
    cache_outs = {c.output for c in plan.caches}
    outputs += [
        {**_tensor(step, name, dims, "int64"), "file_name": files[name], "kind": "lengths", "axis": None}
        for name, dims in sig.outputs
        if name not in plan.outputs and name not in cache_outs
    ]
    cache_rows = [
        {
            **_tensor(step, c.name, dims_of[c.output], c.value.dtype),
            "input": c.input,
            "output": files[c.output],
            "init": c.init,
            "read": c.input not in sig.left_out,
        }
        for c in plan.caches
    ]
    sidecar = {
        "version": SIDECAR_VERSION,
        "kind": "step",
        "network": full.network,
        "format": fmt,
        "file": Path(output).name,
        "axis": plan.axis,
        # what the axis is in one step: nothing (one frame), or a chunk's frames
        "step_dims": [] if plan.block is None else [plan.block.frames],
        "chunk": None if plan.block is None else _chunk_row(plan, sig),
        "inputs": inputs,
        "caches": cache_rows,
        "outputs": outputs,
    }
    write_bytes(sidecar_path(output), (json.dumps(sidecar, indent=1) + "\n").encode())
    return written


def _chunk_row(plan: StepPlan, sig: Signature) -> dict:
    """A chunked loop's step: which dim of the inputs it cuts, into chunks of how many frames,
    the dim a step's input frames are over and the input giving each sequence's valid frames
    of it (a step takes `size` frames, padded: the last chunk's valid ones fewer); `frames`: the
    dims of a chunk's frames in the outputs (the loop's chunk dim, `chunk_size` frames a step,
    and the input frames' dim where a pool makes the chunk dim from them)."""
    c = plan.block
    lens = lens_name(c.frames)
    assert lens in {n for n, _ in sig.inputs}, (lens, sig.inputs)
    frames = sorted({c.frames, c.chunk})
    row = {"axis": c.axis, "size": c.size, "dim": c.frames, "lengths": lens, "frames": frames}
    return {**row, "chunk_size": c.chunk_size}


def _values(g: Graph):
    from netc.ir.uses import values_by_id

    return values_by_id(g).values()


def transducer_op(g: Graph) -> Op | None:
    """The network's transducer search: the op that calls a prediction and a joint network
    (`transducer_search`), whose decoder a streaming export writes as step modules."""
    found = [n for n in g.body if isinstance(n, Op) and {r.name for r in n.regions} == {"predict", "joint"}]
    return found[0] if found else None


def _rows(g: Graph, sig: Signature, files: dict[str, str]) -> dict[str, list[dict]]:
    """A module's inputs and outputs: names (in the file), dims, shapes and dtypes."""
    dtypes = _dtypes(g)
    vdtype = {v.id: v.dtype for v in _values(g)}
    values = {o.name: o.value for o in g.outputs}
    return {
        "inputs": [_tensor(g, n, ds, dtypes.get(n, "int64")) for n, ds in sig.inputs if n not in sig.left_out],
        "outputs": [_tensor(g, files[n], ds, vdtype[values[n]]) for n, ds in sig.outputs],
    }


def write_decoder(
    g: Graph, op: Op, fmt: str, output: str, params_path: str | None, seed: int, sidecar_file: str
) -> tuple[Written, Written]:
    """`transducer_search`'s prediction network (`<stem>.predict<ext>`: label, states -> out,
    states) and joint network (`<stem>.joint<ext>`: encoder frame, prediction out -> scores) as
    step modules, and the search's settings in `sidecar_file`."""
    from netc.ir.uses import values_by_id

    predict, joint = (next(r for r in op.regions if r.name == n) for n in ("predict", "joint"))
    n_state = len(predict.results) - 1
    state_names = [f"state{k}" for k in range(n_state)]
    pred_graph = region_graph(g, op, "predict", ["pred", *[f"new_{s}" for s in state_names]])
    for inp, name in zip(pred_graph.inputs, ["label", *state_names]):
        inp.name = name
    joint_graph = region_graph(g, op, "joint", ["scores"])
    for inp, name in zip(joint_graph.inputs, ["enc", "pred"]):
        inp.name = name
    base, ext = _stem(output)
    pred_w = write_module(pred_graph, g, fmt, f"{base}.predict{ext}", params_path, seed)
    joint_w = write_module(joint_graph, g, fmt, f"{base}.joint{ext}", params_path, seed)
    values = values_by_id(g)
    state_init = []
    for k in range(n_state):
        init = _fill_of(g, op.args[1 + k])
        dims = list(predict.args[1 + k].dims)
        state_init.append({**_tensor(g, state_names[k], dims, "float32"), "init": init})
    pred_files, joint_files = _file_names(pred_w.sig, fmt), _file_names(joint_w.sig, fmt)
    enc = values[op.args[0]]
    meta = {
        "version": SIDECAR_VERSION,
        "kind": "transducer",
        "network": g.network,
        "format": fmt,
        "predict": {
            "file": Path(pred_w.path).name,
            "label": "label",
            "states": state_names,
            "out": pred_files["pred"],
            "new_states": [pred_files[f"new_{s}"] for s in state_names],
            **_rows(pred_graph, pred_w.sig, pred_files),
        },
        "joint": {
            "file": Path(joint_w.path).name,
            "enc": "enc",
            "pred": "pred",
            "scores": joint_files["scores"],
            **_rows(joint_graph, joint_w.sig, joint_files),
        },
        "state_init": state_init,
        "encoder_dims": list(enc.dims),
        "axis": op.attrs["axis"],
        "classes": op.attrs["classes"],
        "start": op.attrs["start"],
        "blank": op.attrs["blank"],
        "beam": op.attrs["beam"],
        "method": op.attrs["method"],
        "max_sym_per_frame": op.attrs["max_sym_per_frame"],
    }
    write_bytes(sidecar_file, (json.dumps(meta, indent=1) + "\n").encode())
    return pred_w, joint_w


def _stem(output: str) -> tuple[str, str]:
    p = Path(output)
    return str(p.with_suffix("")), p.suffix


def _fill_of(g: Graph, v: int) -> float:
    """The constant a decoder's initial state is (`zeros`, `ones`, `full`); another is refused."""
    from netc.errors import CompileError
    from netc.stream import FILLS

    for n in g.body:
        if isinstance(n, Op) and any(o.id == v for o in n.outs):
            if n.op in FILLS and not n.args:
                return float({"zeros": 0.0, "ones": 1.0}.get(n.op, n.attrs.get("value", 0.0)))
            raise CompileError(
                n.span,
                "cannot stream the decoder: its initial state is computed; a step module's state starts "
                "from a constant (`zeros`, `ones`, `full`)",
            )
    raise AssertionError(v)
