"""Constructs of the transformer/conformer ops: sin/cos, logsumexp, one_hot, range_over, mask_inf
(any step's work), and, on whole sequences before the loops, slice_frames, pad_frames, fit_frames,
compact_frames, shift_right and self-attention over a `replace_dim` view (ops that make dims stand outside loops)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # gen.py imports this module
    from .gen import Gen, V

OP_FEATURES = ("sin_cos", "logsumexp", "one_hot", "range_over")
SEQ_FEATURES = ("slice_frames", "pad_frames", "fit_frames", "compact_frames", "shift_right", "self_attention")
SLICES = ((None, -1), (1, None), (-2, None), (None, 3), (1, -1), (-3, -1))


def op(g: Gen, kind: str, a: V) -> V | None:
    """One of OP_FEATURES on a float value `a` with one static dim (None when it does not apply),
    its result maybe summed up along one of its dims (`cumsum`, drawn on a stream of its own)."""
    v = _op(g, kind, a)
    if v is None or v.kind != "float" or v.stacked:
        return v
    loop_axis = g.loops[-1].axis if g.loops else None
    ds = [g.dims[d] for d in sorted(v.dims) if d != "batch" and g.dims[d].code and d != loop_axis]
    if ds and g.on_own("cumsum", 0.3):
        d = g.own("cumsum").choice(ds)
        return g.new(f"nc.cumsum({v.name}, axis={d.code}) * 0.25", v.dims, variant=v.variant)
    return _int_parts(g, _mask_inf(g, v))


def _int_parts(g: Gen, v: V) -> V:
    """`v` plus a float of labels' parts (`//`, `%` of their numbers, negative ones and tensor
    divisors too: floor semantics), drawn on a stream of its own, in `v`'s place."""
    labs = [x for x in g.visible() if x.kind == "labels" and not x.stacked and x.dims <= v.dims]
    if not labs or not g.on_own("int_div", 0.3):
        return v
    r = g.own("int_div")
    lab = r.choice(labs).name
    c, k, m = r.randint(0, 5), r.choice([2, 3, 4]), r.randint(1, 3)
    parts = [
        f"({lab} - {c}) // {k}",
        f"({lab} + {m}) % {k}",
        f"{lab} // ({lab} % {k} + 1)",
        f"({c} - {lab}) % ({lab} % 2 + {m})",
    ]
    ints = " + ".join(r.sample(parts, 2))
    out = g.new_own("int_div", f'{v.name} + 0.25 * nc.cast({ints}, "float32")', v.dims, variant=v.variant)
    g.scopes[-1].remove(v)
    return out


def _mask_inf(g: Gen, v: V) -> V:
    """`mask_inf` of `tanh(v)` (−inf where a label's position or a threshold on `v` says), then `exp` (0 there:
    later ops keep finite numbers), drawn on a stream of its own, in `v`'s place."""
    statics = [g.dims[d] for d in sorted(v.dims) if g.dims[d].code and g.dims[d].size]
    if not statics or not g.on_own("mask_inf", 0.25):
        return v
    r = g.own("mask_inf")
    d = r.choice(statics)
    if r.random() < 0.5:  # one position along a static dim (the EOS threshold's label 0)
        cond = f"nc.range_over({d.code}) == {r.randrange(d.size)}"
    else:  # a threshold on the values themselves (maybe none or every one)
        cond = f"{v.name} < {r.choice(['-0.5', '0.0', '0.5'])}"
    # exp of `tanh`: an unbounded value's exp (of a logsumexp, say) reaches 1e4 and more, where
    # float32's rounding alone is over the oracle's 1e-4 (generator seed 68760)
    out = g.new_own("mask_inf", f"nc.exp(nc.mask_inf(nc.tanh({v.name}), {cond}))", v.dims, variant=v.variant)
    g.scopes[-1].remove(v)  # in its place: the later draws pick among as many values as without it
    return out


def _op(g: Gen, kind: str, a: V) -> V | None:
    r, sa, var = g.r, g.static(a), a.variant
    if kind == "sin_cos" and g.on("sin_cos"):
        return g.new(f"nc.{r.choice(['sin', 'cos'])}({g.ref(a)})", a.dims, variant=var)
    if kind == "logsumexp":
        loop_axis = g.loops[-1].axis if g.loops else None
        ds = [d for d in [sa, *g.dyn(a)] if d.code and d.name != loop_axis]
        if ds and g.on("logsumexp"):
            d = r.choice(ds)
            return g.new(f"nc.logsumexp({g.ref(a)}, axis={d.code})", a.dims - {d.name}, variant=var)
    if kind == "one_hot":
        labs = [v for v in g.visible() if v.kind == "labels" and v.cls and not v.stacked]
        labs = [v for v in labs if not any(g.dims[d].size for d in v.dims)]  # the class dim the only static one
        if labs and g.on("one_hot"):
            lab = g.pick(labs)
            return g.new(f"nc.one_hot({lab.name})", lab.dims | {lab.cls}, variant=lab.variant)
    if kind == "range_over" and sa.code:
        ds = [d for d in g.dyn(a) if d.code and "batch" in a.dims and not (g.loops and d.name == g.loops[-1].axis)]
        if ds and r.random() < 0.6 and g.on("range_over"):
            d = r.choice(ds)
            if r.random() < 0.5:  # a sinusoidal encoding of the positions
                pos = f'nc.expand(nc.range_over({d.code}, dtype="float32"), {sa.code})'
                return g.new(f"{g.ref(a)} + nc.sin({pos} * 0.3)", a.dims, variant=var)
            return g.new(f"nc.where(nc.range_over({d.code}) < 2, {g.ref(a)}, 0.5 * {g.ref(a)})", a.dims, variant=var)
        if g.on("range_over"):
            return g.new(f'{g.ref(a)} * nc.cos(nc.range_over({sa.code}, dtype="float32") * 0.5)', a.dims, variant=var)
    return None


def sequences(g: Gen, labels: V | None) -> None:
    """Whole-sequence constructs over a dynamic dim (before the loops: they may make dims)."""
    r = g.r
    for feat in SEQ_FEATURES:
        seqs = [v for v in g.floats() if not v.stacked and len(g.dyn(v)) == 1 and g.dyn(v)[0].code]
        if not seqs or not g.on(feat, 0.35):
            continue
        a = g.pick(seqs)
        d, sa = g.dyn(a)[0], g.static(a)
        if feat == "compact_frames" and (not sa.code or a.dims != frozenset({"batch", d.name, sa.name})):
            continue  # its mask: one bool per frame of the value [batch, d, feature]
        if feat == "shift_right":
            if labels is not None and r.random() < 0.5:
                g.new(f"nc.shift_right(y, axis=time, value={r.randint(0, 4)})", labels.dims, "labels", "vocab")
            else:
                g.new(f"nc.shift_right({a.name}, axis={d.code}, value=-0.5, amount={r.choice([1, 2])})", a.dims)
            continue
        new = g.dim(g.fresh("frames"))
        g.made_dims.add(new.name)
        if feat == "slice_frames":
            g.maybe_empty.add(new.name)
            start, stop = r.choice(SLICES)
            bounds = "".join(f", {k}={b}" for k, b in (("start", start), ("stop", stop)) if b is not None)
            call = f"nc.slice_frames({a.name}, axis={d.code}{bounds}, out_axis={new.code})"
            v = g.new(call, _moved(a, d, new))
            v.seq = new.name
        elif feat == "pad_frames":
            left, right = r.choice([(1, 0), (0, 2), (2, 1)])
            call = (
                f"nc.pad_frames({a.name}, axis={d.code}, left={left}, right={right}, value=0.25, out_axis={new.code})"
            )
            g.new(call, _moved(a, d, new)).seq = new.name
        elif feat == "fit_frames":  # padded onto a new dim, each sequence's first frames read back over d
            right = r.choice([1, 2])
            padded = f"nc.pad_frames({a.name}, axis={d.code}, right={right}, value=0.5, out_axis={new.code})"
            g.new(f"nc.fit_frames({padded}, axis={new.code}, out_axis={d.code})", a.dims).seq = d.name
        elif feat == "compact_frames":  # the frames where a mask computed from them holds (maybe none)
            g.maybe_empty.add(new.name)
            mask = f"nc.reduce_sum({a.name}, axis={sa.code}) > {r.choice(['0.0', '0.5', '-0.5'])}"
            call = f"nc.compact_frames({a.name}, {mask}, axis={d.code}, out_axis={new.code})"
            g.new(call, _moved(a, d, new)).seq = new.name
        elif sa.code:  # self-attention: keys and values over a second view of the frames
            k = g.new(f"nc.replace_dim({a.name}, axis={d.code}, out_axis={new.code})", _moved(a, d, new))
            scores = f"nc.dot({a.name}, {k.name}, reduce={sa.code})"
            if len(a.dims) == 3 and g.on("rel_pos", 0.6):  # plus scores of relative positions
                rel = g.dim(g.fresh("rel"))
                g.made_dims.add(rel.name)
                enc = f'nc.sin(nc.expand(nc.rel_positions(axis={d.code}, out_axis={rel.code}, dtype="float32"), {sa.code}) * 0.2)'
                by_rel = f"nc.dot({a.name}, {enc}, reduce={sa.code})"
                scores += f" + nc.rel_shift({by_rel}, axis={rel.code}, query_axis={d.code}, kv_axis={new.code})"
            scores = f"({scores}) * 0.5"
            if g.on("chunk_mask", 0.5):  # limited-context (chunked) attention: a chunk mask on the scores
                size, left = r.choice([1, 2, 3]), r.choice([0, 1, 2, None])
                mask = f"nc.chunk_mask(query_axis={d.code}, kv_axis={new.code}, chunk_size={size}, left_chunks={left})"
                scores = f"nc.where({mask}, {scores}, -1e30)"
            w = g.new(
                f"nc.softmax({scores}, axis={new.code})",
                (a.dims - {sa.name}) | {new.name},
                prefix="w",
            )
            g.new(f"nc.dot({w.name}, {k.name}, reduce={new.code})", a.dims, prefix="att")


def _moved(a: V, d, new) -> frozenset[str]:
    return (a.dims - {d.name}) | {new.name}
