"""`choice`: the label a decoder step takes, RETURNN's `choice` layer.

In training a loop with a `choice` runs over its target's frames and the choice is the
reference label (teacher forcing). Searching, it is one step of a beam search, exactly as
RETURNN's `ChoiceLayer` (`returnn/tf/layers/rec.py`) does it, so the three targets agree:

- a hypothesis' score is the sum of its labels' log-probabilities (the op's first operand:
  the parser inserts `log_softmax` of the user's scores, or `log` of probabilities, as
  `choice`'s `input_type` says; "log_prob" scores are used as they are);
- a hypothesis that has ended continues with label 0 at score 0 (every other label -1e30);
- with `length_normalization` (RETURNN's default), at step t > 0 the score of a hypothesis
  that had ended is multiplied by (t + 1) / t, so ended and running hypotheses compare by
  score per step;
- several choices in one step (hard attention: a position, then a label) each take the top
  `beam` continuations of the hypotheses the one before made, by accumulated score; each
  filters ended hypotheses and normalises their scores as above (RETURNN's `choice` layers
  each do, given the previous step's end flags);
- the first step's first choice expands only the first hypothesis (all start equal); then the top `beam`
  of (hypothesis, label) pairs by score survive, ties to the lower flat index; where there are
  fewer pairs than `beam` (the first step with a beam above the class dim's size), the others
  continue the first hypothesis with label 0 at score -inf (RETURNN's `beam_search`), so they
  never win and drop out once enough pairs exist (a pair at -inf taken at a later step, still
  too few, is made such a continuation too; RETURNN takes the first pair at -inf, which can
  change how many steps the search runs, never what it returns);
- `sample=True` draws instead (`torch_sample_step`): each hypothesis its own next label, from
  the softmax of its scores, and adds that label's log-probability to its score;
- in the end, each sequence's best hypothesis is the one with the highest score (`decide`);
  with `length_normalization` the scores are then divided by the number of steps the search
  ran, which makes each the sum of its log-probabilities divided by its length.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.naming import Code
from netc.ops.base import OpDef, OutType, register

ENDED_OTHER_SCORE = -1.0e30  # RETURNN's `filter_ended_scores`


@register
class Choice(OpDef):
    name = "choice"  # called as `choice(...)`, which the parser handles (it shapes the loop)
    tensors = ("logp", "frame")
    pure = False  # a search step: never moved out of its loop
    shapes_loop = True  # a search with a label nothing reads still searches (and trains on the target)
    loop_role = "choice"

    def infer(self, dt, args, attrs):
        logp, frame = args
        if logp.dtype != "float32" or frame.dtype != "int32" or frame.sparse_dim is None:
            raise DimError("choice takes float log-probabilities and int32 labels")
        return [OutType(("batch",), "int32", sparse_dim=frame.sparse_dim)]

    def returnn(self, ctx, op):
        if op.attrs.get("sample"):
            from netc.errors import CompileError

            raise CompileError(
                op.span,
                "RETURNN target: `choice(..., sample=True)` is not expressible: RETURNN's `choice` samples "
                "only by adding unseeded Gumbel noise to a beam search's scores (`random_sample_scale`), "
                "which neither draws each hypothesis on its own nor gives netc's draws; sample with "
                "eager mode or the torch module",
            )
        if _positions_dim(ctx):  # the scores made the feature axis; the choice is the extra layer
            return {"class": "reinterpret_data", "from": ctx.src(0), "set_axes": {"f": ctx.dim(_positions_dim(ctx))}}
        return self._layer(ctx.src(0), op)

    def returnn_extra(self, ctx, layer, own, op, fresh):
        """Positions (a hard attention's choice over an encoder's frames, a dynamic dim): RETURNN's
        `choice` chooses over its input's feature axis, so the scores are reinterpreted with that
        dim as the feature axis first (as RETURNN's hard attention configs do). The padded frames
        score -inf already (the `log_softmax` over the frames masks them)."""
        if not _positions_dim(ctx):
            return {}
        return {0: (fresh(op.hint()), self._layer(layer, op))}

    @staticmethod
    def _layer(src: str, op) -> dict:
        return {
            "class": "choice",
            "from": src,
            # None for a computed target (training's only: the classes are the scores' feature dim)
            "target": op.attrs["target"],
            "beam_size": op.attrs["beam"],
            "input_type": "log_prob",
            "length_normalization": op.attrs["length_normalization"],
        }

    def torch(self, ctx, op):
        return ctx.arg(1)  # training: the reference label (the search is `TorchEmitter.search`)

    def eager(self, ctx, args, attrs, outs):
        return args[1].data


@register
class MaskPadding(OpDef):
    """Scores over a dynamic dim at -inf on its padded frames: what a `choice` over an encoder's
    frames gets where its scores are not from a softmax over them (which masks them already), so a
    padded frame is never chosen. Made by the parser (`choice`), not called by users."""

    name = "mask_padding"
    tensors = ("x",)

    def infer(self, dt, args, attrs):
        axis = attrs["axis"]
        if args[0].dtype != "float32" or axis not in args[0].dims or dt[axis].kind != "dynamic":
            raise DimError(f"`mask_padding` takes float scores over the dynamic dim `{axis}`")
        return [OutType(args[0].dims)]

    def returnn(self, ctx, op):
        axis = ctx.dim(op.attrs["axis"])
        return {"class": "seq_len_mask", "from": ctx.src(0), "axis": axis, "mask_value": Code('float("-inf")')}

    def torch(self, ctx, op):
        from netc.ops.align import where_valid

        return where_valid(ctx.arg(0), ctx.mask(op.attrs["axis"], ctx.in_dims(0)), "float('-inf')")

    def eager(self, ctx, args, attrs, outs):
        return args[0].data  # eager mode runs each sequence on its own: no padded frames


def _positions_dim(ctx) -> str | None:
    """The scores' dim where they are over a dynamic one (positions in an encoder's frames)."""
    (dim,) = [d for d in ctx.in_dims(0) if d != "batch"]
    return dim if ctx.is_dynamic(dim) else None


def torch_beam_step(name: str) -> str:
    """The emitted torch module's beam search step (module level, named `name`), as above."""
    return f'''def {name}(logp, scores, ended, t: int, beam: int, length_normalization: bool, first: bool = True):
    """One step of RETURNN's beam search (its `choice` layer) for [batch * beam] hypotheses:
    the labels, scores [batch, beam] and source hypotheses of the best `beam` continuations.
    `first`: the step's first choice (a later one extends every hypothesis, also at step 0)."""
    batch, labels = scores.shape[0], logp.shape[-1]
    ended_scores = torch.full((labels,), {ENDED_OTHER_SCORE!r}, dtype=logp.dtype, device=logp.device)
    ended_scores[0] = 0.0  # a hypothesis that has ended continues with label 0 at no cost
    logp = torch.where(ended[:, None], ended_scores, logp).view(batch, -1, labels)
    if length_normalization and t > 0:  # ended ones compare by score per step
        scores = scores * torch.where(ended.view(batch, -1), (t + 1) / t, 1.0)
    combined = scores[:, :, None] + logp
    if t == 0 and first:  # all hypotheses start equal: continue the first only
        combined = combined[:, :1]
    k = min(beam, combined.shape[1] * labels)  # fewer continuations than the beam: the first step
    scores, best = combined.flatten(1).topk(k, dim=1)
    if k < beam:  # as RETURNN: the others continue the first hypothesis with label 0 at score -inf
        rest = (batch, beam - k)
        scores = torch.cat([scores, torch.full(rest, float("-inf"), dtype=scores.dtype, device=logp.device)], 1)
        best = torch.cat([best, torch.zeros(rest, dtype=best.dtype, device=logp.device)], 1)
    best = torch.where(scores == float("-inf"), torch.zeros_like(best), best)  # such ones, whatever ties say
    first = torch.arange(batch, device=logp.device)[:, None] * beam
    return (best % labels).flatten(), scores, (best // labels + first).flatten()'''


def torch_beam_step_scan(name: str) -> str:
    """The beam search step of a search emitted with `--loops scan` (torch's `while_loop`): the
    step `t` is a tensor there, so its two cases are `torch.where`s, not Python branches (the
    same numbers: the first step's other hypotheses score -inf, which `topk` takes only where
    there are fewer continuations than the beam)."""
    return f'''def {name}(logp, scores, ended, t: torch.Tensor, beam: int, length_normalization: bool, first: bool = True):
    """One step of RETURNN's beam search (its `choice` layer) for [batch * beam] hypotheses:
    the labels, scores [batch, beam] and source hypotheses of the best `beam` continuations.
    `first`: the step's first choice (a later one extends every hypothesis, also at step 0)."""
    batch, labels = scores.shape[0], logp.shape[-1]
    label_ids = torch.arange(labels, device=logp.device)
    # a hypothesis that has ended continues with label 0 at no cost
    ended_scores = torch.where(label_ids == 0, 0.0, {ENDED_OTHER_SCORE!r}).to(logp.dtype)
    logp = torch.where(ended[:, None], ended_scores, logp).view(batch, -1, labels)
    if length_normalization:  # after the first step, ended ones compare by score per step
        scores = scores * torch.where(ended.view(batch, -1) & (t > 0), (t + 1) / t.clamp(min=1), 1.0)
    combined = scores[:, :, None] + logp
    # all hypotheses start equal: the first step continues the first only
    others = (t == 0) & first & (torch.arange(combined.shape[1], device=logp.device) > 0)
    combined = torch.where(others[None, :, None], float("-inf"), combined)
    scores, best = combined.flatten(1).topk(beam, dim=1)
    # fewer continuations than the beam (its first step): the others continue the first
    # hypothesis with label 0 at score -inf, as RETURNN pads them, whichever ties topk took
    best = torch.where(scores == float("-inf"), torch.zeros_like(best), best)
    first = torch.arange(batch, device=logp.device)[:, None] * beam
    return (best % labels).flatten(), scores, (best // labels + first).flatten()'''


def torch_sample_step(name: str, scan: bool = False) -> str:
    """The step of a sampling search (`choice(..., sample=True)`), with the beam step's signature
    and the draws' `seed` and the first sequence's index in the batch (eager mode runs one at a
    time). Gumbel-max: each hypothesis takes the label maximising its log-probability plus
    Gumbel noise, which is hashed from (seed, sequence, hypothesis, step, label) with integer
    arithmetic, so eager mode and the torch module (any batch, any device) draw the same labels.
    `scan`: the step `t` is a tensor (torch's `while_loop`)."""
    t_type = "torch.Tensor" if scan else "int"
    if scan:
        norm = """if length_normalization:  # after the first step, ended ones compare by score per step
        scores = scores * torch.where(ended.view(batch, -1) & (t > 0), (t + 1) / t.clamp(min=1), 1.0)"""
    else:
        norm = """if length_normalization and t > 0:  # ended ones compare by score per step
        scores = scores * torch.where(ended.view(batch, -1), (t + 1) / t, 1.0)"""
    return f'''def {name}(
    logp, scores, ended, t: {t_type}, beam: int, length_normalization: bool, seed: int, first_seq: int
):
    """One step of a sampling search for [batch * beam] hypotheses: each draws its next label
    from the softmax of its scores; the labels, scores [batch, beam] and the hypotheses they
    continue (themselves; at eager mode's first step, its one row)."""
    batch, labels = scores.shape[0], logp.shape[-1]
    label_ids = torch.arange(labels, device=logp.device)
    # a hypothesis that has ended continues with label 0 at no cost
    ended_scores = torch.where(label_ids == 0, 0.0, {ENDED_OTHER_SCORE!r}).to(logp.dtype)
    logp = torch.where(ended[:, None], ended_scores, logp).view(batch, -1, labels)
    hyps = logp.shape[1]  # `beam`, or 1 where all hypotheses start from one row
    {norm}
    logp, scores = logp.expand(batch, beam, labels), scores.expand(batch, beam)
    seq = torch.arange(batch, device=logp.device)[:, None, None] + first_seq
    hyp = torch.arange(beam, device=logp.device)[None, :, None]
    # uniform noise hashed from (seed, sequence, hypothesis, step, label): 32-bit integer mixing
    x = (((seq * beam + hyp) * 1000003 + t) * labels + label_ids + seed * 40503) & 0xFFFFFFFF
    x = ((x >> 16) ^ x) * 0x45D9F3B & 0xFFFFFFFF
    x = ((x >> 16) ^ x) * 0x45D9F3B & 0xFFFFFFFF
    u = (((x >> 16) ^ x).to(torch.float64) + 0.5) / 4294967296.0
    label = (logp.to(torch.float64) - torch.log(-torch.log(u))).argmax(-1)
    scores = scores + logp.gather(-1, label[:, :, None])[:, :, 0]
    first = torch.arange(batch, device=logp.device)[:, None] * hyps
    src = first + torch.arange(beam, device=logp.device)[None, :] if hyps == beam else first.expand(batch, beam)
    return label.flatten(), scores, src.flatten()'''
