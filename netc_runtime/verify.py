"""The oracle: eager = torch = RETURNN on one padded batch with unequal sequence lengths."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from netc.errors import CompileError
from netc.ir.interface import input_dyn_dims
from netc.ir.model import Graph, Loop
from netc.ir.search import search_plan
from netc.ir.uses import values_by_id
from netc.ir.walk import ops
from netc.ops import REGISTRY
from netc.parser.tracer import parse_file
from netc.progress import step
from netc_runtime.backends import BACKEND_NAMES, BACKENDS, Result, run_backend, valid_mask
from netc_runtime.failures import Mismatch, failing_as

TOLERANCE = 1e-4


@dataclass(frozen=True)
class CtcLabels:
    """A `ctc_loss` whose labels have a dynamic dim of the inputs: those labels must be alignable
    to the logits' frames, or the loss is 0 on every backend and compares nothing."""

    labels_dim: str  # a dynamic input dim
    frames_dim: str  # the logits' dynamic dim
    classes: int  # label classes (without the blank)
    input: str | None  # the input that is the labels, if they are one (not computed from one)


def ctc_labels(g: Graph) -> list[CtcLabels]:
    """Every `ctc_loss` over labels with a dynamic input dim (see CtcLabels)."""
    values, dims = values_by_id(g), {d.name: d for d in g.dims}
    inputs = {i.value.id: i.name for i in g.inputs}
    dyn = set(input_dyn_dims(g))
    out = []
    for op in ops(g.body):
        if op.op != "ctc_loss":
            continue
        logits, labels = values[op.args[0]], values[op.args[1]]
        (frames,) = [d for d in logits.dims if d not in ("batch", op.attrs["axis"])]
        (label_dim,) = [d for d in labels.dims if d != "batch"]
        if label_dim in dyn:
            out.append(CtcLabels(label_dim, frames, dims[labels.sparse_dim].size, inputs.get(labels.id)))
    return out


def rnnt_pred_dims(g: Graph) -> dict[str, str]:
    """For every `rnnt_loss` whose labels' dim and logits' labels+1 dim are dynamic input dims: the
    latter by the former. Each sequence needs one frame more on the latter (the loss is defined
    only so)."""
    values, dyn = values_by_id(g), set(input_dyn_dims(g))
    out = {}
    for op in ops(g.body):
        if op.op != "rnnt_loss":
            continue
        pred = REGISTRY[op.op].pred_dim(values[op.args[0]].dims, op.attrs)
        (label_dim,) = [d for d in values[op.args[1]].dims if d != "batch"]
        if label_dim in dyn and pred in dyn:
            out[pred] = label_dim
    return out


def made_lengths(g: Graph, lens: dict[str, list[int]]) -> dict[str, list[int]]:
    """`lens` and the lengths of the dims ops make from them (`max_pool`'s `out_axis`); not those
    of dims loops make (they depend on the values)."""
    known = dict(lens)
    for op in ops(g.body):
        known.update(REGISTRY[op.op].made_lengths(op.attrs, known))
    return known


def fitted_inputs(g: Graph) -> dict[str, str]:
    """Input dims read over a dim an op makes by `fit_frames` (an alignment over a downsampled
    encoder's frames, RETURNN's `size_base`): input dim -> that dim. Such an input has one frame
    per frame of it, so its lengths are drawn as that dim's. A `fit_frames` whose value nothing
    reads (an imported alignment the decoder takes as its target over its own dim) still says so:
    with the model's file, the graph as parsed (before dead code goes) is asked too."""
    dyn = set(input_dyn_dims(g))
    bodies = [g.body]
    if os.path.isfile(g.source_file):
        try:
            bodies.append(as_parsed(g.source_file, g.network).body)
        except CompileError:  # a graph derived from the file's (a streamed model's parts): its own body only
            pass
    out: dict[str, str] = {}
    for body in bodies:
        for op in ops(body):
            if op.op == "fit_frames" and op.attrs["axis"] in dyn and op.attrs["out_axis"] not in dyn:
                out.setdefault(op.attrs["axis"], op.attrs["out_axis"])
    return out


def as_parsed(path: str, network: str) -> Graph:
    """The model's graph as parsed, before dead code goes (a file edited since is parsed again)."""
    return _parsed(path, os.stat(path).st_mtime_ns, network)


@functools.lru_cache(maxsize=8)
def _parsed(path: str, mtime_ns: int, network: str) -> Graph:
    return parse_file(path, network=network)


def tie_fitted(g: Graph, lens: dict) -> dict:
    """`lens` with each input dim of `fitted_inputs` as long as the dim it is read over."""
    out = dict(lens)
    for d, base in fitted_inputs(g).items():
        known = made_lengths(g, {k: [int(n) for n in v] for k, v in out.items() if k != d})
        if base in known and d in out:
            out[d] = np.asarray(known[base], dtype=np.int64) if isinstance(out[d], np.ndarray) else list(known[base])
    return out


def _draw(top: int, batch: int, rng: np.random.Generator) -> list[int]:
    """`top` first, then shorter ones, longest first (all 1 when `top` is 1)."""
    return [top] + (
        sorted(rng.integers(1, top, size=batch - 1).tolist(), reverse=True) if top > 1 else [1] * (batch - 1)
    )


def choice_target_bounds(g: Graph) -> dict[str, tuple[str | None, Fraction, Fraction]]:
    """For every loop with `choice` whose target's dim is a dynamic input dim and whose bound is
    `scale * x.max_seq_len + offset` (or that `// k`: scale and offset Fractions) over another dim (an input's, or one an op makes of it, as a
    pooled encoder's time), or a constant `range(n)`: that dim -> (the bound's dim, scale, offset),
    or (None, 0, n). Training runs over the target's frames, which the bound must cover."""
    dyn = set(input_dyn_dims(g))
    g = g.search or g  # training has made the loop one over its target (`teacher_forcing`)
    made = {o.id: n for n in g.body if not isinstance(n, Loop) for o in n.outs}
    out: dict[str, tuple[str | None, Fraction, Fraction]] = {}
    for loop in g.body:
        if not isinstance(loop, Loop) or loop.target is None or loop.axis not in dyn:
            continue
        if loop.max_steps is not None:
            out[loop.axis] = (None, 0, loop.max_steps)
            continue
        scale, offset, div, v = 1, 0, 1, loop.bound
        if v in made and made[v].op == "floordiv" and isinstance(made[v].attrs.get("scalar"), int):
            div, v = made[v].attrs["scalar"], made[v].args[0]  # `(n * x.max_seq_len + m) // k`: last
        while v in made and made[v].op in ("mul", "add") and isinstance(made[v].attrs.get("scalar"), int):
            op = made[v]
            if len(op.args) != 1:
                break
            if op.op == "mul":
                scale *= op.attrs["scalar"]
            else:
                offset += scale * op.attrs["scalar"]
            v = op.args[0]
        op = made.get(v)
        if op is not None and op.op == "seq_lens" and op.attrs["axis"] != loop.axis:  # an input's dim or one made of it
            # floor(scale * m + offset) (a bound `// k` as Fractions of k)
            out[loop.axis] = (op.attrs["axis"], Fraction(scale, div), Fraction(offset, div))
    return out


def random_lengths(g: Graph, batch: int, max_len: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Unequal lengths per dynamic input dim, all within `max_len`, the first sequence the longest.
    The k-th dim (in declaration order, from 0) is at most `max_len - k` long (at least 1), so
    that dims of equal lengths do not hide a mix-up of two dims. Labels of a `ctc_loss` are drawn
    last, each sequence's no longer than its frames allow (`ctc_labels`; half as long with one
    label class, whose repeats need blanks between them); `random_inputs` then keeps their
    repeats within the frames. An `rnnt_loss`'s labels+1 dim gets its labels' lengths plus one
    (`rnnt_pred_dims`). A `choice` loop's target is no longer than the loop's bound
    (`choice_target_bounds`): training runs over all of its frames. An input read over a dim an op
    makes (`fit_frames`) gets that dim's lengths (`fitted_inputs`)."""
    dyn = input_dyn_dims(g)
    sizes = {d.name: d.size for d in g.dims if d.kind == "dynamic"}
    ctc: dict[str, list[CtcLabels]] = {}
    for c in ctc_labels(g):
        ctc.setdefault(c.labels_dim, []).append(c)
    lens: dict[str, list[int]] = {}
    for d in [d for d in dyn if d not in ctc] + [d for d in dyn if d in ctc]:
        top = max(1, max_len - dyn.index(d))
        if sizes.get(d) is not None:  # a dynamic dim of a given size (a streamed chunk's frames, padded)
            top = min(top, sizes[d])
        known = made_lengths(g, lens)
        bounds = [  # per CTC over these labels whose frames are known: the most labels per sequence
            [n if c.classes > 1 else (n + 1) // 2 for n in known[c.frames_dim]]
            for c in ctc.get(d, [])
            if c.frames_dim in known
        ]
        if not bounds:
            lens[d] = _draw(top, batch, rng)
            continue
        caps = [min(col) for col in zip(*bounds)]
        first = max(1, min(top, caps[0]))
        rest = [min(first - 1, cap) for cap in caps[1:]]
        ls = [first] + sorted((int(rng.integers(1, hi + 1)) if hi >= 1 else 1 for hi in rest), reverse=True)
        lens[d] = [max(1, min(n, cap)) for n, cap in zip(ls, caps)]
    for d, (frames, scale, offset) in choice_target_bounds(g).items():  # within the loop's bound
        if frames is None:  # a constant bound: drawn again within it, unequal as any
            lens[d] = _draw(max(1, min(lens[d][0], offset)), batch, rng)
            continue
        # e.g. a pooled encoder's time; the search's ops too: where training's outputs are the
        # target's labels themselves, its graph has no encoder
        others = {k: v for k, v in lens.items() if k != d}
        known = {**made_lengths(g.search, others), **made_lengths(g, others)} if g.search else made_lengths(g, others)
        if frames in known:
            lens[d] = [max(1, min(n, math.floor(scale * m + offset))) for n, m in zip(lens[d], known[frames])]
    lens = tie_fitted(g, lens)  # an input over a made dim's frames: its lengths
    for pred, label_dim in rnnt_pred_dims(g).items():  # one frame more than the labels
        lens[pred] = [n + 1 for n in lens[label_dim]]
    return {d: np.asarray(lens[d], dtype=np.int64) for d in dyn}


def random_inputs(
    g: Graph, lens: dict[str, np.ndarray], rng: np.random.Generator, batch: int | None = None
) -> dict[str, np.ndarray]:
    """Random inputs whose padded frames hold garbage, so that any leak of padding shows.
    `batch`: the batch size where no input has a dynamic dim (no lengths tell it)."""
    sizes = {d.name: d.size for d in g.dims}
    n_seqs = len(next(iter(lens.values()))) if lens else batch
    out = {}
    for inp in g.inputs:
        shape = [
            n_seqs if d == "batch" else int(lens[d].max()) if sizes[d] is None else sizes[d]
            for d in inp.annotated_dims
            if d != inp.value.sparse_dim
        ]
        if inp.value.sparse_dim and sizes[inp.value.sparse_dim] is None:  # positions in a dynamic dim's frames
            x = _positions(rng, shape, inp.annotated_dims.index("batch"), lens[inp.value.sparse_dim])
        elif inp.value.sparse_dim:
            x = rng.integers(0, sizes[inp.value.sparse_dim], size=shape).astype(np.int32)
        elif inp.value.dtype == "bool":  # a streamed step's flag cache (which cached frames are frames)
            x = rng.random(shape) < 0.5
        else:
            x = rng.standard_normal(shape).astype(np.float32)
            valid = valid_mask([d for d in inp.annotated_dims if d != inp.value.sparse_dim], lens, g, shape)
            x = np.where(valid, x, np.float32(3.0) + rng.standard_normal(shape).astype(np.float32))
        out[inp.name] = x
    frames = made_lengths(g, {d: [int(n) for n in v] for d, v in lens.items()})
    for c in ctc_labels(g):
        if c.input is not None and c.frames_dim in frames:
            inp = next(i for i in g.inputs if i.name == c.input)
            _fit_repeats(out[c.input], list(inp.annotated_dims), c, lens[c.labels_dim], frames[c.frames_dim])
    return out


def _positions(rng: np.random.Generator, shape: list[int], batch_axis: int, frames: np.ndarray) -> np.ndarray:
    """Labels over a dynamic class dim (a hard attention's positions): each sequence's within its
    own frames of that dim (a sequence with none gets 0)."""
    high = np.maximum(frames, 1).reshape([-1 if i == batch_axis else 1 for i in range(len(shape))])
    return np.floor(rng.random(shape) * high).astype(np.int32)


def _fit_repeats(x: np.ndarray, dims: list[str], c: CtcLabels, label_lens, frames: list[int]) -> None:
    """Labels `x` (in place) with no more repeats than each sequence's frames leave room for (a
    repeat needs a blank between; `netc.ops.losses.ctc_frames_needed`): a repeat beyond that
    becomes the next class."""
    seqs = np.moveaxis(x, [dims.index("batch"), dims.index(c.labels_dim)], [0, 1])  # a view
    for b, (n, t) in enumerate(zip(label_lens, frames)):
        room = t - int(n)
        for i in range(1, int(n)):
            if seqs[b, i] == seqs[b, i - 1]:
                if room > 0:
                    room -= 1
                elif c.classes > 1:
                    seqs[b, i] = (seqs[b, i] + 1) % c.classes


def random_params(g: Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Glorot-uniform weights; biases small but non-zero, so that a dropped bias shows; scales
    (initialised to ones) near 1."""
    sizes = {d.name: d.size for d in g.dims}
    params = {}
    for p in g.params:
        shape = [sizes[d] for d in p.dims]
        if len(shape) >= 2:
            limit = np.sqrt(6.0 / (shape[0] + shape[-1]))
            params[p.name] = _drawn(shape, lambda n, limit=limit: rng.uniform(-limit, limit, size=n))
        else:  # around 1 where it starts at 1: a scale, a variance (BatchNorm's, positive)
            params[p.name] = _drawn(shape, lambda n, p=p: (p.init == "ones") + 0.1 * rng.standard_normal(n))
    return params


def _drawn(shape: list[int], draw: Callable[[int], np.ndarray], piece: int = 1 << 20) -> np.ndarray:
    """float32 values drawn a piece at a time: the numbers of one float64 draw cast to float32,
    without that whole float64 array (twice the parameter: gigabytes for a 200k-word softmax)."""
    out = np.empty(shape, np.float32)
    flat = out.reshape(-1)
    for i in range(0, flat.size, piece):
        flat[i : i + piece] = draw(min(piece, flat.size - i))
    return out


@dataclass
class Comparison:
    output: str
    backend: str
    max_abs_diff: float
    valid_frames: int
    # what TOLERANCE is relative to: 1 for values; for a loss, a sum over every valid frame of the
    # batch whose float32 rounding grows with it, max(1, |loss|)
    scale: float = 1.0
    reference: str = "eager"  # torch where eager cannot run the model (`batch_coupled`)

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= TOLERANCE * self.scale


def abs_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in float64, 0 where both hold the same value: equal infinities (scores a
    `mask_inf` or a search set to -inf) are equal, not NaN apart."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(a == b, 0.0, np.abs(a - b))


def compare(g: Graph, ref: Result, other: Result, backend: str, reference: str = "eager") -> list[Comparison]:
    """Every result of `ref` (outputs and losses, or what a search returns) against `other`'s."""
    losses = {loss.name for loss in g.losses}
    out = []
    for name, dims in ref.dims.items():
        if name not in other.outputs:
            raise Mismatch(f"{backend}: gave no {name!r}, {reference} did")
        a, b = np.asarray(ref.outputs[name]), np.asarray(other.outputs[name])
        if other.dims[name] != dims:
            raise Mismatch(f"{backend}: output {name} has dims {other.dims[name]}, {reference} {dims}")
        for d, ls in ref.lens[name].items():
            if not np.array_equal(np.asarray(ls), np.asarray(other.lens[name][d])):
                raise Mismatch(f"{backend}: output {name} lengths of {d} differ: {other.lens[name][d]} vs {ls}")
        shape = tuple(min(x, y) for x, y in zip(a.shape, b.shape))
        for ax, d in enumerate(dims):
            if d in ref.lens[name] and shape[ax] < int(np.max(ref.lens[name][d], initial=0)):
                raise Mismatch(f"{backend}: output {name} is shorter than its lengths along {d}")
        a = a[tuple(slice(0, n) for n in shape)]
        b = b[tuple(slice(0, n) for n in shape)]
        mask = valid_mask(dims, ref.lens[name], g, shape)
        diff = np.where(mask, abs_diff(a, b), 0.0)
        bad = np.isnan(b) & mask
        worst = float("inf") if bad.any() else float(diff.max(initial=0.0))
        scale = max(1.0, float(np.abs(a).max(initial=0.0))) if name in losses else 1.0
        out.append(Comparison(name, backend, worst, int(mask.sum()), scale, reference))
    return out


def eager_cannot_run(g: Graph, model_path: str | None = None) -> str | None:
    """Why eager mode cannot run the model (an op whose numbers depend on the whole batch), or None.
    Eager mode runs every op the source calls, used or not: with the model's file, its graph as
    parsed (before dead code goes) is the one asked."""
    if model_path is not None:
        g = as_parsed(model_path, g.network)
    for n in ops(g.body):
        opdef = REGISTRY.get(n.op)
        if opdef is not None and opdef.batch_coupled(n.attrs):
            return f"`{opdef.fn_name or opdef.name}` here depends on the whole batch"
    return None


def verify(
    model_path: str,
    g: Graph,
    backends=BACKENDS,
    seed: int = 0,
    batch: int = 3,
    max_len: int = 7,
    search: bool = False,
    params: dict[str, np.ndarray] | None = None,
):
    """The oracle on one random padded batch: eager against every other backend. `search=True`
    compares beam searches (the best labels, their lengths and scores). A backend that fails
    raises a BackendError naming it; results unlike eager's in kind, a Mismatch. Eager mode runs
    one sequence at a time: where the model's numbers depend on the whole batch
    (`eager_cannot_run`), torch is the reference instead."""
    if search and search_plan(g) is None:
        raise ValueError(f"{g.network} has no `choice`: there is nothing to search")
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, batch, max_len, rng)
    inputs = random_inputs(g, lens, rng)
    params = {**random_params(g, rng), **(params or {})}
    if backends[0] == "eager" and len(backends) > 2 and eager_cannot_run(g, model_path):
        backends = tuple(backends[1:])
    results = {}
    for b in backends:
        step(f"verify: running {BACKEND_NAMES.get(b, b)}")
        with failing_as(b):
            results[b] = run_backend(b, model_path, inputs, lens, params, g, search=search)
    ref = results[backends[0]]
    comps = []
    for b in backends[1:]:
        comps += compare(g, ref, results[b], b, backends[0])
    return comps, lens
