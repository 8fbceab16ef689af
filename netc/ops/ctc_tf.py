"""CTC decoding in TensorFlow for RETURNN `eval` layers: the algorithms of `netc.ops.ctc_search`
step for step (the same candidates, order and ties), so RETURNN decodes as eager and torch do.
The config gets these functions' source (`TF_HELPERS`); each layer calls one with `part` naming
what it gives (lengths, labels or score); one search per input tensor is built and shared."""

from __future__ import annotations

import inspect

GREEDY_TF = "netc_ctc_greedy"
SEARCH_TF = "netc_ctc_prefix_search"


def netc_ctc_greedy(source, self, time_dim, class_dim, part, **_kwargs):
    """Best path of logits source(0) [batch, time_dim, class_dim] (blank last): the labels'
    lengths [batch] or (`part` "labels") the labels [batch, n] zero-padded."""
    import tensorflow as tf

    x = source(0, auto_convert=False, as_data=True)
    logits = tf.transpose(
        x.placeholder, [x.batch_dim_axis, x.get_axis_from_description(time_dim), x.get_axis_from_description(class_dim)]
    )
    lens = x.get_sequence_lengths()
    blank = class_dim.dimension - 1
    best = tf.argmax(logits, axis=-1, output_type=tf.int32)
    valid = tf.sequence_mask(lens, tf.shape(best)[1])
    prev = tf.pad(best, [[0, 0], [1, 0]], constant_values=blank)[:, :-1]
    keep = valid & tf.not_equal(best, blank) & tf.not_equal(best, prev)
    out_lens = tf.reduce_sum(tf.cast(keep, tf.int32), axis=1)
    if part == "lengths":
        return out_lens
    source(1, auto_convert=False)  # `out_axis`'s positions: the layer's dims come from them
    order = tf.argsort(tf.cast(tf.logical_not(keep), tf.int32), axis=1, stable=True)
    size = tf.reduce_max(tf.concat([out_lens, [0]], 0))
    labels = tf.gather(best, order, batch_dims=1)[:, :size]
    return tf.where(tf.sequence_mask(out_lens, size), labels, 0)


def netc_ctc_prefix_search(source, self, time_dim, class_dim, beam, lm_weight, part, lm_dims=None, **_kwargs):
    """CTC prefix beam search (netc.ops.ctc_search.ctc_prefix_beam_search) of logits source(0)
    [batch, time_dim, class_dim], with LM log probabilities source(1) [lm_dims] when given: the
    best prefix's lengths [batch], labels [batch, n] or score [batch] (`part`)."""
    import tensorflow as tf

    x = source(0, auto_convert=False, as_data=True)
    axes = [x.batch_dim_axis, x.get_axis_from_description(time_dim), x.get_axis_from_description(class_dim)]
    lens = x.get_sequence_lengths()
    lm = None
    if lm_dims is not None:
        lm_data = source(1, auto_convert=False, as_data=True)
        lm = tf.transpose(lm_data.placeholder, [lm_data.get_axis_from_description(d) for d in lm_dims])
    cache = self.network.get_root_network().__dict__.setdefault("_netc_ctc_searches", {})
    key = (x.placeholder.ref(), None if lm is None else lm.ref(), beam, lm_weight)
    if key not in cache:
        cache[key] = _netc_ctc_search_tf(tf.transpose(x.placeholder, axes), lens, beam, lm, lm_weight)
    labels, out_lens, score = cache[key]
    if part == "lengths":
        return out_lens
    if part == "score":
        return tf.cast(score, tf.float32)
    source(1 if lm is None else 2, auto_convert=False)  # `out_axis`'s positions (the layer's dims)
    size = tf.reduce_max(tf.concat([out_lens, [0]], 0))
    return labels[:, :size]


def _netc_ctc_search_tf(logits, lens, beam, lm, lm_weight):
    import tensorflow as tf

    logp = tf.nn.log_softmax(tf.cast(logits, tf.float64), axis=-1)
    n_batch, n_time = tf.shape(logp)[0], tf.shape(logp)[1]
    vocab = int(logits.shape[-1]) - 1
    blank = vocab
    neg_inf = tf.constant(float("-inf"), tf.float64)

    def lae(a, b):  # torch.logaddexp
        m = tf.maximum(a, b)
        safe = tf.where(tf.math.is_inf(m), tf.zeros_like(m), m)
        return tf.where(tf.equal(m, neg_inf), m, safe + tf.math.log1p(tf.exp(-tf.abs(a - b))))

    seqs = tf.zeros([n_batch, beam, n_time], tf.int32)
    plen = tf.zeros([n_batch, beam], tf.int32)
    last = tf.fill([n_batch, beam], vocab)
    pb = tf.concat([tf.zeros([n_batch, 1], tf.float64), tf.fill([n_batch, beam - 1], neg_inf)], 1)
    pnb = tf.fill([n_batch, beam], neg_inf)
    lm_logp = None
    if lm is not None:
        lm = tf.cast(lm, tf.float64) * lm_weight
        lm_logp = tf.broadcast_to(lm if lm.shape.rank == 3 else lm[None], [n_batch, vocab + 1, vocab])
    pos = tf.range(n_time)
    labels = tf.range(vocab)

    def step(t, seqs, plen, last, pb, pnb):
        lp = logp[:, t]
        total = lae(pb, pnb)
        u_pb = total + lp[:, blank][:, None]
        u_pnb = tf.where(plen > 0, pnb + tf.gather(lp, tf.minimum(last, vocab - 1), batch_dims=1), neg_inf)
        e_pnb = tf.where(tf.equal(labels, last[:, :, None]), pb[:, :, None], total[:, :, None]) + lp[:, None, :vocab]
        if lm_logp is not None:
            e_pnb = e_pnb + tf.gather(lm_logp, last, batch_dims=1)
        valid = total > neg_inf
        same = tf.equal(seqs[:, :, None, :], seqs[:, None, :, :]) | (pos >= plen[:, None, :, None])
        match = tf.reduce_all(same, axis=3) & tf.equal(plen[:, :, None], plen[:, None, :] + 1)
        match = match & valid[:, :, None] & valid[:, None, :]
        idx_j = tf.broadcast_to(tf.minimum(last, vocab - 1)[:, None, :], [n_batch, beam, beam])
        into = tf.transpose(tf.gather(e_pnb, idx_j, batch_dims=2), [0, 2, 1])
        u_pnb = lae(u_pnb, tf.reduce_logsumexp(tf.where(match, into, neg_inf), axis=2))
        onehot = tf.one_hot(last, vocab + 1, dtype=tf.float64)[:, :, :vocab]
        taken = tf.matmul(tf.cast(match, tf.float64), onehot, transpose_a=True) > 0
        e_flat = tf.reshape(tf.where(taken, neg_inf, e_pnb), [n_batch, beam * vocab])
        cand = tf.concat([lae(u_pb, u_pnb), e_flat], 1)
        idx = tf.math.top_k(cand, k=beam, sorted=True).indices  # ties: the lower index first
        ext = idx >= beam
        k = tf.where(ext, (idx - beam) // vocab, idx)
        c = (idx - beam) % vocab
        n_seqs = tf.gather(seqs, k, batch_dims=1)
        n_plen = tf.gather(plen, k, batch_dims=1)
        n_seqs = tf.where(ext[:, :, None] & tf.equal(pos, n_plen[:, :, None]), c[:, :, None], n_seqs)
        n_pb = tf.where(ext, neg_inf, tf.gather(u_pb, k, batch_dims=1))
        n_pnb = tf.where(
            ext, tf.gather(e_flat, tf.maximum(idx - beam, 0), batch_dims=1), tf.gather(u_pnb, k, batch_dims=1)
        )
        n_last = tf.where(ext, c, tf.gather(last, k, batch_dims=1))
        n_plen = n_plen + tf.cast(ext, tf.int32)
        on = (t < lens)[:, None]
        seqs = tf.where(on[:, :, None], n_seqs, seqs)
        return (
            t + 1,
            seqs,
            tf.where(on, n_plen, plen),
            tf.where(on, n_last, last),
            tf.where(on, n_pb, pb),
            tf.where(on, n_pnb, pnb),
        )

    _, seqs, plen, last, pb, pnb = tf.while_loop(
        lambda t, *_: t < n_time, step, [tf.constant(0), seqs, plen, last, pb, pnb]
    )
    return seqs[:, 0], plen[:, 0], lae(pb[:, 0], pnb[:, 0])


TF_HELPERS = {
    GREEDY_TF: inspect.getsource(netc_ctc_greedy),
    SEARCH_TF: inspect.getsource(_netc_ctc_search_tf) + "\n\n" + inspect.getsource(netc_ctc_prefix_search),
}
