"""`choice` decoders: teacher-forced in training, a beam search when searching."""

from __future__ import annotations

from .gen import Gen, V


def decoder(g: Gen) -> None:
    """A `choice` decoder: teacher-forced in training, a beam search when searching."""
    r = g.r
    g.search = True
    enc = [
        v for v in g.scopes[0] if not v.stacked and v.dims == {"batch", "time", g.static(v).name if g.static(v) else ""}
    ]
    for v in g.visible():
        v.variant = False
    g.emit("s = nc.zeros(batch, hidden)")
    cell = r.choice(["plain", "lstm", "gru"])
    if cell == "lstm" and g.on("tuple_state", 0.8):
        g.emit("sc = nc.zeros(batch, hidden)")
    elif cell == "lstm":
        cell = "plain"
    if cell == "gru" and not g.on("gru_cell", 0.8):
        cell = "plain"
    g.emit(
        r.choice(
            [
                "label = nc.full(batch, value=0, class_dim=vocab)",
                "label = nc.argmax(nc.zeros(batch, vocab), axis=vocab)",
            ]
        )
    )
    grow = g.on("cum_concat", 0.4)  # self-attention over the labels so far, reordered by the beam
    if grow:
        g.dim("hist")
        g.emit("keys = nc.empty(batch, hist, emb)")
    g.emit("logits, labels = [], []")
    g.emit(f"for _ in range({r.randint(1, 2)} * x.max_seq_len + {r.randint(1, 2)}):")
    g.ind += 1
    inp = "nc.Embedding(emb)(label)"
    if grow:
        g.emit("keys = nc.cum_concat(keys, nc.tanh(nc.Embedding(emb)(label)), axis=hist)")
        g.emit("self_att = nc.softmax(nc.dot(keys, nc.Linear(emb)(s), reduce=emb), axis=hist)")
        inp = f"nc.concat({inp}, nc.dot(self_att, keys, reduce=hist))"
    if enc and g.on("attention", 0.7):
        k = g.pick(enc)
        sk = g.static(k)
        g.emit(f"att = nc.softmax(nc.dot({k.name}, nc.Linear({sk.code})(s), reduce={sk.code}), axis=time)")
        g.emit(f"context = nc.dot(att, {k.name}, reduce=time)")
        inp = f"nc.concat({inp}, context)"
    if g.on("beam_expand_state", 0.2):
        g.emit("grid = nc.reduce_max(nc.expand(s, emb) + nc.expand(nc.Embedding(emb)(label), hidden), axis=hidden)")
        inp = f"nc.concat({inp}, grid)"
    if cell == "lstm":
        g.emit(f"s, sc = nc.LstmCell(hidden)({inp}, (s, sc))")
    elif cell == "gru":
        g.emit(f"s = nc.GruCell(hidden)({inp}, s)")
    else:
        g.emit(f"s = nc.tanh(nc.Linear(hidden)({inp}) + nc.Linear(hidden, with_bias=False)(s))")
    g.emit("scores = nc.Linear(vocab)(s)")
    g.emit("logits.append(scores)")
    g.emit(f"label = nc.choice(scores, target=tgt, beam={r.randint(2, 4)})")
    g.emit("labels.append(label)")
    g.emit("if nc.end(label == 0):")
    g.emit("    break")
    g.ind -= 1
    g.emit('nc.mark_as_loss(nc.cross_entropy(logits, tgt, axis=vocab), "dec_ce")')
    g.add(V("labels", frozenset({"batch", "dec"}), "labels", "vocab", stacked=True))
    g.add(V("logits", frozenset({"batch", "dec", "vocab"}), stacked=True))
    g.decoder_outputs += ["labels", "logits"]
    if g.on("search_extra_loss", 0.3):
        fl = [v for v in g.scopes[0] if v.kind == "float" and not v.stacked and g.static(v) and g.static(v).code]
        if fl:
            v = fl[0]
            g.emit(f'nc.mark_as_loss(nc.reduce_sum({v.name}, axis={g.static(v).code}), "extra")')
