"""`transducer_search`: decoding a transducer (RNN-T) from its prediction and joint networks.

`labels, scores = transducer_search(enc, axis=enc_time, predict=prediction, joint=joint,
state=(h, c), label_dim=vocab, start=BOS, blank=BLANK, beam=4, method="modified",
max_sym_per_frame=1, out_axis=dec_time)`: `predict(label, state) -> (out, state)` and
`joint(enc_frame, out) -> scores` are the training network's modules (or functions), traced once
into the op's two regions; the search calls them on rows of hypotheses. Each sequence's best label
sequence (over `label_dim`, along the new dynamic `out_axis`) and its score come back.

The four methods (docs/language.md "Transducers" defines them; `log p` is `log_softmax` of the
joint's scores over vocab + blank; a hypothesis is a label sequence, its score, and the prediction
network's output and state after its last label, the start label before the first):

- `greedy`: per frame up to `max_sym_per_frame` symbols, each the best class, until the blank;
  the score adds the log p of every symbol taken (the blank that ends a frame included);
- `modified` (icefall's `modified_beam_search`): per frame each hypothesis takes one symbol (a
  label or the blank); of all (hypothesis, class) pairs the best `beam` by score survive, those
  with equal label sequences merged into one (their scores log-added, the first's state kept);
- `time_sync` (ESPnet's `time_sync_decoding`, the time-synchronous search of Saon et al. 2020):
  per frame, up to `max_sym_per_frame` expansions: the current set's hypotheses end the frame with
  the blank (into the frame's results, equal label sequences merged by log-add) and, but at the
  last expansion, each continues with its best `beam` labels, of which the best `beam` overall
  are the next set; the frame's best `beam` results go on.
- `graves` (torchaudio's `RNNTBeamSearch`, ESPnet's `default` beam search, after Graves 2012):
  as `time_sync`, the frame's results B and the expanding set A, but A's next set is the best
  `beam` of all (hypothesis, label) pairs whose score beats B's `beam`-th best, and a frame's
  expansions stop when none does.

Ties go to the lower index (hypotheses in order, then classes): every sort is stable, so eager
and torch, which run this same code, agree with tests' plain-Python reference.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.base import OpDef, OutType, register

METHODS = ("greedy", "modified", "time_sync", "graves")

HELPER = "transducer_search"


def helper_source(name: str) -> str:
    """The search for a batch of sequences, one sequence at a time with its hypotheses batched:
    `predict(labels [n], *state) -> (out, *state)`, `joint(frames [n, ...], out) -> scores`."""
    return f'''def {name}(enc, lens, state, predict, joint, start: int, blank: int, beam: int, method: str, max_sym: int):
    """Transducer search (netc's `transducer_search`) of enc [batch, time, ...] with each sequence's
    frames `lens` from the prediction network's state (a tuple of [batch, ...]): each sequence's best
    labels [batch, labels] (padded with 0), their number [batch] and their score [batch]."""
    import math

    def log_add(a: float, b: float) -> float:
        return max(a, b) + math.log1p(math.exp(-abs(a - b)))

    def advance(hyps, items):
        # the prediction network after label class k of hypothesis p, for each (p, k): one call
        if not items:
            return []
        labels = torch.tensor([k - int(k > blank) for _, k in items], dtype=torch.long, device=enc.device)
        st = [torch.cat([hyps[p][3][j] for p, _ in items]) for j in range(len(state))]
        out, *st = predict(labels, *st)
        return [(out[r : r + 1], tuple(s[r : r + 1] for s in st)) for r in range(len(items))]

    def log_probs(frame, hyps):
        out = torch.cat([h[2] for h in hyps])
        scores = joint(frame.expand(len(hyps), *frame.shape[1:]), out)
        return torch.log_softmax(scores.float(), dim=-1)

    def greedy(frame, hyps):
        ((labels, score, out, st),) = hyps
        for _ in range(max_sym):
            lp = log_probs(frame, [(labels, score, out, st)])[0]
            k = int(lp.argmax())  # the first of equal maxima (torch documents it)
            score += float(lp[k])
            if k == blank:
                break
            ((out, st),) = advance([(labels, score, out, st)], [(0, k)])
            labels = labels + (k,)
        return [(labels, score, out, st)]

    def modified(frame, hyps):
        lp = log_probs(frame, hyps)
        n_cls = lp.shape[1]
        total = torch.tensor([h[1] for h in hyps], dtype=torch.float64, device=lp.device)[:, None] + lp.double()
        top = torch.sort(total.flatten(), descending=True, stable=True)
        merged = {{}}  # label sequence -> [score, source hypothesis, class]
        for s, i in zip(top.values[:beam].tolist(), top.indices[:beam].tolist()):
            p, k = divmod(i, n_cls)
            labels = hyps[p][0] if k == blank else hyps[p][0] + (k,)
            if labels in merged:
                merged[labels][0] = log_add(merged[labels][0], s)
            else:
                merged[labels] = [s, p, k]
        grown = iter(advance(hyps, [(p, k) for _, p, k in merged.values() if k != blank]))
        return [
            (labels, s, *((hyps[p][2], hyps[p][3]) if k == blank else next(grown)))
            for labels, (s, p, k) in merged.items()
        ]

    def time_sync(frame, hyps):
        done = {{}}  # label sequence -> [score, out, state]: ended this frame with the blank
        level = hyps
        for v in range(max_sym + 1):
            lp = log_probs(frame, level)
            for (labels, s, out, st), lp_blank in zip(level, lp[:, blank].tolist()):
                if labels in done:
                    done[labels][0] = log_add(done[labels][0], s + lp_blank)
                else:
                    done[labels] = [s + lp_blank, out, st]
            if v == max_sym:
                break
            labels_only = lp.double().index_fill(1, torch.tensor([blank], device=lp.device), float("-inf"))
            top = torch.sort(labels_only, dim=1, descending=True, stable=True)
            each = min(beam, lp.shape[1] - 1)
            items = [
                (level[p][1] + v_k, p, k)
                for p in range(len(level))
                for v_k, k in zip(top.values[p, :each].tolist(), top.indices[p, :each].tolist())
            ]
            chosen = sorted(items, key=lambda item: -item[0])[:beam]
            grown = advance(level, [(p, k) for _, p, k in chosen])
            level = [(level[p][0] + (k,), s, *g) for (s, p, k), g in zip(chosen, grown)]
        ranked = sorted(done.items(), key=lambda kv: -kv[1][0])[:beam]
        return [(labels, s, out, st) for labels, (s, out, st) in ranked]

    def graves(frame, hyps):
        done = {{}}  # label sequence -> (score, out, state): ended with the blank, a merged one moved last
        level = hyps
        for v in range(max_sym + 1):
            lp = log_probs(frame, level)
            for (labels, s, out, st), lp_blank in zip(level, lp[:, blank].tolist()):
                s = s + lp_blank
                if labels in done:
                    s = log_add(done.pop(labels)[0], s)
                done[labels] = (s, out, st)
            if v == max_sym:
                break
            ended = sorted((d[0] for d in done.values()), reverse=True)
            bar = ended[beam - 1] if len(ended) >= beam else float("-inf")  # the beam-th ended score
            total = torch.tensor([h[1] for h in level], dtype=torch.float64, device=lp.device)[:, None] + lp.double()
            total[:, blank] = float("-inf")
            top = torch.sort(total.flatten(), descending=True, stable=True)
            chosen = [
                (s, *divmod(i, lp.shape[1]))
                for s, i in zip(top.values[:beam].tolist(), top.indices[:beam].tolist())
                if s > bar
            ]
            if not chosen:
                break
            grown = advance(level, [(p, k) for _, p, k in chosen])
            level = [(level[p][0] + (k,), s, *g) for (s, p, k), g in zip(chosen, grown)]
        ranked = sorted(done.items(), key=lambda kv: -kv[1][0])[:beam]
        return [(labels, s, out, st) for labels, (s, out, st) in ranked]

    step = {{"greedy": greedy, "modified": modified, "time_sync": time_sync, "graves": graves}}[method]
    found, scores = [], []
    for b in range(enc.shape[0]):
        first = torch.full((1,), start, dtype=torch.long, device=enc.device)
        out, *st = predict(first, *(s[b : b + 1] for s in state))
        hyps = [((), 0.0, out, tuple(st))]
        for t in range(int(lens[b])):
            hyps = step(enc[b : b + 1, t], hyps)
        best = max(range(len(hyps)), key=lambda i: (hyps[i][1], -i))  # the first of the best
        found.append([k - int(k > blank) for k in hyps[best][0]])
        scores.append(hyps[best][1])
    labels = torch.zeros((len(found), max(map(len, found), default=0)), dtype=torch.long, device=enc.device)
    for b, ys in enumerate(found):
        labels[b, : len(ys)] = torch.tensor(ys, dtype=torch.long, device=enc.device)
    n_labels = torch.tensor([len(ys) for ys in found], dtype=torch.long, device=enc.device)
    return labels, n_labels, torch.tensor(scores, dtype=torch.float64, device=enc.device)'''


@register
class TransducerSearch(OpDef):
    """`transducer_search(...)` (the parser traces its `predict` and `joint` into `Op.regions`):
    args enc and the prediction network's initial state; results the best labels [batch, out_axis]
    over `label_dim` and their scores [batch]. torch and eager run the search as `helper_source`;
    RETURNN has no layer for it (a located error at compile)."""

    name = "transducer_search"  # called as `transducer_search(...)`, which the parser handles
    tensors = ("enc", "state")
    python_only = "runs its search in Python (hypotheses in lists and dicts, its functions passed as values)"

    def makes_dims(self, attrs):
        return [attrs["out_axis"]]

    def infer(self, dt, args, attrs):
        enc = args[0]
        axis, out_axis, label_dim = attrs["axis"], attrs["out_axis"], attrs["label_dim"]
        if enc.dtype != "float32" or "batch" not in enc.dims or axis not in enc.dims or dt[axis].kind != "dynamic":
            raise DimError(f"`transducer_search` needs float enc [batch, {axis}, ...] with `{axis}` dynamic")
        if out_axis not in dt.dims or dt[out_axis].kind != "dynamic" or out_axis in enc.dims:
            raise DimError(f"`transducer_search` needs `out_axis` to be a dynamic dim of its own, got `{out_axis}`")
        if label_dim not in dt.dims or dt[label_dim].kind != "static":
            raise DimError(f"`transducer_search` needs `label_dim` to be a static dim, got `{label_dim}`")
        if attrs["method"] not in METHODS:
            raise DimError(f"`transducer_search` method must be one of {', '.join(map(repr, METHODS))}")
        for key in ("beam", "max_sym_per_frame"):
            v = attrs[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise DimError(f"`transducer_search` needs `{key}` to be an int >= 1, got {v!r}")
        size = dt[label_dim].size
        start = attrs["start"]
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < size:
            raise DimError(f"`transducer_search` needs `start` to be a label of `{label_dim}` (0 to {size - 1})")
        b = attrs["blank"]
        if isinstance(b, bool) or not isinstance(b, int) or not -(size + 1) <= b <= size:
            raise DimError(f"`transducer_search` needs `blank` to be a class of the joint's {size + 1}, got {b!r}")
        for s in args[1:]:
            if "batch" not in s.dims or dt.dynamic(s.dims):
                raise DimError(
                    f"`transducer_search`'s state must be [batch, static dims...], got [{', '.join(s.dims)}]"
                )
        return [OutType(("batch", out_axis), "int32", sparse_dim=label_dim), OutType(("batch",))]

    def returnn(self, ctx, op):
        from netc.errors import CompileError

        raise CompileError(
            op.span,
            "RETURNN target: `transducer_search` has no RETURNN equivalent (its hypotheses take several "
            "symbols per frame or merge by label sequence); compile it with `--target torch`, or decode "
            "one label per frame with `choice` (docs/language.md, Transducers)",
        )

    def torch_helpers(self, op):
        return {HELPER: helper_source}

    def _var(self, op) -> str:
        return f"_search{op.outs[0].id}"  # the search's results (see torch_made_dims)

    def torch_made_dims(self, ctx, op):
        # the lengths come with the search's result: its call defines them, and the op's line
        # (after this one) reads the labels and scores from the same tuple
        a = op.attrs
        rest = tuple(d for d in op.regions[1].args[0].dims if d != "batch")
        enc = ctx.aligned(0, ("batch", a["axis"], *rest))
        state = "".join(f"{ctx.arg(i)}, " for i in range(1, len(op.args)))
        blank = a["blank"] % a["classes"]
        call = (
            f"{ctx.helper(HELPER)}({enc}, {ctx.seq_lens(a['axis'])}, ({state}), {ctx.region(0)}, "
            f"{ctx.region(1)}, {a['start']}, {blank}, {a['beam']}, {a['method']!r}, {a['max_sym_per_frame']})"
        )
        var = self._var(op)
        return {a["out_axis"]: (f"({var} := {call})[1]", f"{var}[0].shape[1]")}

    def torch(self, ctx, op):
        var = self._var(op)
        return f"{var}[0], {var}[2].to({ctx.float_dtype})"

    def eager(self, ctx, args, attrs, outs):
        raise AssertionError("eager mode runs `transducer_search` as netc_runtime.eager_transducer does")
