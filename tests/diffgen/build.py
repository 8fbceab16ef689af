"""The shape of a generated program: inputs, whole-sequence work, loops, a decoder, losses, outputs."""

from __future__ import annotations

from . import shapes
from .chunks import chunked_loop
from .ctc_lm import lm_function
from .decoder import declare, decoder, labels_annotation
from .gen import D, Gen, V
from .loops import loop
from .transducer import transducer_search


def build(g: Gen) -> None:
    r = g.r
    g.dim("time")
    g.dim("feat", r.choice([3, 4, 6]))
    g.dim("hidden", r.choice([4, 6]))
    g.dim("model", r.choice([3, 5, 6]))
    g.dim("vocab", 5)
    g.dim("emb", 3)
    params = g.params
    if "choice" in g.allowed and g.on("search_lm", 0.06):
        g.used.add("choice")
        build_lm(g)
        return
    params.append(f"x: nc.Tensor[{annotation(g, 'x', ['batch', 'time', 'feat'])}]")
    g.add(V("x", frozenset({"batch", "time", "feat"}), variant=False, seq="time"))
    if g.on("second_input", 0.5):
        g.dim("enc")
        params.append(f"e: nc.Tensor[{annotation(g, 'e', ['batch', 'enc', 'model'])}]")
        g.add(V("e", frozenset({"batch", "enc", "model"}), variant=False, seq="enc"))
    elif g.on("shared_dim_input", 0.4):
        params.append(f"e: nc.Tensor[{annotation(g, 'e', ['batch', 'time', 'model'])}]")
        g.add(V("e", frozenset({"batch", "time", "model"}), variant=False, seq="time"))
    labels = None
    if g.on("labels_input", 0.35):
        params.append(f"y: nc.Labels[{labels_annotation(g, 'time', 'vocab')}]")
        labels = g.add(V("y", frozenset({"batch", "time"}), "labels", "vocab", variant=False))
    ctc = g.on("ctc", 0.15)
    if ctc:
        g.dim("ltime")
        g.dim("blank", 1)
        params.append(f"z: nc.Labels[{labels_annotation(g, 'ltime', 'vocab')}]")
        g.derived_lens["ltime"] = ("time", 3, 0)  # alignable: a third of the frames
    rnnt = g.on("rnnt", 0.15)
    if rnnt:
        g.dim("rtime")
        g.dim("rpred")  # rtime + 1: the labels with a begin label in front
        g.dim("blank", 1)
        params.append(f"r: nc.Labels[{labels_annotation(g, 'rtime', 'vocab')}]")
        params.append(f"rp: nc.Labels[{labels_annotation(g, 'rpred', 'vocab')}]")
        g.derived_lens["rpred"] = ("rtime", 1, 1)
    choice = g.on("choice", 0.3)
    if choice:
        declare(g)

    g.ops(r.randint(1, 3))
    if labels is not None and g.on("embedding", 0.5):
        g.embed(labels)
    for d, feat in ((1, "lstm_fw"), (-1, "lstm_bw")):
        seqs = [v for v in g.floats() if g.dyn(v) and len(g.dyn(v)) == 1]
        if seqs and g.on(feat, 0.25):
            a = g.pick(seqs)
            rest = a.dims - {g.static(a).name}
            v = g.new(f"nc.Lstm(hidden, direction={d})({a.name})", rest | {"hidden"}, variant=False)
            v.seq = g.dyn(v)[0].name
            if d == -1 and g.on("if_zip_bw_lstm", 0.5):
                zip_bw_if(g, v)
    seqs = [v for v in g.floats() if v.dims == {"batch", "time", g.static(v).name}]
    if seqs and g.on("max_pool", 0.2):
        g.dim("ptime")
        a = g.pick(seqs)
        g.new(
            f"nc.max_pool({a.name}, axis=time, size={r.choice([2, 3])}, out_axis=ptime)",
            (a.dims - {"time"}) | {"ptime"},
        )
        g.made_dims.add("ptime")
    shapes.sequences(g, labels)
    if g.on("conv", 0.5):
        conv(g)
    if g.on("transposed_conv", 0.6):
        transposed_conv(g)
    g.ops(r.randint(0, 2))
    for _ in range(r.randint(1, 3)):
        loop(g)
        g.ops(r.randint(0, 2))
    chunked_loop(g)
    if choice:
        decoder(g)
    elif g.on("transducer_search", 0.1):
        # (not searched with `choice`: it runs its own search; seldom: RETURNN refuses the whole
        # program then, and the rest of it goes unchecked there)
        transducer_search(g)
    losses(g, labels, ctc, rnnt)
    ctc_decode(g)
    outputs(g)


def annotation(g: Gen, name: str, dims: list[str]) -> str:
    """An input's annotation: `batch, time, feat`; `batch_not_first` moves batch second, and
    `input_dim_order` writes any order (batch after the feature dim, the feature dim first)."""
    if g.on("input_dim_order", 0.45):
        order = list(dims)
        while order == dims:
            g.r.shuffle(order)
        g.raw_inputs.add(name)
        return ", ".join(order)
    if g.on("batch_not_first", 0.3):
        return ", ".join([dims[1], dims[0], *dims[2:]])
    return ", ".join(dims)


def build_lm(g: Gen) -> None:
    """A network whose only input is the target of its `choice` loop: an unconditional LM."""
    declare(g, lm=True)
    decoder(g)
    g.ops(g.r.randint(0, 2))
    outputs(g)


def conv(g: Gen) -> None:
    """A `Conv1d` over a [batch, time, feature] value: 'same' or 'causal' (a depthwise one as in the
    Conformer) or 'valid' with a stride onto a new dim `ctime`; an input through `silu`; a `BatchNorm` after;
    a `Conv2d` over (time, feature) of the input with a channel dim of 1."""
    r = g.r
    seqs = [v for v in g.floats() if v.dims == {"batch", "time", g.static(v).name}]
    if not seqs:
        return
    a = g.pick(seqs)
    s = g.static(a)
    if s.code and r.random() < 0.5:  # depthwise
        out, opts = s, f", groups={s.size}"
    else:
        out, opts = r.choice(g.statics()), ""
    k = r.choice([1, 2, 3, 4, 5])
    opts = f", filter_size={k}{opts}"
    span = k
    if r.random() < 0.3:
        opts += ", dilation=2"
        span = 2 * k - 1
    if r.random() < 0.3:
        opts += ", with_bias=False"
    x = f"nc.silu({a.name})" if r.random() < 0.3 else a.name
    # (a valid one only within the batch's longest sequence, run.lengths: a batch with no frame
    # on its dim is a limitation, docs/language.md)
    if "ctime" not in g.dims and r.random() < 0.4 and span <= 6:
        g.dim("ctime")
        opts += f", padding='valid', stride={r.choice([1, 2, 3])}"
        v = g.new(f"nc.Conv1d({out.code}{opts})({x}, axis=time, out_axis=ctime)", {"batch", "ctime", out.name})
        g.made_dims.add("ctime")
        g.maybe_empty.add("ctime")
        if g.on("conv_same_after_valid", 0.5):  # over a dim a short sequence has no frame of
            k2 = r.choice([2, 3, 5])
            v = g.new(f"nc.Conv1d({out.code}, filter_size={k2})({v.name}, axis=ctime)", v.dims)
    else:
        if g.on("conv_causal", 0.3):  # left padding only
            opts += ", padding='causal'"
        v = g.new(f"nc.Conv1d({out.code}{opts})({x}, axis=time)", {"batch", "time", out.name})
    if r.random() < 0.4:
        # RETURNN's batch norm before behavior_version 12 (imported configs): the running statistics
        # moved by the batch outside training too (the whole batch's numbers: torch is the reference)
        moved = "update_in_inference=True" if g.on("batch_norm_moved", 0.3) else ""
        g.new(f"nc.BatchNorm({moved})({v.name})", v.dims)
    if s.code and r.random() < 0.4:  # a 2-D one over (time, feature), with a channel dim of 1
        g.dim("one", 1)
        c = r.choice([d for d in g.statics() if d.name != s.name])
        k = (r.choice([1, 2, 3]), r.choice([1, 2, 3]))
        conv2d = f"nc.Conv2d({c.code}, filter_size={k})(nc.expand({a.name}, one), axis=time, feature_axis={s.code})"
        g.new(f"nc.reduce_sum({conv2d}, axis={c.code})", a.dims)
    if s.code and "c2time" not in g.dims and g.on("conv2d_strided", 0.5):
        conv2d_strided(g, a, s)


def conv2d_strided(g: Gen, a: V, s: D) -> None:
    """A `Conv2d` over (time, feature) of [batch, time, feature] with a channel dim of 1, with a
    time stride ("same": each sequence padded by its own length) or 'valid' padding, onto a new
    dim `c2time`; its feature axis onto `c2feat` where a stride or 'valid' changes its size."""
    r = g.r
    g.dim("one", 1)
    c = r.choice([d for d in g.statics() if d.name != s.name])
    padding = r.choice(["same", "valid"])
    kt, kf = r.choice([1, 2, 3, 4]), min(r.choice([1, 2, 3]), s.size)
    st, sf = r.choice([1, 2, 3]), r.choice([1, 1, 2])
    if padding == "same" and st == 1:
        st = r.choice([2, 3])

    size = -(-s.size // sf) if padding == "same" else (s.size - kf) // sf + 1
    opts = f"filter_size=({kt}, {kf}), stride=({st}, {sf})" + (", padding='valid'" if padding == "valid" else "")
    if r.random() < 0.3:
        opts += ", with_bias=False"
    g.dim("c2time")
    fout = s if size == s.size else g.dim("c2feat", size)
    call = f"nc.Conv2d({c.code}, {opts})(nc.expand({a.name}, one), axis=time, feature_axis={s.code}, out_axis=c2time"
    call += ")" if fout is s else ", out_feature_axis=c2feat)"
    v = f"nc.reduce_sum({call}, axis={c.code})"
    g.new(v if fout is s else f"nc.Linear({s.code})({v})", {"batch", "c2time", s.name})
    g.made_dims.add("c2time")
    if padding == "valid" and kt > 1:  # a sequence shorter than the filter: no frame
        g.maybe_empty.add("c2time")


def transposed_conv(g: Gen) -> None:
    """A `ConvTranspose1d` over a [batch, time, feature] value onto a new dim `utime` (n*stride
    frames, plus max(k - stride, 0) with 'valid'), into any static dim."""
    r = g.r
    seqs = [v for v in g.floats() if v.dims == {"batch", "time", g.static(v).name}]
    if not seqs or "utime" in g.dims:
        return
    a = g.pick(seqs)
    out = r.choice(g.statics())
    opts = f", {r.choice([1, 2, 3, 4])}, stride={r.choice([1, 2, 3])}"
    if r.random() < 0.5:
        opts += ", padding='same'"
    if r.random() < 0.3:
        opts += ", with_bias=False"
    g.dim("utime")
    up = g.new(
        f"nc.ConvTranspose1d({out.code}{opts})({a.name}, axis=time, out_axis=utime)", {"batch", "utime", out.name}
    )
    g.made_dims.add("utime")
    if g.on("fit_frames_up", 0.4):  # read back over the input's frames (at least as many: stride, filter >= 1)
        g.new(f"nc.fit_frames({up.name}, axis=utime, out_axis=time)", {"batch", "time", out.name})


def zip_bw_if(g: Gen, bw: V) -> None:
    """A tensor if/elif/else on a state, in a zip over a backward Lstm's output and its input."""
    h = g.fresh("h")
    g.emit(f"{h} = nc.zeros(batch, hidden)")
    g.emit(f"for b_t in {bw.name}:")
    g.ind += 1
    g.emit(f"if nc.reduce_sum({h}, axis=hidden) > 0.5:")
    g.emit(f"    {h} = nc.tanh(nc.Linear(hidden)(b_t) + {h})")
    g.emit(f"elif nc.reduce_sum({h}, axis=hidden) < -0.5:")
    g.emit(f"    {h} = 0.5 * {h}")
    g.emit("else:")
    g.emit(f"    {h} = nc.tanh(b_t - {h})")
    g.ind -= 1
    g.add(V(h, frozenset({"batch", "hidden"}), variant=False))


def rnnt_loss(g: Gen, seq: list[V]) -> None:
    """An RNN-T loss: a joint network of a sequence over `time` and a prediction network over the
    labels with a begin label (`rp`, a Linear or a recurrence), some blank index."""
    r = g.r
    enc = g.ref(g.pick(seq)) if seq else "x"
    g.emit(f"rnnt_enc = nc.Linear(hidden)({enc})")
    if r.random() < 0.5:
        g.emit("rnnt_pred = nc.tanh(nc.Linear(hidden)(nc.Embedding(emb)(rp)))")
    else:
        g.emit("rnnt_h = nc.zeros(batch, hidden)")
        g.emit("rnnt_pred = []")
        g.emit("for rnnt_e in nc.Embedding(emb)(rp):")
        g.emit("    rnnt_h = nc.tanh(nc.Linear(hidden)(nc.concat(rnnt_e, rnnt_h)))")
        g.emit("    rnnt_pred.append(rnnt_h)")
    g.emit("rnnt_joint = nc.tanh(nc.expand(rnnt_enc, rpred) + nc.Linear(hidden)(rnnt_pred))")
    blank = r.choice(["", ", blank_index=0", ", blank_index=2"])
    g.emit(
        f"nc.mark_as_loss(nc.rnnt_loss(nc.Linear(vocab + blank)(rnnt_joint), r, axis=vocab + blank, "
        f'time_axis=time{blank}), "rnnt")'
    )


def ctc_decode(g: Gen) -> None:
    """CTC decoding of logits over a sequence (an input's or a made dim's): greedy and by prefix
    search (beam 1 to 4, maybe with a bigram LM table of the model or an LM function; maybe
    flashlight's search, its options drawn), their labels and score returned.
    Logits scaled up: peaky frames decode to labels."""
    r = g.r
    seqs = [v for v in g.scopes[0] if v.kind == "float" and not v.stacked and g.static(v) and len(v.dims) == 3]
    seqs = [v for v in seqs if len(g.dyn(v)) == 1]
    if not seqs or not g.on("ctc_decode", 0.3):
        return
    v = g.pick(seqs)
    g.dim("blank", 1)
    logits = g.fresh("ctc_logits")
    g.emit(f"{logits} = {r.choice([1.0, 4.0])} * nc.Linear(vocab + blank)({g.ref(v)})")
    out = {}
    for kind in ("greedy", "search"):
        out[kind] = g.dim(g.fresh(f"{kind}_time")).name
        g.made_dims.add(out[kind])
        g.maybe_empty.add(out[kind])
    greedy = g.fresh("greedy")
    g.emit(f"{greedy} = nc.ctc_greedy({logits}, axis=vocab + blank, out_axis={out['greedy']})")
    lm = ""
    if g.on("ctc_decode_lm", 0.2):
        # (seldom: RETURNN refuses the whole program then, and the rest of it goes unchecked there)
        lm = lm_function(g) + ", lm_weight=" + str(r.choice([0.3, 1.0]))
    elif r.random() < 0.5:
        g.dim("lm_ctx", 6)  # vocab (5) + the start
        lm = ", lm=nc.Bias((lm_ctx, vocab))(nc.zeros(lm_ctx, vocab)), lm_weight=" + str(r.choice([0.3, 1.0]))
    if g.on("ctc_decode_flashlight", 0.2):  # (seldom: RETURNN refuses it too)
        lm += ', method="flashlight"'
        lm += f", beam_size_token={r.randint(1, 6)}" if r.random() < 0.4 else ""
        lm += f", beam_threshold={r.choice([1.0, 3.0, 10.0])}" if r.random() < 0.4 else ""
        lm += ", log_add=False" if r.random() < 0.3 else ""
    labels, score = g.fresh("ctc_labels"), g.fresh("ctc_score")
    g.emit(
        f"{labels}, {score} = nc.ctc_prefix_search({logits}, axis=vocab + blank, beam={r.randint(1, 4)}, "
        f"out_axis={out['search']}{lm})"
    )
    for v in (
        V(greedy, frozenset({"batch", out["greedy"]}), "labels", "vocab", variant=False),
        V(labels, frozenset({"batch", out["search"]}), "labels", "vocab", variant=False),
        V(score, frozenset({"batch"}), variant=False),
    ):
        g.after_outputs.append(g.add(v))  # returned


def losses(g: Gen, labels: V | None, ctc: bool, rnnt: bool) -> None:
    r = g.r
    if g.search and not g.on("search_extra_loss", 0.5):  # a searched network: the decoder's loss only
        return
    fl = [v for v in g.scopes[0] if v.kind == "float" and g.static(v) and v.name not in ("logits",)]
    seq = [v for v in fl if v.dims == {"batch", "time", g.static(v).name}]
    if labels is not None and seq and g.on("ce_loss", 0.7):
        v = g.pick(seq)
        ls = f", label_smoothing={r.choice([0.1, 0.2])}" if g.on("label_smoothing", 0.5) else ""
        g.emit(f'nc.mark_as_loss(nc.cross_entropy(nc.Linear(vocab)({g.ref(v)}), y, axis=vocab{ls}), "ce")')
    if ctc:
        if seq:
            v = g.pick(seq)
            g.emit(f"ctc_in = nc.Linear(vocab + blank)({g.ref(v)})")
        else:
            g.emit("ctc_in = nc.Linear(vocab + blank)(x)")
        g.emit('nc.mark_as_loss(nc.ctc_loss(ctc_in, z, axis=vocab + blank), "ctc")')
    if rnnt:
        rnnt_loss(g, seq)
    if fl and g.on("loss", 0.3):
        v = g.pick(fl)
        g.emit(f'nc.mark_as_loss(nc.reduce_sum({g.ref(v)}, axis={g.static(v).code}) ** 2, "sq")')
    loss_expand(g)


def loss_expand(g: Gen) -> None:
    """A loss `expand` makes over a dynamic dim (an input's or one an op made): a value of each
    sequence counted once per frame."""
    vs = [v for v in g.scopes[0] if v.kind == "float" and not v.stacked and not g.dyn(v)]
    dyn = {d.name: d for v in g.scopes[0] if v.name in ("x", "e") or g.made_dims & v.dims for d in g.dyn(v)}
    dyn = {n: d for n, d in dyn.items() if d.code and (n in ("time", "enc") or n in g.made_dims)}
    if not vs or not dyn or not g.on("loss_expand_dyn", 0.25):
        return
    v = g.pick(vs)
    d = g.r.choice(sorted(dyn))
    g.emit(f'nc.mark_as_loss(nc.expand(nc.tanh({v.name}), {dyn[d].code}), "{g.fresh("lx")}")')


def outputs(g: Gen) -> None:
    r = g.r
    vs = [v for v in g.scopes[0] if v.name not in ("x", "e", "y") and v.name not in getattr(g, "decoder_outputs", [])]
    vs = list({v.name: v for v in vs}.values())  # the last binding of each name
    chosen = r.sample(vs[-6:], min(len(vs[-6:]), r.randint(1, 3)))
    if g.search and not g.on("search_other_outputs", 0.5):  # a searched network: the decoder's outputs
        chosen = []
    after = list({v.name: v for v in g.after_outputs}.values())  # values read after the decoder
    outs = [f'"o{i}": {v.name}' for i, v in enumerate(chosen)] + [f'"{n}": {n}' for n in g.decoder_outputs]
    outs += [f'"d{i}": {v.name}' for i, v in enumerate(after) if v not in chosen]
    # a dim that may have no frame in the whole batch (an `end` loop's, an op's) is seen in one
    # output at least: a target failing on it is the documented limitation only where the run sees
    # the dim empty (not drawn from the random stream: the rest of the program stays as it was)
    shown = {d for v in [*chosen, *after] for d in v.dims}
    for i, d in enumerate(sorted(g.maybe_empty - shown)):
        over = [v for v in vs if d in v.dims and not g.search]
        if over:
            outs.append(f'"e{i}": {over[-1].name}')
            shown |= over[-1].dims
    if not outs:
        outs = ['"o0": x']
    g.emit("return {" + ", ".join(outs) + "}")
