"""Run what `netc export --streaming` wrote, step by step, without netc: numpy, and onnxruntime
or torch (TorchScript) for the files. Copy this file next to the exported ones to deploy.

- `StepModule(path)`: a step module and its sidecar `<path>.json`; `initial_caches(batch)`,
  `step(inputs, caches) -> (outputs, new caches)`.
- `Stream(module, batch)`: a batch of streams: `feed(frames, valid)` runs one step, carries
  the caches (kept where a sequence has no frame in this step) and returns the step's outputs;
  `finals()` the results after each sequence's last step.
- `run(module, inputs, lens)`: a padded batch fed step by step, returned as the whole-sequence
  module returns it (per-frame outputs stacked over the streamed axis).
- `TransducerDecoder(sidecar)`: a transducer's prediction and joint networks; `search(enc, lens)`
  runs greedy or modified beam search on the host, as netc's `transducer_search` does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

Arrays = dict[str, np.ndarray]


def _load(path: str, fmt: str, outputs: list[str], threads: int | None = None) -> Callable[[Arrays], Arrays]:
    """The file as a function of its inputs by name, giving its outputs by name (file names).
    `threads`: onnxruntime's threads within an op (torch's are the process's: torch.set_num_threads)."""
    if fmt == "onnx":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        taken = {i.name for i in session.get_inputs()}  # an input nothing reads is not in the graph

        def run(inputs: Arrays) -> Arrays:
            got = session.run(outputs, {k: v for k, v in inputs.items() if k in taken})
            return dict(zip(outputs, got))

        return run
    import torch

    module = torch.jit.load(path)

    def run_ts(inputs: Arrays) -> Arrays:
        with torch.no_grad():
            out = module(**{k: torch.as_tensor(v) for k, v in inputs.items()})
        return {k: v.numpy() for k, v in out.items()}

    return run_ts


def _shape(row: dict, batch: int, sizes: dict[str, int] | None = None) -> tuple[int, ...]:
    """A tensor's shape: the batch, static sizes, and other dynamic dims' sizes from `sizes`."""
    sizes = sizes or {}
    return tuple(
        batch if d == "batch" else int(sizes[d] if n is None else n) for d, n in zip(row["dims"], row["shape"])
    )


class StepModule:
    """One step of a streamed network: frames and caches in, outputs and new caches out."""

    def __init__(self, path: str | Path, threads: int | None = None):
        path = str(path)
        self.meta = json.loads(Path(f"{path}.json").read_text())
        if self.meta.get("kind") != "step":
            raise ValueError(f"{path}.json: not a step module's sidecar (kind {self.meta.get('kind')!r})")
        self.inputs = self.meta["inputs"]
        self.caches = self.meta["caches"]
        self.outputs = self.meta["outputs"]
        names = [o["file_name"] for o in self.outputs] + [c["output"] for c in self.caches]
        self._run = _load(path, self.meta["format"], names, threads)

    def initial_caches(self, batch: int, consts: Arrays | None = None) -> Arrays:
        """The caches before the first step: a constant (`init` a number), or an input's value
        (`init` its name, in `consts`). A cache over another input's dynamic dim is as long as
        that input in `consts`."""
        consts = consts or {}
        sizes = self.sizes_of(consts)
        out = {}
        for c in self.caches:
            if isinstance(c["init"], str):
                out[c["input"]] = np.asarray(consts[c["init"]]).astype(c["dtype"])
            else:
                out[c["input"]] = np.full(_shape(c, batch, sizes), c["init"], dtype=c["dtype"])
        return out

    def sizes_of(self, consts: Arrays) -> dict[str, int]:
        """The sizes of the dims of the inputs that every step reads, as given."""
        rows = {r["name"]: r for r in self.inputs if r["kind"] == "const"}
        return {d: n for k, v in consts.items() if k in rows for d, n in zip(rows[k]["dims"], np.shape(v))}

    def step(self, inputs: Arrays, caches: Arrays) -> tuple[Arrays, Arrays]:
        """One step: `inputs` by name (each frame input's frame of this step, the others whole),
        `caches` by input name; the outputs by the network's names, and the new caches."""
        taken = {r["name"] for r in self.inputs}
        feed = {k: v for k, v in inputs.items() if k in taken}
        feed.update({c["input"]: caches[c["input"]] for c in self.caches if c["read"]})
        got = self._run(feed)
        outs = {o["name"]: got[o["file_name"]] for o in self.outputs}
        # as the next step takes them (a module may compute labels as int64 where the cache is int32)
        return outs, {c["input"]: np.asarray(got[c["output"]]).astype(c["dtype"], copy=False) for c in self.caches}


def _keep(valid: np.ndarray, dims: list[str], new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """`new` where the sequence stepped (`valid` over the batch), `old` elsewhere."""
    if "batch" not in dims:
        return new
    shape = [1] * new.ndim
    shape[dims.index("batch")] = len(valid)
    return np.where(valid.reshape(shape), new, old)


class Stream:
    """A batch of streams through one step module: the caches between steps live here."""

    def __init__(self, module: StepModule, batch: int, consts: Arrays | None = None):
        self.module, self.batch, self.consts = module, batch, dict(consts or {})
        self.caches = module.initial_caches(batch, self.consts)
        self._finals: Arrays = {}

    def feed(self, frames: Arrays, valid: np.ndarray | None = None) -> Arrays:
        """One step on these frames (one per frame input); `valid` [batch]: which sequences have a
        frame in this step (the others keep their caches and final results). The step's outputs."""
        valid = np.ones(self.batch, dtype=bool) if valid is None else np.asarray(valid, dtype=bool)
        outs, caches = self.module.step({**self.consts, **frames}, self.caches)
        for c in self.module.caches:
            self.caches[c["input"]] = _keep(valid, c["dims"], caches[c["input"]], self.caches[c["input"]])
        for o in self.module.outputs:
            if o["kind"] != "frame":
                old = self._finals.get(o["name"])
                new = outs[o["name"]]
                self._finals[o["name"]] = new if old is None else _keep(valid, o["dims"], new, old)
        return outs

    def finals(self) -> Arrays:
        """The results that are not per frame, after each sequence's last step."""
        return dict(self._finals)


def run(module: StepModule, inputs: Arrays, lens: np.ndarray | dict[str, np.ndarray]) -> Arrays:
    """The padded batch `inputs` (whole sequences, batch-major as the whole-sequence module
    takes them) fed one step at a time; `lens`: each sequence's frames, or the lengths of each
    dynamic dim by name (the streamed one's, and those of other dims of the inputs). The outputs
    as the whole-sequence module returns them (per-frame ones stacked over the streamed axis; on
    padded frames they hold what the step computed there)."""
    if isinstance(lens, dict):
        inputs = {**inputs, **{f"{d}_lens": np.asarray(v, dtype=np.int64) for d, v in lens.items()}}
        lens = lens[module.meta["axis"]]
    lens = np.asarray(lens)
    frame_inputs = {r["name"]: r["axis"] for r in module.inputs if r["kind"] == "frame"}
    consts = {r["name"]: inputs[r["name"]] for r in module.inputs if r["kind"] != "frame"}
    consts.update({c["init"]: inputs[c["init"]] for c in module.caches if isinstance(c["init"], str)})
    stream = Stream(module, len(lens), consts)
    stacked: dict[str, list[np.ndarray]] = {o["name"]: [] for o in module.outputs if o["kind"] == "frame"}
    for t in range(int(lens.max(initial=0))):
        frames = {n: np.take(inputs[n], t, axis=ax) for n, ax in frame_inputs.items()}
        outs = stream.feed(frames, lens > t)
        for name, steps in stacked.items():
            steps.append(outs[name])
    axis = {o["name"]: o["axis"] for o in module.outputs}
    result = {name: np.stack(steps, axis=axis[name]) for name, steps in stacked.items() if steps}
    return {**result, **stream.finals()}


class TransducerDecoder:
    """A transducer's prediction network and joint network as `netc export --streaming` writes
    them for a network with `transducer_search`; the search runs here, as netc's does."""

    def __init__(self, sidecar: str | Path):
        path = Path(sidecar)
        self.meta = json.loads(path.read_text())
        if self.meta.get("kind") != "transducer":
            raise ValueError(f"{path}: not a transducer decoder's sidecar")
        m, fmt = self.meta, self.meta["format"]
        p, j = m["predict"], m["joint"]
        self._predict = _load(str(path.parent / p["file"]), fmt, [p["out"], *p["new_states"]])
        self._joint = _load(str(path.parent / j["file"]), fmt, [j["scores"]])
        self.blank, self.start = int(m["blank"]), int(m["start"])

    def predict(self, labels: np.ndarray, states: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        """The prediction network on labels [n] (of the label dim) from states [n, ...]."""
        p = self.meta["predict"]
        got = self._predict({p["label"]: labels.astype(np.int32), **dict(zip(p["states"], states))})
        return got[p["out"]], [got[s] for s in p["new_states"]]

    def log_probs(self, frame: np.ndarray, pred: np.ndarray) -> np.ndarray:
        """log_softmax of the joint network's scores of encoder frames [n, ...] after `pred` [n, ...]."""
        j = self.meta["joint"]
        s = self._joint({j["enc"]: frame, j["pred"]: pred})[j["scores"]].astype(np.float32)
        s = s - s.max(axis=-1, keepdims=True)
        return s - np.log(np.exp(s).sum(axis=-1, keepdims=True))

    def search(
        self,
        enc: np.ndarray,
        lens: np.ndarray,
        method: str | None = None,
        beam: int | None = None,
        max_sym_per_frame: int | None = None,
    ) -> tuple[list[list[int]], list[float]]:
        """Each sequence's best labels and score over encoder frames enc [batch, time, ...] (`lens`
        frames each): `greedy` (up to max_sym_per_frame symbols a frame, each the best class,
        until the blank) or `modified` (icefall's: a symbol per hypothesis and frame, the best
        `beam` (hypothesis, class) pairs, equal label sequences merged); by default the network's."""
        m = self.meta
        method = method or m["method"]
        beam = int(beam or m["beam"])
        max_sym = int(max_sym_per_frame or m["max_sym_per_frame"])
        if method not in ("greedy", "modified"):
            raise ValueError(f"the host search runs `greedy` or `modified`, not {method!r}")
        found, scores = [], []
        for b in range(enc.shape[0]):
            init = [np.full(_shape(s, 1), s["init"], dtype=np.float32) for s in m["state_init"]]
            out, st = self.predict(np.full((1,), self.start), init)
            hyps = [((), 0.0, out, st)]
            for t in range(int(lens[b])):
                frame = enc[b : b + 1, t]
                if method == "greedy":
                    hyps = self._greedy(frame, hyps, max_sym)
                else:
                    hyps = self._modified(frame, hyps, beam)
            best = max(range(len(hyps)), key=lambda i: (hyps[i][1], -i))
            found.append([k - int(k > self.blank) for k in hyps[best][0]])
            scores.append(hyps[best][1])
        return found, scores

    def _advance(self, hyps, items):
        if not items:
            return []
        labels = np.array([k - int(k > self.blank) for _, k in items])
        states = [np.concatenate([hyps[p][3][j] for p, _ in items]) for j in range(len(hyps[0][3]))]
        out, st = self.predict(labels, states)
        return [(out[r : r + 1], [s[r : r + 1] for s in st]) for r in range(len(items))]

    def _lp(self, frame, hyps):
        out = np.concatenate([h[2] for h in hyps])
        return self.log_probs(np.repeat(frame, len(hyps), axis=0), out)

    def _greedy(self, frame, hyps, max_sym):
        ((labels, score, out, st),) = hyps
        for _ in range(max_sym):
            lp = self._lp(frame, [(labels, score, out, st)])[0]
            k = int(lp.argmax())  # the first of equal maxima
            score += float(lp[k])
            if k == self.blank:
                break
            ((out, st),) = self._advance([(labels, score, out, st)], [(0, k)])
            labels = labels + (k,)
        return [(labels, score, out, st)]

    def _modified(self, frame, hyps, beam):
        lp = self._lp(frame, hyps).astype(np.float64)
        n_cls = lp.shape[1]
        total = np.array([h[1] for h in hyps])[:, None] + lp
        order = np.argsort(-total.flatten(), kind="stable")[:beam]
        merged: dict[tuple, list] = {}  # label sequence -> [score, source hypothesis, class]
        for i in order.tolist():
            s = float(total.flatten()[i])
            p, k = divmod(i, n_cls)
            labels = hyps[p][0] if k == self.blank else hyps[p][0] + (k,)
            if labels in merged:
                a = merged[labels][0]
                merged[labels][0] = max(a, s) + math.log1p(math.exp(-abs(a - s)))
            else:
                merged[labels] = [s, p, k]
        grown = iter(self._advance(hyps, [(p, k) for _, p, k in merged.values() if k != self.blank]))
        return [
            (labels, s, *((hyps[p][2], hyps[p][3]) if k == self.blank else next(grown)))
            for labels, (s, p, k) in merged.items()
        ]
