"""`netc run`: npz in, npz out.

Input keys: `in:<input>` (batch-major, annotation order), `len:<dim>`, `param:<RETURNN name>`.
Output keys: `out:<output>`, `dims:<output>` (dim names, `batch` for the batch dim),
`outlen:<output>:<dim>` for each dynamic dim of an output.
"""

from __future__ import annotations

import io
import sys
import zipfile
import zlib

import numpy as np

from netc.ir.interface import input_dyn_dims
from netc.ir.model import Graph
from netc.ir.search import search_plan
from netc.outputs import write_bytes
from netc.suggest import did_you_mean, listing
from netc_runtime.backends import run_backend
from netc_runtime.failures import failing_as
from netc_runtime.verify import random_inputs, random_lengths, random_params


def load_npz(path: str) -> dict[str, np.ndarray]:
    """Every array of the npz file at `path`; a file that is not one (text, cut short, damaged,
    Python objects) is a ValueError naming it."""
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a readable npz file (numpy.savez writes one; `netc run --template` an example)")
    try:
        with np.load(path, allow_pickle=False) as src:
            return {k: src[k] for k in src.files}
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise ValueError(f"{path}: holds Python objects, not arrays of numbers") from None
        raise ValueError(f"{path}: a damaged npz file ({e})") from None
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"{path}: a damaged npz file ({e})") from None


def _params(
    g: Graph, params_path: str | None, inputs: tuple[str, dict[str, np.ndarray]] | None, seed: int
) -> dict[str, np.ndarray]:
    """The parameters drawn from `seed`, those given in the inputs file (path, arrays) and in
    `params_path` instead; an unknown name is a KeyError naming the file."""
    params = random_params(g, np.random.default_rng(seed))
    known = set(params)
    sources = [inputs] if inputs else []
    if params_path:
        sources.append((params_path, load_npz(params_path)))
    for path, src in sources:
        for k, value in src.items():
            if k.startswith("param:"):
                name = k[len("param:") :]
                if name not in known:
                    close = did_you_mean(name, known)
                    raise KeyError(f"{path}: unknown parameter {name!r}{close} (known: {', '.join(sorted(known))})")
                params[name] = value
    return params


def read_params(g: Graph, path: str) -> dict[str, np.ndarray]:
    """The `param:<RETURNN name>` entries of an npz (`netc verify --params`); an unknown name or
    another shape than the model's is a ValueError naming the parameter."""
    shapes = {p.name: tuple(g.dim(d).size for d in p.dims) for p in g.params}
    out = {k[len("param:") :]: v for k, v in load_npz(path).items() if k.startswith("param:")}
    for name, value in out.items():
        if name not in shapes:
            raise ValueError(f"{path}: unknown parameter {name!r} (known: {', '.join(sorted(shapes))})")
        if value.shape != shapes[name]:
            raise ValueError(f"{path}: param:{name} has shape {list(value.shape)}, the model's is {list(shapes[name])}")
    return out


def _save(output: str, arrays: dict[str, np.ndarray]) -> None:
    """An npz file, or with `-o -` the npz's bytes on stdout (`netc run ... -o - | ...`)."""
    if output == "-":
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        sys.stdout.buffer.write(buffer.getvalue())
        sys.stdout.flush()
    else:
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        write_bytes(output if output.endswith(".npz") else output + ".npz", buffer.getvalue())  # as np.savez names it


def _shape(a: np.ndarray) -> str:
    return "[" + ",".join(map(str, a.shape)) + "]"


def check_inputs(g: Graph, inputs: dict[str, np.ndarray], lens: dict[str, np.ndarray], path: str) -> None:
    """The npz's arrays against the model's inputs: ranks, static sizes, one batch size, lengths
    within the padded frames; a mismatch is a ValueError that says what was expected."""
    sizes = {d.name: d.size for d in g.dims}
    batch = {f"len:{d}": len(v) for d, v in lens.items()}
    for d, v in lens.items():
        if v.ndim != 1:
            raise ValueError(f"{path}: len:{d} is {_shape(v)}, expected [batch]")
        if v.size and int(v.min()) < 0:
            raise ValueError(f"{path}: len:{d} has a negative length ({int(v.min())})")
    for inp in g.inputs:
        if inp.name not in inputs:
            continue
        x = inputs[inp.name]
        dims = [d for d in inp.annotated_dims if d != inp.value.sparse_dim]
        want = "[" + ", ".join(d if sizes[d] is None else f"{d}={sizes[d]}" for d in dims) + "]"
        if x.ndim != len(dims) or any(sizes[d] is not None and n != sizes[d] for d, n in zip(dims, x.shape)):
            raise ValueError(f"{path}: in:{inp.name} is {_shape(x)}, expected {want}")
        if inp.value.sparse_dim and not np.issubdtype(x.dtype, np.integer):
            raise ValueError(f"{path}: in:{inp.name} holds {x.dtype} values, expected integer labels")
        classes = sizes[inp.value.sparse_dim] if inp.value.sparse_dim else None
        if classes is not None and x.size and not 0 <= int(x.min()) <= int(x.max()) < classes:
            at = tuple(int(i[0]) for i in np.nonzero((x < 0) | (x >= classes)))
            raise ValueError(
                f"{path}: in:{inp.name} has label {int(x[at])} at {list(at)}: labels of the class dim "
                f"`{inp.value.sparse_dim}` are 0..{classes - 1} (in padded frames too)"
            )
        if not inp.value.sparse_dim and not np.issubdtype(x.dtype, np.floating):
            raise ValueError(f"{path}: in:{inp.name} holds {x.dtype} values, expected floats (float32)")
        for d, n in zip(dims, x.shape):
            if d == "batch":
                batch[f"in:{inp.name}"] = n
            elif d in lens and lens[d].size and int(lens[d].max()) > n:
                raise ValueError(
                    f"{path}: len:{d} has a length {int(lens[d].max())} but in:{inp.name} has {n} frames of {d}"
                )
    if len(set(batch.values())) > 1:
        raise ValueError(f"{path}: the batch sizes differ: " + ", ".join(f"{k} {n}" for k, n in batch.items()))


def write_template(g: Graph, output: str, seed: int, batch: int, max_len: int) -> None:
    """`netc run --template`: a valid input npz for the model (random values and lengths, as
    `netc verify` draws them), to run as is or to fill in."""
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, batch, max_len, rng)
    inputs = random_inputs(g, lens, rng)
    _save(output, {**{f"in:{k}": v for k, v in inputs.items()}, **{f"len:{d}": v for d, v in lens.items()}})


def check_keys(g: Graph, data: dict[str, np.ndarray], path: str) -> None:
    """Each key of an inputs file names an input, a dynamic dim of the inputs or a parameter
    (checked with the parameters): a name the model does not have is a ValueError (a typo
    would otherwise leave the value out unnoticed)."""
    known = {
        "in": [i.name for i in g.inputs],
        "len": input_dyn_dims(g),
    }
    what = {"in": "input", "len": "dynamic input dim"}
    for key in data:
        kind, sep, name = key.partition(":")
        if sep and kind == "param":
            continue
        if not sep or kind not in known:
            raise ValueError(f"{path}: {key!r} is none of in:<input>, len:<dim>, param:<RETURNN name>")
        if name not in known[kind]:
            others = [f"{kind}:{n}" for n in known[kind]]
            raise ValueError(
                f"{path}: {key}: {g.network} has no {what[kind]} `{name}`{did_you_mean(key, others)}"
                + listing(f"{what[kind]}s", others)
            )


def run_npz(
    model: str,
    g: Graph,
    backend: str,
    inputs_path: str,
    params_path: str | None,
    output: str,
    seed: int,
    search: bool = False,
) -> None:
    data = load_npz(inputs_path)
    check_keys(g, data, inputs_path)
    plan = search_plan(g) if search else None
    if search and plan is None:
        raise ValueError(f"{g.network} has no `choice`: there is nothing to search")
    inputs, lens = {}, {}
    # a search has no targets, unless it takes no input: then its target gives the batch size
    without_targets = plan is not None and bool(plan.inputs)
    for inp in g.inputs:
        key = f"in:{inp.name}"
        if without_targets and inp.name in plan.targets:
            continue  # a search has no targets
        if key not in data:
            raise KeyError(f"{inputs_path} has no {key!r}")
        inputs[inp.name] = data[key]
    for d in plan.input_dims if without_targets else input_dyn_dims(g):
        key = f"len:{d}"
        if key not in data:
            raise KeyError(f"{inputs_path} has no {key!r}")
        lens[d] = data[key].astype(np.int64)
    check_inputs(g, inputs, lens, inputs_path)
    # every backend gets what the module takes: float32 values, int64 labels (the torch module,
    # as any, fails on another dtype; eager and RETURNN would cast)
    sparse = {i.name for i in g.inputs if i.value.sparse_dim}
    inputs = {k: v.astype(np.int64 if k in sparse else np.float32, copy=False) for k, v in inputs.items()}
    params = _params(g, params_path, (inputs_path, data), seed)
    with failing_as(backend):
        res = run_backend(backend, model, inputs, lens, params, g, search=search)
    out = {}
    for name, value in res.outputs.items():
        out[f"out:{name}"] = value
        out[f"dims:{name}"] = np.asarray(res.dims[name])
        for d, ls in res.lens[name].items():
            out[f"outlen:{name}:{d}"] = np.asarray(ls, dtype=np.int64)
    _save(output, out)
