"""Losses: `cross_entropy(logits, labels, axis=vocab, label_smoothing=0.0)` per frame and
`ctc_loss(logits, labels, axis=vocab_with_blank)` per sequence (mark them with `mark_as_loss`).
"""

from __future__ import annotations

import math

from netc.ir.dims import DimError
from netc.naming import Code
from netc.ops.align import where_valid
from netc.ops.base import OpDef, OutType, register
from netc.ops.nn import _float, _labels, _one_dim

SMOOTHED_CE_HELPER = "label_smoothed_cross_entropy"
SMOOTHED_CE_HELPER_SOURCE = f'''def {SMOOTHED_CE_HELPER}(source, self, axis_dim, label_smoothing, **_kwargs):
    """RETURNN's label-smoothed cross entropy (the `ce` loss with `loss_opts={{"label_smoothing": p}}`,
    `returnn.tf.util.basic.smoothing_cross_entropy`) of logits source(0) over `axis_dim` and
    labels source(1), per frame."""
    from returnn.tf.util.basic import smoothing_cross_entropy

    out = self.output
    logits = source(0, auto_convert=False, as_data=True)
    logits = logits.copy_compatible_to(out.copy_add_dim_by_tag(axis_dim, unbroadcast=True, axis=-1))
    labels = source(1, auto_convert=False, as_data=True).copy_compatible_to(out, check_dtype=False, check_sparse=False)
    return smoothing_cross_entropy(
        logits=logits.placeholder, labels=labels.placeholder, label_smoothing=label_smoothing,
        vocab_size=axis_dim.dimension,
    )
'''


def smoothing_constants(p: float, vocab: int) -> tuple[float, float]:
    """(weight of each other class, the soft targets' entropy) of RETURNN's label smoothing:
    targets q = 1-p at the label and p/(V-1) elsewhere; the loss is the cross entropy with q minus
    q's entropy (RETURNN's "normalizing" constant, so that the best loss is 0)."""
    low = p / (vocab - 1)
    entropy = -((1.0 - p) * math.log(1.0 - p) + (vocab - 1) * low * math.log(low + 1e-20))
    return low, entropy


@register
class CrossEntropy(OpDef):
    """`cross_entropy(logits, labels, axis=vocab, label_smoothing=0.0)`: -log_softmax(logits)[label]
    per frame (RETURNN `sparse_softmax_cross_entropy_with_logits`).

    With label smoothing p, RETURNN's `ce` loss with `loss_opts={"label_smoothing": p}`: the cross
    entropy with soft targets (1-p at the label, p/(V-1) at each other class) minus the soft
    targets' entropy, which is constant (the loss is 0 when the predictions are the soft targets).
    That is torch's `cross_entropy(label_smoothing=p*V/(V-1))` minus the same constant.
    """

    name = fn_name = "cross_entropy"
    tensors = ("logits", "labels")

    def api(self, logits, labels, axis, label_smoothing=0.0):
        pass

    def returnn_helpers(self, op):
        return {SMOOTHED_CE_HELPER: SMOOTHED_CE_HELPER_SOURCE} if op.attrs.get("label_smoothing") else {}

    def infer(self, dt, args, attrs):
        logits, labels = args
        _float("cross_entropy", logits)
        axis = _one_dim(dt, logits, attrs["axis"], "cross_entropy")
        if dt[axis].kind != "static":
            raise DimError(f"`cross_entropy` needs a static class dim, `{axis}` is dynamic")
        vocab = _labels("cross_entropy", labels, dt)
        if vocab is not None and vocab != axis:
            raise DimError(f"the labels' class dim is `{vocab}`, but `axis` is `{axis}`")
        rest = tuple(d for d in logits.dims if d != axis)
        if set(rest) != set(labels.dims):
            raise DimError(
                f"labels [{', '.join(labels.dims)}] must have the logits' dims without `{axis}`: [{', '.join(rest)}]"
            )
        p, size = attrs.get("label_smoothing", 0.0), dt[axis].size
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0 - 1.0 / size:
            raise DimError(
                f"`label_smoothing` is a number from 0 to {1.0 - 1.0 / size:g} (1 - 1/|{axis}|: beyond, the "
                f"label would get less weight than each other class), got {p!r}"
            )
        return [OutType(rest)]

    def returnn(self, ctx, op):
        p = float(op.attrs.get("label_smoothing", 0.0))
        axis = ctx.dim(op.attrs["axis"])
        if p:
            out = [Code("batch_dim") if d == "batch" else ctx.dim(d) for d in op.outs[0].dims]
            return {
                "class": "eval",
                "from": [ctx.src(0), ctx.src(1)],
                "eval": Code(SMOOTHED_CE_HELPER),
                "eval_locals": {"axis_dim": axis, "label_smoothing": p},
                "out_type": {"dim_tags": out, "dtype": "float32", "sparse": False},
            }
        return {
            "class": "sparse_softmax_cross_entropy_with_logits",
            "logits": ctx.src(0),
            "targets": ctx.src(1),
            "axis": axis,
        }

    # labels' dims are the logits' dims without `axis`, both in canonical order
    def torch(self, ctx, op):
        p = ctx.in_dims(0).index(op.attrs["axis"])
        labels, dims = ctx.arg(1), ctx.in_dims(1)
        for d in dims:  # padded frames may hold anything: index 0 there, never out of range
            if ctx.is_dynamic(d):
                labels = where_valid(labels, ctx.mask(d, dims), "0")
        smoothing = float(op.attrs.get("label_smoothing", 0.0))
        if smoothing:
            size = int(ctx.size(op.attrs["axis"]))
            low, entropy = smoothing_constants(smoothing, size)
            ce = (
                f"torch.nn.functional.cross_entropy({ctx.arg(0)}.movedim({p}, 1), {labels}, "
                f"reduction='none', label_smoothing={low * size!r})"
            )
            return f"{ce} - {entropy!r}"
        return f"-torch.log_softmax({ctx.arg(0)}, dim={p}).gather({p}, {labels}.unsqueeze({p})).squeeze({p})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        p = args[0].dims.index(attrs["axis"])
        logp = torch.log_softmax(args[0].data, dim=p)
        nll = -logp.gather(p, args[1].data.long().unsqueeze(p)).squeeze(p)
        smoothing = float(attrs.get("label_smoothing", 0.0))
        if not smoothing:
            return nll
        low, entropy = smoothing_constants(smoothing, logp.shape[p])
        # soft targets: 1-p at the label, `low` elsewhere
        return (1.0 - smoothing - low) * nll + low * -logp.sum(dim=p) - entropy


@register
class CtcLoss(OpDef):
    """`ctc_loss(logits, labels, axis=vocab_with_blank)`: per sequence, -log of the probability of
    `labels` summed over all CTC alignments of the frames (softmax over `axis` per frame; blank
    is the last class of `axis`, as in RETURNN; repeated labels need a blank between them).

    logits [batch, time, vocab_with_blank], labels [batch, label_time] int32 whose class dim has
    one class less. A sequence whose labels cannot be aligned (fewer frames than labels plus
    the blanks between repeated labels) gives 0 and no gradient, as RETURNN's CTC does (and its
    `ctc` loss with `ignore_longer_outputs_than_inputs`) and torch's with `zero_infinity=True`.
    RETURNN `ctc_loss` layer (its native CTC, the numbers of `tf.nn.ctc_loss` and of the `ctc`
    loss); torch `ctc_loss`.
    """

    name = fn_name = "ctc_loss"
    tensors = ("logits", "labels")

    def api(self, logits, labels, axis):
        pass

    def infer(self, dt, args, attrs):
        logits, labels = args
        _float("ctc_loss", logits)
        axis = _one_dim(dt, logits, attrs["axis"], "ctc_loss")
        time = [d for d in logits.dims if d not in ("batch", axis)]
        if "batch" not in logits.dims or len(time) != 1 or dt[time[0]].kind != "dynamic" or dt[axis].kind != "static":
            raise DimError(f"`ctc_loss` needs logits [batch, time, {axis}], got [{', '.join(logits.dims)}]")
        vocab = _labels("ctc_loss", labels, dt)
        label_time = [d for d in labels.dims if d != "batch"]
        if "batch" not in labels.dims or len(label_time) != 1 or dt[label_time[0]].kind != "dynamic":
            raise DimError(f"`ctc_loss` needs labels [batch, label_time], got [{', '.join(labels.dims)}]")
        if label_time[0] == time[0]:
            raise DimError(f"`ctc_loss`: the labels need a dim of their own, not the logits' `{time[0]}`")
        if dt[vocab].size + 1 != dt[axis].size:
            raise DimError(
                f"`ctc_loss`: `{axis}` ({dt[axis].size}) must be the labels' class dim `{vocab}` "
                f"({dt[vocab].size}) plus the blank, e.g. `{vocab} + blank` with blank = Dim('blank', 1)"
            )
        return [OutType(("batch",))]

    def returnn(self, ctx, op):
        return {"class": "ctc_loss", "logits": ctx.src(0), "targets": ctx.src(1), "blank_index": -1}

    # canonical order: logits [batch, time, vocab], labels [batch, label_time]
    def torch(self, ctx, op):
        logits, labels = ctx.arg(0), ctx.arg(1)
        (time,) = [d for d in ctx.in_dims(0) if ctx.is_dynamic(d)]
        (label_time,) = [d for d in ctx.in_dims(1) if ctx.is_dynamic(d)]
        labels = where_valid(labels, ctx.mask(label_time, ctx.in_dims(1)), "0")
        # CTC on the CPU has no bfloat16/half kernel: at least float32
        log_probs = f"torch.log_softmax({logits}, -1, dtype=torch.promote_types({logits}.dtype, torch.float32))"
        blank = int(ctx.size(op.attrs["axis"])) - 1
        ctc = (
            f"torch.nn.functional.ctc_loss({log_probs}.transpose(0, 1), {labels}, {ctx.seq_lens(time)}, "
            f"{ctx.seq_lens(label_time)}, blank={blank}, reduction='none', zero_infinity=True).to({logits}.dtype)"
        )
        # torch has no CTC for the meta device (shapes only): the result's shape there
        return f"({ctc} if {logits}.device.type != 'meta' else {logits}.new_empty({ctx.size('batch')}))"

    def eager(self, ctx, args, attrs, outs):
        import torch

        logp = torch.log_softmax(args[0].data[0], dim=-1)  # [time, classes]: one sequence
        loss = ctc_neg_log_prob(logp, args[1].data[0].tolist())
        return torch.where(torch.isinf(loss), 0.0, loss).reshape(1)  # labels that cannot be aligned


def ctc_frames_needed(labels: list[int]) -> int:
    """The fewest frames CTC aligns `labels` to: one per label, and a blank between repeats."""
    return len(labels) + sum(a == b for a, b in zip(labels, labels[1:]))


def ctc_neg_log_prob(logp, labels: list[int]):
    """-log p(labels | frames) by the CTC forward algorithm in log space; blank is the last class."""
    import torch

    blank = logp.shape[1] - 1
    ext = [blank]  # blank, l1, blank, l2, ..., blank
    for label in labels:
        ext += [label, blank]
    n = len(ext)
    # a state may also come from two back: a label after a blank that follows another label
    skip = torch.tensor([s >= 2 and ext[s] != blank and ext[s] != ext[s - 2] for s in range(n)])
    neg_inf = torch.tensor(float("-inf"), dtype=logp.dtype)
    alpha = torch.full((n,), float("-inf"), dtype=logp.dtype)
    if logp.shape[0] == 0:
        return -neg_inf
    alpha[0] = logp[0, blank]
    if n > 1:
        alpha[1] = logp[0, ext[1]]
    for t in range(1, logp.shape[0]):
        one_back = torch.cat([neg_inf.reshape(1), alpha[:-1]])
        two_back = torch.where(skip, torch.cat([neg_inf.expand(2), alpha[:-2]])[:n], neg_inf)  # n 1: no labels
        alpha = torch.logsumexp(torch.stack([alpha, one_back, two_back]), dim=0) + logp[t, ext]
    return -torch.logsumexp(alpha[-2:], dim=0)


PER_SEQUENCE_HELPER = "per_sequence_loss_norm"
PER_SEQUENCE_HELPER_SOURCE = f'''def {PER_SEQUENCE_HELPER}(output, **_kwargs):
    """A loss reported per sequence (`ctc_loss` gives one value per sequence): RETURNN's `ctc` loss
    would report it per frame of its logits."""
    import tensorflow as tf

    return 1.0 / tf.cast(output.get_batch_dim(), tf.float32)
'''


def returnn_loss(layer: dict) -> tuple[str, str, dict, dict[str, str]] | None:
    """RETURNN's own loss for a loss layer made above: (the logits layer, the target's data key,
    the options that give a `softmax` layer over those logits the same summed loss and the same
    normalisation, the helpers they call), or None for any other layer. `ctc` with `use_native`
    is the native CTC of the `ctc_loss` layer (blank last)."""
    cls = layer.get("class")
    if cls == "eval" and layer.get("eval") == SMOOTHED_CE_HELPER:
        logits, labels = layer["from"]
        opts = {"loss": "ce", "loss_opts": {"label_smoothing": layer["eval_locals"]["label_smoothing"]}}
        helpers: dict[str, str] = {}
    elif cls == "sparse_softmax_cross_entropy_with_logits":
        logits, labels, opts, helpers = layer["logits"], layer["targets"], {"loss": "ce"}, {}
    elif cls == "ctc_loss" and layer.get("blank_index") == -1:
        logits, labels = layer["logits"], layer["targets"]
        # beam_width 1: the native CTC's label error is a greedy decoding
        native = {"use_native": True, "beam_width": 1, "custom_norm_factor": Code(PER_SEQUENCE_HELPER)}
        opts = {"loss": "ctc", "loss_opts": native}
        helpers = {PER_SEQUENCE_HELPER: PER_SEQUENCE_HELPER_SOURCE}
    else:
        return None
    if not isinstance(labels, str) or not labels.startswith("data:"):
        return None
    return logits, labels[len("data:") :], opts, helpers
