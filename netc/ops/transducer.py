"""The RNN-T loss (Graves 2012): `rnnt_loss(logits, labels, axis=vocab + blank, time_axis=time)`.

logits [batch, time, pred, vocab+blank] are a joint network's scores at every point (t, u) of the
(time, label) lattice: `pred` has one frame per label plus one (the prediction network's output
before any label, after the first, ..., after all U of them), so each sequence's `pred` length is
its label length + 1. The loss is -log of the probability of `labels` summed over all alignments:
paths from (0, 0) that either emit the next label (u -> u+1, same frame) or a blank (t -> t+1),
ending with a blank from (T-1, U). Labels' class dim has one class less than `axis` (`vocab` for
`vocab + blank`); label k is class k of `axis` below the blank and k + 1 from it on (the blank
last, `blank_index=-1`, the default: label k is class k).

All three targets compute the forward variables alpha in log space over the lattice's
anti-diagonals n = t + u (each diagonal one vectorised step, from the previous one only). A cell
no path reaches holds -1e30, not -inf: logaddexp of two unreachable cells keeps a finite gradient.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.naming import Code
from netc.ops.align import where_valid
from netc.ops.base import OpDef, OutType, register
from netc.ops.nn import _float, _labels

UNREACHED = -1e30  # log of a probability no path reaches, finite (see the module's docstring)

TF_HELPER = "rnnt_loss_forward"
TF_HELPER_SOURCE = f'''def {TF_HELPER}(source, time_dim, pred_dim, classes_dim, blank, **_kwargs):
    """RNN-T loss (Graves 2012) per sequence of logits source(0) [batch, time, pred, classes] and
    labels source(1) [batch, labels] (classes without the blank; `blank` is the blank's class): the
    forward variables in log space over the anti-diagonals of the (time, label) lattice."""
    import tensorflow as tf

    logits = source(0, auto_convert=False, as_data=True)
    logits = logits.copy_transpose([logits.batch_dim_axis] + [logits.get_axis_from_description(d) for d in (time_dim, pred_dim, classes_dim)])
    labels = source(1, auto_convert=False, as_data=True).copy_as_batch_major()
    label_axis = [a for a in range(labels.batch_ndim) if a != labels.batch_dim_axis][0]
    frames = logits.get_dynamic_size(1)
    label_lens = labels.get_dynamic_size(label_axis)
    logp = tf.nn.log_softmax(logits.placeholder, axis=-1)
    n_b, n_t, n_u1 = tf.shape(logp)[0], tf.shape(logp)[1], tf.shape(logp)[2]
    lab = tf.where(labels.get_sequence_mask_broadcast(axis=label_axis), labels.placeholder, 0)
    lab = lab + tf.cast(lab >= blank, lab.dtype)
    lab = tf.pad(lab[:, : n_u1], [[0, 0], [0, n_u1 - tf.minimum(tf.shape(lab)[1], n_u1)]])  # one per pred frame
    lp_blank = tf.transpose(logp[:, :, :, blank], [1, 2, 0])  # [time, pred, batch]
    lp_label = tf.gather(logp, tf.tile(lab[:, None, :], [1, n_t, 1]), axis=3, batch_dims=3)
    lp_label = tf.transpose(lp_label, [1, 2, 0])  # [time, pred, batch]: the label after pred frame u
    t = tf.range(n_t)
    neg = tf.constant({UNREACHED!r}, logp.dtype)
    alpha0 = tf.where(tf.equal(t, 0)[:, None], tf.zeros([n_t, n_b], logp.dtype), neg)  # [time, batch]

    def step(alpha, n):
        u = n - t  # cell (t, n - t) of diagonal n; alpha holds diagonal n - 1: (t, n - 1 - t)
        by_blank = tf.gather_nd(lp_blank, tf.stack([tf.maximum(t - 1, 0), tf.clip_by_value(u, 0, n_u1 - 1)], -1))
        by_blank = tf.concat([tf.fill([1, n_b], neg), alpha[:-1] + by_blank[1:]], 0)  # from (t - 1, u)
        by_label = alpha + tf.gather_nd(lp_label, tf.stack([t, tf.clip_by_value(u - 1, 0, n_u1 - 1)], -1))
        on = (u >= 0) & (u < n_u1)
        by_blank = tf.where((on & (t >= 1))[:, None], by_blank, neg)
        by_label = tf.where((on & (u >= 1))[:, None], by_label, neg)
        return tf.reduce_logsumexp(tf.stack([by_blank, by_label]), axis=0)

    diags = tf.scan(step, tf.range(1, n_t + n_u1 - 1), initializer=alpha0)
    diags = tf.concat([alpha0[None], diags], 0)  # [diagonal, time, batch]
    last_t = tf.maximum(tf.cast(frames, tf.int32) - 1, 0)
    u_end = tf.cast(label_lens, tf.int32)
    b = tf.range(n_b)
    end = tf.gather_nd(diags, tf.stack([last_t + u_end, last_t, b], -1))
    return -(end + tf.gather_nd(lp_blank, tf.stack([last_t, u_end, b], -1)))
'''


def _torch_helper(name: str) -> str:
    return f'''def {name}(logits, labels, frames, label_lens, blank: int):
    """RNN-T loss (Graves 2012) per sequence of logits [batch, time, pred, classes] and labels
    [batch, labels] (classes without the blank, padded frames any valid class; `blank` is the
    blank's class), with each sequence's frames and label lengths: the forward variables in log
    space over the anti-diagonals of the (time, label) lattice, each diagonal one step."""
    logp = torch.log_softmax(logits, -1, dtype=torch.promote_types(logits.dtype, torch.float32))
    n_b, n_t, n_u1, _ = logp.shape
    lab = labels + (labels >= blank).to(labels.dtype)
    lab = torch.nn.functional.pad(lab[:, :n_u1], (0, n_u1 - min(lab.shape[1], n_u1)))  # one per pred frame
    lp_blank = logp[..., blank]  # [batch, time, pred]
    lp_label = logp.gather(3, lab[:, None, :, None].expand(n_b, n_t, n_u1, 1)).squeeze(3)  # the label after u
    t = torch.arange(n_t, device=logp.device)
    alpha = logp.new_full((n_b, n_t), {UNREACHED!r})  # diagonal 0: the cell (0, 0)
    alpha[:, 0] = 0.0
    diags = [alpha]
    for n in range(1, n_t + n_u1 - 1):
        u = n - t  # cell (t, n - t) of diagonal n; alpha holds diagonal n - 1: (t, n - 1 - t)
        by_blank = alpha[:, :-1] + lp_blank[:, (t - 1).clamp(min=0), u.clamp(0, n_u1 - 1)][:, 1:]
        by_blank = torch.cat([alpha.new_full((n_b, 1), {UNREACHED!r}), by_blank], 1)  # from (t - 1, u)
        by_label = alpha + lp_label[:, t, (u - 1).clamp(0, n_u1 - 1)]  # from (t, u - 1)
        on = (u >= 0) & (u < n_u1)
        by_blank = by_blank.masked_fill(~(on & (t >= 1)), {UNREACHED!r})
        by_label = by_label.masked_fill(~(on & (u >= 1)), {UNREACHED!r})
        alpha = torch.logaddexp(by_blank, by_label)
        diags.append(alpha)
    last_t = (frames - 1).clamp(min=0)
    b = torch.arange(n_b, device=logp.device)
    end = torch.stack(diags)[last_t + label_lens, b, last_t]
    return -(end + lp_blank[b, last_t, label_lens])
'''


def rnnt_neg_log_prob(logp, labels: list[int], blank: int):
    """-log p(labels | frames) of one sequence, logp [time, labels + 1, classes] (log-softmaxed),
    labels already as classes: the forward variables cell by cell (eager mode's reference)."""
    import torch

    n_t, n_u1 = logp.shape[0], len(labels) + 1
    alpha = [[None] * n_u1 for _ in range(n_t)]
    for t in range(n_t):
        for u in range(n_u1):
            terms = [] if t or u else [logp.new_zeros(())]
            if t:
                terms.append(alpha[t - 1][u] + logp[t - 1, u, blank])
            if u:
                terms.append(alpha[t][u - 1] + logp[t, u - 1, labels[u - 1]])
            alpha[t][u] = torch.logsumexp(torch.stack(terms), dim=0)
    return -(alpha[-1][-1] + logp[-1, -1, blank])


@register
class RnntLoss(OpDef):
    """`rnnt_loss(logits, labels, axis=vocab_with_blank, time_axis=time, blank_index=-1)`: per
    sequence, -log p(labels | frames) summed over all RNN-T alignments (see the module's
    docstring). RETURNN: an `eval` layer (TF ops, `tf.scan` over the lattice's diagonals);
    torch: a helper doing the same in a Python loop over the diagonals."""

    name = fn_name = "rnnt_loss"
    tensors = ("logits", "labels")

    def api(self, logits, labels, axis, time_axis, blank_index=-1):
        pass

    def infer(self, dt, args, attrs):
        logits, labels = args
        _float("rnnt_loss", logits)
        axis, time = attrs["axis"], attrs["time_axis"]
        for key, d in (("axis", axis), ("time_axis", time)):
            if not isinstance(d, str) or d not in dt.dims:
                raise DimError(f"`rnnt_loss` needs `{key}` to be one dim")
        pred = [d for d in logits.dims if d not in ("batch", time, axis)]
        if (
            "batch" not in logits.dims
            or axis not in logits.dims
            or time not in logits.dims
            or len(pred) != 1
            or dt[time].kind != "dynamic"
            or dt[pred[0]].kind != "dynamic"
            or dt[axis].kind != "static"
        ):
            raise DimError(
                f"`rnnt_loss` needs logits [batch, {time}, labels+1, {axis}] (`{time}` and labels+1 dynamic, "
                f"`{axis}` static), got [{', '.join(logits.dims)}]"
            )
        vocab = _labels("rnnt_loss", labels, dt)
        label_time = [d for d in labels.dims if d != "batch"]
        if "batch" not in labels.dims or len(label_time) != 1 or dt[label_time[0]].kind != "dynamic":
            raise DimError(f"`rnnt_loss` needs labels [batch, label_time], got [{', '.join(labels.dims)}]")
        if label_time[0] in (time, pred[0]):
            raise DimError(
                f"`rnnt_loss`: the labels need a dim of their own, not the logits' `{label_time[0]}` "
                f"(the logits' `{pred[0]}` has one frame more than the labels)"
            )
        if dt[vocab].size + 1 != dt[axis].size:
            raise DimError(
                f"`rnnt_loss`: `{axis}` ({dt[axis].size}) must be the labels' class dim `{vocab}` "
                f"({dt[vocab].size}) plus the blank, e.g. `{vocab} + blank` with blank = Dim('blank', 1)"
            )
        b = attrs["blank_index"]
        size = dt[axis].size
        if isinstance(b, bool) or not isinstance(b, int) or not -size <= b < size:
            raise DimError(
                f"`rnnt_loss` needs `blank_index` to be a class of `{axis}` (-{size} to {size - 1}), got {b!r}"
            )
        return [OutType(("batch",))]

    def pred_dim(self, dims: tuple[str, ...], attrs: dict) -> str:
        """The logits' labels+1 dim."""
        (pred,) = [d for d in dims if d not in ("batch", attrs["time_axis"], attrs["axis"])]
        return pred

    def blank(self, classes: int, attrs: dict) -> int:
        return attrs["blank_index"] % classes

    def returnn_helpers(self, op):
        return {TF_HELPER: TF_HELPER_SOURCE}

    def torch_helpers(self, op):
        return {"rnnt_loss": _torch_helper}

    def returnn(self, ctx, op):
        a = op.attrs
        pred = self.pred_dim(ctx.in_dims(0), a)
        return {
            "class": "eval",
            "from": [ctx.src(0), ctx.src(1)],
            "eval": Code(TF_HELPER),
            "eval_locals": {
                "time_dim": ctx.dim(a["time_axis"]),
                "pred_dim": ctx.dim(pred),
                "classes_dim": ctx.dim(a["axis"]),
                "blank": Code(f"{a['blank_index']} % {ctx.dim(a['axis'])}.dimension"),
            },
            "out_type": {"dim_tags": [Code("batch_dim")], "dtype": "float32", "sparse": False},
        }

    def torch(self, ctx, op):
        a = op.attrs
        pred = self.pred_dim(ctx.in_dims(0), a)
        logits = ctx.aligned(0, ("batch", a["time_axis"], pred, a["axis"]))
        (label_time,) = [d for d in ctx.in_dims(1) if d != "batch"]
        labels = where_valid(ctx.arg(1), ctx.mask(label_time, ctx.in_dims(1)), "0")
        blank = f"{a['blank_index']} % {ctx.size(a['axis'])}"
        fn = ctx.helper("rnnt_loss")
        loss = f"{fn}({logits}, {labels}, {ctx.seq_lens(a['time_axis'])}, {ctx.seq_lens(label_time)}, {blank})"
        return f"{loss}.to({ctx.arg(0)}.dtype)"

    def eager(self, ctx, args, attrs, outs):
        import torch

        logits, labels = args
        pred = self.pred_dim(logits.dims, attrs)
        order = [logits.dims.index(d) for d in ("batch", attrs["time_axis"], pred, attrs["axis"])]
        x = logits.data.permute(order)[0]  # [time, pred, classes]: one sequence
        ys = labels.data[0].tolist()
        if x.shape[1] != len(ys) + 1:
            raise ValueError(
                f"`rnnt_loss`: `{pred}` has {x.shape[1]} frames, labels {len(ys)}: it needs one frame more than the labels"
            )
        blank = self.blank(x.shape[-1], attrs)
        classes = [y + (y >= blank) for y in ys]
        return rnnt_neg_log_prob(torch.log_softmax(x, dim=-1), classes, blank).reshape(1)
