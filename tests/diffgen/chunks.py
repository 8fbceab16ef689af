"""Chunked loops in generated programs: `for c in nc.chunks(x, chunk):` over a top-level sequence
(chunks of 1 to 4 frames), a state carried from chunk to chunk, attention and reductions over the
chunk's frames, maybe a static `range` unrolled in the body and a memory over a static window dim
the chunk attends over, maybe a cache of the last frames joined to each chunk (limited-context
attention over the cache and the chunk with its validity, a causal convolution over that window);
per-frame values stacked back over the sequence's dim, per-chunk ones over the chunks' own dim."""

from __future__ import annotations

from .gen import Gen, V


def chunked_loop(g: Gen) -> None:
    r = g.r
    seqs = [
        v
        for v in g.scopes[0]
        if v.kind == "float"
        and not v.stacked
        and (s := g.static(v)) is not None
        and s.code
        and len(dyn := g.dyn(v)) == 1
        and dyn[0].code
        and dyn[0].name not in g.maybe_empty
        and v.dims == {"batch", dyn[0].name, s.name}
    ]
    if not seqs or not g.on("chunked_loop", 0.3):
        return
    v = g.pick(seqs)
    d, s = g.dyn(v)[0], g.static(v)
    chunk = g.dim(g.fresh("chunk"), r.randint(1, 4))
    hd = r.choice(g.statics())
    h, frames, per_chunk = g.fresh("h"), g.fresh("cf"), g.fresh("cs")
    g.emit(f"{h} = nc.zeros(batch, {hd.code})")
    mem = win = None
    if g.on("chunked_window", 0.5):
        win = g.dim("win", 5)
        mem = g.fresh("mem")
        g.emit(f"{mem} = nc.zeros(batch, {win.code}, {s.code})")
    cache = _cache_before(g, chunk, s)
    g.emit(f"{frames} = []")
    g.emit(f"{per_chunk} = []")
    c, e, ctx = g.fresh("c"), g.fresh("e"), g.fresh("ctx")
    axis = f", axis={d.code}" if r.random() < 0.5 else ""
    g.emit(f"for {c} in nc.chunks({g.ref(v)}, {chunk.code}{axis}):")
    g.ind += 1
    g.emit(f"{e} = nc.tanh(nc.Linear({hd.code})({c}) + nc.Linear({hd.code}, with_bias=False)({h}))")
    if g.on("static_range", 0.5):
        k = g.fresh("k")
        g.emit(f"for {k} in range({r.randint(1, 3)}):")
        g.emit(f"    {e} = {e} + nc.tanh(nc.Linear({hd.code})({e}))")
    if mem is not None:
        q, att = g.fresh("q"), g.fresh("att")
        g.emit(f"{q} = nc.Linear({s.code})({c})")
        g.emit(f"{att} = nc.softmax(nc.dot({q}, {mem}, reduce={s.code}), axis={win.code})")
        g.emit(f"{e} = {e} + nc.Linear({hd.code})(nc.dot({att}, {mem}, reduce={win.code}))")
        g.emit(f"{mem} = nc.tanh(0.5 * {mem} + nc.dot({att}, {c}, reduce={chunk.code}))")
    if cache is not None:
        _cache_step(g, cache, c, e, hd)
    how = r.choice(["attention", "mean", "max", "sum"])
    if how == "attention":
        w = g.fresh("w")
        g.emit(f"{w} = nc.softmax(nc.reduce_sum({e}, axis={hd.code}), axis={chunk.code})")
        g.emit(f"{ctx} = nc.dot({w}, {e}, reduce={chunk.code})")
    else:
        g.emit(f"{ctx} = nc.reduce_{how}({e}, axis={chunk.code})")
    g.emit(f"{h} = nc.tanh(nc.Linear({hd.code})({ctx}) + {h})")
    g.emit(f"{frames}.append({e} * {h})" if r.random() < 0.5 else f"{frames}.append({e})")
    g.emit(f"{per_chunk}.append({ctx})")
    g.ind -= 1
    made = g.made_dim(_chunks_dim(g, d.name))
    g.made_dims.add(made)
    g.add(V(frames, frozenset({"batch", d.name, hd.name}), stacked=True, variant=False))
    g.add(V(per_chunk, frozenset({"batch", made, hd.name}), stacked=True, variant=False))
    g.add(V(h, frozenset({"batch", hd.name}), variant=False))
    # (the memory, over two static dims, is not read after the loop: a loss of it `expand`ed over
    # a dynamic dim fails in RETURNN, a bug of its own: "output time-batch-dim unexpected")


def _cache_before(g: Gen, chunk, s) -> dict | None:
    """A cache of the last 1 to 5 frames (over `s`) and their validity, before the loop."""
    if not g.on("chunk_cache", 0.5):
        return None
    cw = g.dim(g.fresh("cw"), g.r.randint(1, 5))
    kv = g.dim(g.fresh("kv"), cw.size + chunk.size)
    cf = g.dim(g.fresh("cf_n"), chunk.size)
    mem, valid = g.fresh("cache"), g.fresh("valid")
    g.emit(f"{mem} = nc.zeros(batch, {cw.code}, {s.code})")
    g.emit(f"{valid} = nc.full(batch, {cw.code}, value=False, dtype='bool')")
    return {"cw": cw, "kv": kv, "cf": cf, "mem": mem, "valid": valid, "s": s, "chunk": chunk}


def _cache_step(g: Gen, k: dict, c: str, e: str, hd) -> None:
    """In the body: the chunk joined to the cache; attention over it (the padding and the frames
    before the sequence masked), maybe a causal convolution over it, the cache updated."""
    cw, kv, cf, mem, valid, s, chunk = k["cw"], k["kv"], k["cf"], k["mem"], k["valid"], k["s"], k["chunk"]
    j, ok, q, att = g.fresh("j"), g.fresh("ok"), g.fresh("q"), g.fresh("att")
    g.emit(f"{j} = nc.join_chunk({mem}, {c}, cache_axis={cw.code}, axis={chunk.code}, out_axis={kv.code})")
    g.emit(
        f"{ok} = nc.join_chunk({valid}, nc.full(batch, {chunk.code}, value=True, dtype='bool'), "
        f"cache_axis={cw.code}, axis={chunk.code}, out_axis={kv.code})"
    )
    g.emit(f"{q} = nc.Linear({s.code})({c})")
    g.emit(f"{att} = nc.softmax(nc.where({ok}, nc.dot({q}, {j}, reduce={s.code}), -1e30), axis={kv.code})")
    g.emit(f"{e} = {e} + nc.Linear({hd.code})(nc.dot({att}, {j}, reduce={kv.code}))")
    if g.r.random() < 0.5:  # a causal convolution over the window: the chunk's frames
        conv = f"nc.Conv1d({s.code}, {cw.size + 1}, padding='causal')({j}, axis={kv.code}, out_axis={cf.code})"
        g.emit(f"{e} = {e} + nc.Linear({hd.code})(nc.to_chunk({conv}, axis={cf.code}, like={c}))")
    else:  # the chunk's own frames back from the window
        back = f"nc.slice_static({j}, axis={kv.code}, start={cw.size}, out_axis={cf.code})"
        g.emit(f"{e} = {e} + nc.Linear({hd.code})(nc.to_chunk({back}, axis={cf.code}, like={c}))")
    g.emit(f"{mem} = nc.slice_static({j}, axis={kv.code}, start={chunk.size}, out_axis={cw.code})")
    g.emit(f"{valid} = nc.slice_static({ok}, axis={kv.code}, start={chunk.size}, out_axis={cw.code})")


def _chunks_dim(g: Gen, dim: str) -> str:
    """The name the compiler gives the chunks' own dim (`<dim>_chunks`, `_2`, ... on a clash)."""
    base, k = f"{dim}_chunks", 1
    name = base
    while name in g.dims:
        k += 1
        name = f"{base}_{k}"
    return name
