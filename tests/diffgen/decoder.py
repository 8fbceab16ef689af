"""`choice` decoders: teacher-forced in training, a beam search when searching.

Three shapes, as users write them: a decoder fed its previous label (attention over an
encoder, a state grown by `cum_concat`), an RNA-style one (one label per encoder frame, read by
a one-hot `dot` over positions, `end(pos >= frames)`) and an unconditional LM (its target the
network's only input, a constant bound). Their steps hold any op, states that ignore the label
(counters, states fed only by loop-invariant values), stacks of values that do not depend on
`choice` and stacks over dynamic dims (attention weights over a dim an op made); after the loop
its state, its last label and its last values are read (`if`s, several ops) and returned. With
`two_choices` the plain decoder's step first chooses a position (its own target over the
decoder's dim) that updates the state, then the label (hard attention); with
`choice_enc_position` that position is one of the encoder's frames (a `choice` over the dynamic
dim `time`, its target `Labels[batch, dec, time]`), the chosen frame read by a one-hot `dot`.

`declare` picks the decoder's form with the inputs (its target's lengths depend on it);
`decoder` writes the loop after the network's other loops.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .gen import Gen, Loop, V


@dataclass
class Dec:
    form: str  # plain | rna | lm
    target: str  # the target input's name
    cls: str  # the class dim
    beam: int
    bound: str  # the loop header's `range(...)` argument
    second: str | None = None  # `two_choices`: the first choice's target (a position over `pos`)
    pcls: str = "pos"  # the position's class dim: `pos`, or `time` (the encoder's frames)
    computed: bool = False  # `choice_computed_target`: the position's target computed in the network


def declare(g: Gen, lm: bool = False) -> Dec:
    """The target input `tgt: Labels[batch, dec, cls]` and the loop's form, bound and beam; the
    target is no longer than the bound (training runs over all of its frames)."""
    r = g.r
    cls = "vocab"
    if g.on("beam_wide", 0.3):  # a beam wider than the class dim: at most |cls| hypotheses exist
        cls = "small"
        size = r.choice([2, 3])
        g.dim(cls, size)
        beam = r.randint(size + 1, 6)
    else:
        beam = r.randint(1, 4)
    form = "lm" if lm else "rna" if g.on("rna_decoder", 0.3) else "plain"
    g.dim("dec")
    g.params.append(f"tgt: nc.Labels[{labels_annotation(g, 'dec', cls)}]")
    if form == "lm" or form == "plain" and g.on("search_const_bound", 0.25):
        n = r.randint(3, 9)
        bound = str(n)
        g.used.add("search_const_bound")
        g.bounded_lens["dec"] = (None, 0, n)
    elif form == "rna":  # a label per frame: `end(pos >= frames)` after the last one
        bound = "x.max_seq_len"
        if g.on("dec_len_free", 0.5):
            g.bounded_lens["dec"] = ("time", 1, 0)
        else:
            g.derived_lens["dec"] = ("time", 1, 0)
    else:
        a, b = r.randint(1, 2), r.randint(1, 2)
        bound = f"{a} * x.max_seq_len + {b}"
        if g.on("dec_len_free", 0.5):  # longer than the encoder too (an encoder list read then runs out)
            g.bounded_lens["dec"] = ("time", a, b)
        else:
            g.derived_lens["dec"] = ("time", 1, 0)
            if g.on_own("search_bound_floordiv", 0.3):  # a bound ending in `// k` (RETURNN's `* 1.5`)
                bound = f"x.max_seq_len * {g.own('search_bound_floordiv').choice([3, 5])} // 2"
    g.dec = Dec(form, "tgt", cls, beam, bound)
    if form == "plain" and g.on_side("two_choices", 0.25):  # hard attention: a position, then the label
        if g.on_side("choice_enc_position", 0.5):  # a position in the encoder's frames: a dynamic class dim
            g.dec.pcls = "time"
        else:
            g.dim("pos", r.randint(2, 4))
        g.dec.second = "ptgt"
        if g.on_own("choice_computed_target", 0.4):  # computed before the loop (`decoder`), no input
            g.dec.computed = True
        else:
            g.params.append(f"ptgt: nc.Labels[{labels_annotation(g, 'dec', g.dec.pcls)}]")
    return g.dec


def computed_target(g: Gen, d: Dec) -> None:
    """The position target computed from the lengths, as RETURNN's latent attention configs
    compute theirs: decoder step i of N over T frames is round((i + 1) * max(T - 1, 0) / max(N, 1)),
    at most T - 1 (over `pos`: |pos| frames). A search computes none of it (`tgt` is absent)."""
    rr, time, dec = g.own("choice_computed_target"), g.dims["time"].code, g.dims["dec"].code
    if d.pcls == "time":
        g.emit(f'pt_frames = nc.reduce_sum(nc.range_over({time}, dtype="float32") * 0.0 + 1.0, axis={time})')
    else:
        g.emit(f"pt_frames = nc.full(batch, value={float(g.dims['pos'].size)})")
    if rr.random() < 0.5:  # the target's lengths from its labels, or from the dim alone
        g.emit(f'pt_labels = nc.reduce_sum(nc.cast({d.target} >= 0, "float32"), axis={dec})')
    else:
        g.emit(f'pt_labels = nc.reduce_sum(nc.range_over({dec}, dtype="float32") * 0.0 + 1.0, axis={dec})')
    g.emit(f'pt_steps = nc.range_over({dec}, dtype="float32") + 1.0')
    g.emit("pt_at = nc.round(pt_steps * (nc.maximum(pt_frames - 1.0, 0.0) / nc.maximum(pt_labels, 1.0)))")
    g.emit(f'ptgt = nc.cast(nc.minimum(pt_at, pt_frames - 1.0), "int32", class_dim={g.dims[d.pcls].code})')


def target_frame(g: Gen, d: Dec, out: str) -> None:
    """`tgt[i]` by the step (the label, or the position, the step's choice takes in training),
    as RETURNN's latent attention configs read `data:t_target` in their unit: only in training,
    a search has no target (`if nc.searching():`, or the `where` on it), drawn on its own stream."""
    rr = g.own("choice_target_frame")
    src = d.second if d.second and rr.random() < 0.5 else d.target
    frame = f'nc.cast({src}[i], "float32")'
    if rr.random() < 0.5:  # the least of it and the state's (as the configs' window start)
        frame = f"nc.minimum({frame}, nc.reduce_mean(s, axis=hidden))"
    other = rr.choice(["nc.zeros(batch)", "nc.reduce_mean(s, axis=hidden)"])
    g.emit("if nc.searching():")
    g.emit(f"    tfr = {other}")
    g.emit("else:")
    g.emit(f"    tfr = {frame}")
    g.emit(f"{out} = s + 0.1 * nc.expand(tfr, hidden)")
    g.add(V("tfr", frozenset({"batch"})))
    g.add(V(out, frozenset({"batch", "hidden"})))


def no_length_norm(g: Gen) -> str:
    """`, length_normalization=False` half the time (RETURNN's hard-attention configs choose the
    position so), drawn on its own stream: earlier seeds' programs stay as they were."""
    return ", length_normalization=False" if g.on_own("choice_no_length_norm") else ""


def labels_annotation(g: Gen, dim: str, cls: str) -> str:
    """`batch, dim, cls`, or with `input_dim_order` `dim, batch, cls` (the class dim stays last)."""
    if g.on("input_dim_order", 0.3):
        return f"{dim}, batch, {cls}"
    return f"batch, {dim}, {cls}"


def encoders(g: Gen) -> list[V]:
    """Values [batch, T, S] the step may attend over: over `time`, and with `search_made_enc` over
    dims ops made, with `search_enc_list` lists earlier loops stacked."""
    out = []
    for v in reversed(g.scopes[0]):  # the last binding of each name
        dyn, st = g.dyn(v), g.static(v)
        if v.kind != "float" or st is None or len(dyn) != 1 or not dyn[0].code or len(v.dims) != 3:
            continue
        if any(w.name == v.name for w in out):
            continue
        out.append(v)
    plain = [v for v in out if not v.stacked and g.dyn(v)[0].name == "time"]
    lists = [v for v in out if v.stacked]
    made = [v for v in out if not v.stacked and g.dyn(v)[0].name in g.made_dims]
    if lists and g.on("search_enc_list", 0.6):
        plain += lists
    if made and g.on("search_made_enc", 0.6):
        plain += made
    return plain


def decoder(g: Gen) -> None:
    """The `choice` loop `declare` chose, and what reads its values after it."""
    r, d = g.r, g.dec
    g.search = True
    enc = encoders(g)
    for v in g.visible():
        v.variant = False
    # a label nothing reads: the `end` reads a counter (an RNA decoder and an LM read their labels)
    label_read = d.form != "plain" or "search_counter" not in g.allowed or not g.on("choice_label_unused", 0.1)
    counter = not label_read or g.on("search_counter", 0.3)
    free = g.on("search_free_state", 0.3)
    carried = [V("s", frozenset({"batch", "hidden"}), variant=True)]  # states read after the loop
    if d.computed:
        computed_target(g, d)
    g.emit("s = nc.zeros(batch, hidden)")
    cell = r.choice(["plain", "lstm", "gru"])
    if cell == "lstm" and g.on("tuple_state", 0.8):
        g.emit("sc = nc.zeros(batch, hidden)")
    elif cell == "lstm":
        cell = "plain"
    if cell == "gru" and not g.on("gru_cell", 0.8):
        cell = "plain"
    if label_read and d.form != "rna":
        g.emit(
            r.choice(
                [
                    f"label = nc.full(batch, value=0, class_dim={d.cls})",
                    f"label = nc.argmax(nc.zeros(batch, {d.cls}), axis={d.cls})",
                ]
            )
        )
    invariant = [v for v in g.floats() if v.dims == {"batch", g.static(v).name} and not v.stacked]
    rna_enc = [v for v in enc if v.dims == {"batch", "time", g.static(v).name} and not v.stacked]
    if d.form == "rna":
        g.emit('positions = nc.range_over(time, dtype="float32")')
        g.emit("frames = nc.reduce_max(positions, axis=time) + 1.0")
        g.emit("pos = nc.zeros(batch)")
    if counter:
        g.used.add("search_counter")
        g.emit("cnt = nc.zeros(batch)")
        carried.append(V("cnt", frozenset({"batch"}), variant=True))
    if free:
        u_dim = r.choice(g.statics())
        src = [v for v in invariant if g.static(v).name == u_dim.name]
        g.emit(f"u = {src[0].name}" if src and r.random() < 0.5 else f"u = nc.zeros(batch, {u_dim.code})")
        carried.append(V("u", frozenset({"batch", u_dim.name}), variant=True))
    grow = label_read and d.form == "plain" and g.on("cum_concat", 0.4)  # self-attention over the labels so far
    if grow:
        g.dim("hist")
        g.emit("keys = nc.empty(batch, hist, emb)")
    lists = ["logits"] + (["labels"] if label_read else [])
    lists += (["plogits", "positions"] if d.pcls == "pos" else ["positions"]) if d.second else []
    extra = [g.fresh("dout") for _ in range(r.randint(1, 2))]
    g.emit(f"{', '.join(lists + extra)} = {', '.join('[]' for _ in lists + extra)}")
    # the scores' weight is the label embedding's (transposed), as in a Transformer LM
    tied = label_read and d.form != "rna" and g.on("tied", 0.4)
    if tied:
        g.emit("dec_emb = nc.Embedding(hidden)")
    step_read = g.on_own("choice_target_frame", 0.3)  # the step's target frame read in training
    g.emit(f"for {'i' if step_read else '_'} in range({d.bound}):")
    g.ind += 1
    step_start = len(g.body)

    def before_loop(*lines: str) -> None:
        """Lines bound before the loop's header (a state the step's later constructs add)."""
        nonlocal step_start
        g.body[step_start - 1 : step_start - 1] = ["    " * (g.ind - 1) + line for line in lines]
        step_start += len(lines)

    g.scopes.append([])
    states = [V("s", frozenset({"batch", "hidden"}))]
    g.loops.append(Loop(None, states, end=True))
    stack_dyn: list[V] = []  # values over dynamic dims the step may stack
    parts = []
    if label_read and d.form != "rna":
        parts.append("dec_emb(label)" if tied else "nc.Embedding(emb)(label)")
    if d.form == "rna" and rna_enc:
        k = g.pick(rna_enc)
        g.emit(f'enc_t = nc.dot(nc.cast(positions == pos, "float32"), {k.name}, reduce=time)')
        parts.append(g.add(V("enc_t", k.dims - {"time"})).name)
    elif d.form == "rna":
        g.emit('enc_t = nc.dot(nc.cast(positions == pos, "float32"), x, reduce=time)')
        parts.append(g.add(V("enc_t", frozenset({"batch", "feat"}))).name)
    if grow:
        g.emit("keys = nc.cum_concat(keys, nc.tanh(nc.Embedding(emb)(label)), axis=hist)")
        g.emit("self_att = nc.softmax(nc.dot(keys, nc.Linear(emb)(s), reduce=emb), axis=hist)")
        parts.append("nc.dot(self_att, keys, reduce=hist)")
    if enc and g.on("attention", 0.7):
        k = g.pick(enc)
        sk, t = g.static(k), g.dyn(k)[0]
        att = g.new(
            f"nc.softmax(nc.dot({g.ref(k)}, nc.Linear({sk.code})(s), reduce={sk.code}), axis={t.code})",
            {"batch", t.name},
            prefix="att",
        )
        stack_dyn.append(att)
        parts.append(g.new(f"nc.dot({att.name}, {g.ref(k)}, reduce={t.code})", {"batch", sk.name}, prefix="ctx").name)
    elif enc and g.on("search_enc_list", 0.3):  # a whole encoder (list) reduced in the step
        k = g.pick(enc)
        t = g.dyn(k)[0]
        parts.append(f"nc.reduce_mean({g.ref(k)}, axis={t.code})")
    if label_read and d.form != "rna" and g.on("beam_expand_state", 0.2):
        parts.append("nc.reduce_max(nc.expand(s, emb) + nc.expand(nc.Embedding(emb)(label), hidden), axis=hidden)")
    if not parts:  # nothing of the step: a loop-invariant input
        parts.append(g.pick(invariant).name if invariant else "nc.reduce_mean(x, axis=time)")
    inp = parts[0] if len(parts) == 1 else f"nc.concat({', '.join(parts)})"
    if d.form == "rna":  # the state before the step's label; advanced after the choice
        pass
    elif cell == "lstm":
        g.emit(f"s, sc = nc.LstmCell(hidden)({inp}, (s, sc))")
    elif cell == "gru":
        g.emit(f"s = nc.GruCell(hidden)({inp}, s)")
    else:
        g.emit(f"s = nc.tanh(nc.Linear(hidden)({inp}) + nc.Linear(hidden, with_bias=False)(s))")
    g.add(V("s", frozenset({"batch", "hidden"})))
    if step_read:
        target_frame(g, d, "sf" if cell in ("lstm", "gru") else "s")  # (a cell's state is the one it returned)
    if d.second and d.pcls == "time":  # the step's first choice: an encoder frame (a sequence's padding never)
        feat = g.dims["feat"].code
        pscores = f"nc.dot(x, nc.Linear({feat})(s), reduce={feat})"  # padded frames score anything
        kind = r.choice(["logits", "log_prob", "prob"])  # RETURNN's configs: a softmax over the frames
        g.emit(f"pscores = {f'nc.softmax({pscores}, axis=time)' if kind == 'prob' else pscores}")
        kw = "" if kind == "logits" else f', input_type="{kind}"'
        kw += no_length_norm(g)
        g.emit(f"where = nc.choice(pscores, target={d.second}, beam={d.beam}{kw})")
        g.emit("s = s + nc.tanh(nc.Linear(hidden)(nc.dot(nc.one_hot(where), x, reduce=time)))")
        g.emit("positions.append(where)")  # `where` stays out of scope: no op takes labels over a dynamic dim
    elif d.second:  # the step's first choice: a position, read back into the state
        g.emit("pscores = nc.Linear(pos)(s)")
        g.emit("plogits.append(pscores)")
        g.emit(f"where = nc.choice(pscores, target={d.second}, beam={d.beam}{no_length_norm(g)})")
        g.emit("s = s + nc.tanh(nc.Embedding(hidden)(where))")
        g.emit("positions.append(where)")
        g.add(V("where", frozenset({"batch"}), "labels", "pos"))
    if counter:
        g.emit("cnt = cnt + 1.0")
        g.add(V("cnt", frozenset({"batch"})))
    if free:  # fed by loop-invariant values only: the same in every hypothesis
        src = [v for v in invariant if v.kind == "float"]
        feed = f"nc.Linear({u_dim.code})({src[0].name})" if src else "0.5"
        g.emit(f"u = nc.tanh({feed} + nc.Linear({u_dim.code}, with_bias=False)(u))")
        g.add(V("u", frozenset({"batch", u_dim.name})))
    if g.on("search_ops", 0.6):
        g.ops(r.randint(1, 3))
    if d.form == "rna":  # a joint network of the frame (and what else the step read) and the state
        scores = f"nc.Linear({d.cls})(nc.tanh(nc.Linear(hidden)({inp}) + nc.Linear(hidden, with_bias=False)(s)))"
    else:
        srcs = [v for v in g.scopes[-1] if v.kind == "float" and g.static(v) and v.dims == {"batch", g.static(v).name}]
        src = "s" if not srcs or r.random() < 0.6 else g.pick(srcs).name
        if not label_read and invariant and r.random() < 0.5:  # scores no step reads
            src = g.pick(invariant).name
        scores = f"nc.Linear({d.cls}, weight=dec_emb.weight)(s)" if tied else f"nc.Linear({d.cls})({src})"
    shift = label_read and d.form == "plain" and g.on_own("state_shift", 0.3)
    if shift:  # label embeddings of the last two steps, states: the older the newer's previous value
        before_loop("lab_e1 = nc.zeros(batch, emb)", "lab_e2 = nc.zeros(batch, emb)")
        scores = f"{scores} + nc.Linear({d.cls}, with_bias=False)(nc.concat(lab_e1, lab_e2))"
        g.emit("lab_e1_prev = lab_e1")
    kind = "logits"
    if g.on("choice_input_type", 0.4):  # scores the model normalised itself (RETURNN's `input_type`)
        kind = r.choice(["log_prob", "prob"])
        scores = f"nc.{'log_softmax' if kind == 'log_prob' else 'softmax'}({scores}, axis={d.cls})"
    g.emit(f"scores = {scores}")
    g.emit("logits.append(scores)")
    if label_read and d.form != "rna" and kind != "prob" and g.on("search_only", 0.4):
        # shallow fusion: an LM of the labels only in the search (training neither computes nor trains it)
        lm = g.fresh("lm")
        before_loop(f"{lm} = nc.zeros(batch, hidden)")
        g.emit("if nc.searching():")
        g.emit(
            f"    {lm} = nc.tanh(nc.Linear(hidden)(nc.Embedding(emb)(label)) + nc.Linear(hidden, with_bias=False)({lm}))"
        )
        g.emit(
            f"    scores = scores + {r.choice(['0.5', '0.3'])} * nc.log_softmax(nc.Linear({d.cls})({lm}), axis={d.cls})"
        )
    extra_kw = "" if kind == "logits" else f', input_type="{kind}"'
    g.emit(f"label = nc.choice(scores, target={d.target}, beam={d.beam}{extra_kw})")
    if shift:  # `lab_e2` takes `lab_e1`'s previous value, assigned after it (as an imported decoder's)
        g.emit("lab_e1 = nc.tanh(nc.Embedding(emb)(label))")
        g.emit("lab_e2 = lab_e1_prev")
    if label_read and g.on_own("label_arith", 0.3):
        # arithmetic on labels is plain ints: the largest label (or position) so far, a state; a
        # position's depends on the step's first choice only (carried with the last one's hypotheses)
        src = "where" if d.second and g.own("label_arith").random() < 0.5 else "label"
        before_loop('ltop = nc.full(batch, value=-1, dtype="int32")', "ltops = []")
        g.emit(f"ltop = nc.maximum({src}, ltop)")
        g.emit("ltops.append(ltop + 1)")
        g.decoder_outputs.append("ltops")
    if label_read:
        g.add(V("label", frozenset({"batch"}), "labels", d.cls))
        g.emit("labels.append(label)")
    if d.form == "rna":  # only a label other than the blank (0) advances the state
        step = (
            "nc.GruCell(hidden)(nc.Embedding(emb)(label), s)"
            if cell == "gru"
            else "nc.tanh(nc.Linear(hidden)(nc.Embedding(emb)(label)) + 0.5 * s)"
        )
        g.emit(f"s = nc.where(label != 0, {step}, s)")
        g.emit("pos = pos + 1.0")
        g.add(V("pos", frozenset({"batch"})))
    roots = {"label", "keys"} if label_read else set()  # what depends on the chosen labels
    roots |= {"where"} if d.second else set()
    appends(g, extra, stack_dyn, chosen(g.body[step_start:], roots))
    if d.form == "rna":
        cond = "pos >= frames"
    elif counter and (not label_read or r.random() < 0.5):
        cond = f"cnt > {r.randint(1, 4)}.5"
    else:
        cond = f"label == {r.randint(0, g.dims[d.cls].size - 1) if r.random() < 0.3 else 0}"
    g.emit(f"if nc.end({cond}):")
    g.emit("    break")
    step_values = [v for v in g.scopes[-1] if v.variant and not v.stacked and v.name not in ("s", "label")]
    g.ind -= 1
    g.scopes.pop()
    g.loops.pop()
    g.emit(f'nc.mark_as_loss(nc.cross_entropy(logits, {d.target}, axis={d.cls}), "dec_ce")')
    g.add(V("logits", frozenset({"batch", "dec", d.cls}), stacked=True))
    g.decoder_outputs.append("logits")
    if label_read:
        g.add(V("labels", frozenset({"batch", "dec"}), "labels", d.cls, stacked=True))
        g.decoder_outputs.append("labels")
    if d.second and d.pcls == "time":
        g.decoder_outputs.append("positions")
    elif d.second:
        g.emit(f'nc.mark_as_loss(nc.cross_entropy(plogits, {d.second}, axis=pos), "pos_ce")')
        g.add(V("positions", frozenset({"batch", "dec"}), "labels", "pos", stacked=True))
        g.decoder_outputs.append("positions")
    for li in extra:
        if li in g.stacked_dims:
            g.add(V(li, frozenset(g.stacked_dims[li] | {"dec"}), stacked=True))
            g.decoder_outputs.append(li)
    after(g, label_read, carried, step_values)
    if g.on("search_extra_loss", 0.3):
        fl = [v for v in g.scopes[0] if v.kind == "float" and not v.stacked and g.static(v) and g.static(v).code]
        if fl:
            v = fl[0]
            g.emit(f'nc.mark_as_loss(nc.reduce_sum({v.name}, axis={g.static(v).code}), "extra")')


def chosen(lines: list[str], roots: set[str]) -> set[str]:
    """The names the step's `lines` bind that depend on `roots` (the chosen label), through
    what they read or the `if` they stand in; to a fixpoint (a state read before its update
    depends on the previous step's)."""
    deps = set(roots)
    for _ in range(3):
        conds: list[tuple[int, bool]] = []  # (indent, condition depends) of the `if`s around
        for line in lines:
            indent = len(line) - len(line.lstrip())
            text = line.strip()
            same = [dep for i, dep in conds if i == indent]  # the `if` an `elif`/`else` continues
            conds = [c for c in conds if c[0] < indent]
            if text.startswith(("if ", "elif ", "else")):
                dep = bool(set(re.findall(r"[A-Za-z_]\w*", text)) & deps) or (not text.startswith("if ") and any(same))
                conds.append((indent, dep))
                continue
            lhs, eq, rhs = text.partition("=")
            if eq and not rhs.startswith("=") and not text.startswith("for "):
                reads = set(re.findall(r"[A-Za-z_]\w*", rhs))
                if reads & deps or any(dep for _, dep in conds):
                    deps.update(re.findall(r"[A-Za-z_]\w*", lhs))
    return deps


def appends(g: Gen, lists: list[str], stack_dyn: list[V], deps: set[str]) -> None:
    """The step's other stacks: values that depend on the chosen labels, or with
    `search_stack_free` values that do not (states that ignore the label, the frame read,
    loop-invariant values), attention weights over a dynamic dim, a `split_dims` of the state;
    the first list always stacks something (a network with `choice` returns a list of its loop)."""
    r = g.r
    step = [v for v in g.scopes[-1] if v.kind == "float" and not v.stacked and not g.dyn(v)]
    free = [v for v in step if v.name not in deps]
    for i, li in enumerate(lists):
        pool = [v for v in step if v.name in deps]
        if free and g.on("search_stack_free", 0.5):
            pool = free
        elif stack_dyn and g.on("search_stack_dyn", 0.5):
            pool = stack_dyn
        elif g.on("search_split_dims", 0.2):
            g.dim("pab", 6)
            g.dim("pa", 2)
            g.dim("pb", 3)
            pool = [g.new("nc.split_dims(nc.tanh(nc.Linear(pab)(s)), axis=pab, dims=(pa, pb))", {"batch", "pa", "pb"})]
            if g.on_own("search_split_axis", 0.5):  # `split` along pb into sizes 1 and 2, both read
                g.dim("pb1", 1)
                g.dim("pb2", 2)
                x, y = g.own_name("search_split_axis", "sx"), g.own_name("search_split_axis", "sy")
                g.emit(f"{x}, {y} = nc.split({pool[0].name}, [pb1, pb2], axis=pb)")
                both = f"{pool[0].name} * nc.reduce_sum({x}, axis=pb1) + nc.reduce_mean({y}, axis=pb2)"
                pool = [g.new_own("search_split_axis", both, {"batch", "pa", "pb"})]  # the dims stacked as before
        elif g.on("search_stack_free", 0.2):  # a loop-invariant value
            inv = [v for v in g.floats() if not v.variant and not v.stacked and not g.dyn(v)]
            pool = inv or pool
        if not pool or (i > 0 and r.random() < 0.3):
            continue
        v = g.pick(pool)
        g.emit(f"{li}.append({v.name})")
        g.stacked_dims[li] = v.dims
    if lists[0] not in g.stacked_dims:
        g.emit(f"{lists[0]}.append(s)")
        g.stacked_dims[lists[0]] = frozenset({"batch", "hidden"})


def after(g: Gen, label_read: bool, carried: list[V], step_values: list[V]) -> None:
    """The loop's values after it (each hypothesis' last in a search): its states, last label
    and step values, in a tensor `if` and in ops, returned."""
    r = g.r
    if not g.on("search_read_after", 0.6):
        return
    last = carried + [v for v in step_values if v.kind == "float" and r.random() < 0.3]
    for v in last:
        g.add(V(v.name, v.dims, v.kind, v.cls, variant=True))
    if label_read:
        g.add(V("label", frozenset({"batch"}), "labels", g.dec.cls, variant=True))
    if g.on("search_after_if", 0.4):
        t = g.pick([v for v in g.floats() if not v.stacked and g.static(v)])
        if label_read and r.random() < 0.6:
            cond = f"label {r.choice(['==', '!='])} {r.randint(0, g.dims[g.dec.cls].size - 1)}"
        else:
            conds = [v for v in last if v.dims == {"batch"}]
            cond = f"{conds[0].name} > 1.5" if conds else "nc.reduce_sum(s, axis=hidden) > 0.0"
        res = g.fresh("z")
        g.emit(f"{res} = {t.name}")
        g.emit(f"if {cond}:")
        g.emit(f"    {res} = {g.same_expr(t)}")
        if r.random() < 0.6:
            g.emit("else:")
            g.emit(f"    {res} = 0.5 * {t.name}")
        g.after_outputs.append(g.add(V(res, t.dims, variant=True)))
    if g.on("search_after_ops", 0.5):
        v = g.pick(last)
        st = g.static(v)
        if st is not None and st.code:  # two ops on one value of the loop
            lin = f"nc.Linear({st.code})({v.name})"
            g.after_outputs.append(
                g.new(f"{lin} / (1.5 + nc.sigmoid(nc.Linear({st.code}, with_bias=False)({v.name})))", v.dims)
            )
        g.ops(r.randint(1, 2))
        if label_read and r.random() < 0.4:
            g.after_outputs.append(g.new("nc.tanh(nc.Embedding(emb)(label))", {"batch", "emb"}))
        g.after_outputs.append(g.scopes[0][-1])
