"""Loops of every form: states, stacks, values read after them, `end`, nested loops."""

from __future__ import annotations

from .gen import Gen, Loop, V

LOOP_FORMS = (
    "loop_iter",
    "loop_range_index",
    "loop_unstack",
    "loop_zip",
    "loop_reversed",
    "loop_end_range",
    "loop_end_maxlen",
    "loop_while",
)


def loop(g: Gen, nested: bool = False) -> None:
    r = g.r
    if not nested and g.on("end_invariant_body", 0.15) and invariant_end_loop(g):
        return
    forms = [f for f in LOOP_FORMS if f in g.allowed]
    outer_axis = g.loops[-1].axis if g.loops else None
    seqs = [
        v
        for v in g.floats()
        if len(g.dyn(v)) == 1 and g.dyn(v)[0].name != outer_axis and (not g.loops or not v.variant)
    ]
    seqs = list({id(v): v for v in seqs}.values())
    # a sequence shorter than a valid Conv1d's filter has no frame on `ctime`: a loop over it runs
    # no step (stacks nothing, assigns nothing)
    if any("ctime" in v.dims for v in seqs) and not g.on("conv_loop", 1.0):
        seqs = [v for v in seqs if "ctime" not in v.dims]
    raw = [v for v in seqs if v.name in g.raw_inputs]  # an input annotated in another order, itself
    if raw and r.random() < 0.75:
        seqs = raw
    if nested:
        forms = [f for f in forms if f in ("loop_iter", "loop_reversed", "loop_zip")]
    if not seqs:
        forms = [f for f in forms if f.startswith("loop_end") or f == "loop_while"]
    if not forms:
        return
    form = r.choice(forms)
    g.used.add(form)
    for v in g.visible():  # values from before the loop are invariant in it
        v.variant = False
    frames: list[tuple[str, V]] = []  # (name, frame value) bound by the loop header
    header: str
    axis: str | None = None
    if form in ("loop_iter", "loop_reversed", "loop_unstack", "loop_range_index"):
        s = g.pick(seqs)
        axis = g.dyn(s)[0].name
        f = g.fresh("f")
        frames.append((f, V(f, s.dims - {axis})))
        it = g.ref(s)
        if form == "loop_unstack" and g.dims[axis].code:
            it = f"nc.unstack({g.ref(s)}, axis={g.dims[axis].code})"
        elif form == "loop_unstack":
            g.used.discard("loop_unstack")
        if form == "loop_reversed":
            it = f"reversed({it})"
        if form == "loop_range_index":
            inputs = [v for v in g.scopes[0] if v.name in ("x", "e") and v.seq == axis]
            if not inputs:
                form = "loop_iter"
                g.used.discard("loop_range_index")
                g.used.add("loop_iter")
            else:
                header = f"for ti in range({inputs[0].name}.max_seq_len):"
                frames.clear()
        if form != "loop_range_index":
            header = f"for {f} in {it}:"
    elif form == "loop_zip":
        s = g.pick(seqs)
        axis = g.dyn(s)[0].name
        others = [v for v in seqs if v is not s and g.dyn(v)[0].name == axis]
        if not others:
            others = [s]
        s2 = g.pick(others)
        f1, f2 = g.fresh("f"), g.fresh("f")
        frames += [(f1, V(f1, s.dims - {axis})), (f2, V(f2, s2.dims - {axis}))]
        header = f"for {f1}, {f2} in zip({g.ref(s)}, {g.ref(s2)}):"
    else:
        if form == "loop_end_range":
            header = f"for _ in range({r.randint(2, 6)}):"
        elif form == "loop_end_maxlen":
            header = f"for _ in range({r.randint(1, 2)} * x.max_seq_len + {r.randint(1, 2)}):"
        else:
            header = "while True:"
    end = axis is None
    # states and lists, bound before the loop
    states: list[V] = []
    nstates = 1 + (r.randint(0, 2) if g.on("multi_state", 0.5) else 0)
    kinds = []
    for _ in range(nstates):
        k = r.choice(["plain", "plain", "lstm", "gru", "dyn"])
        if k == "lstm" and not g.on("tuple_state", 0.6) or k == "gru" and not g.on("gru_cell", 0.6):
            k = "plain"
        kinds.append(k)
    state_specs = []
    shifts: dict[str, str] = {}  # a plain state -> the state its previous value goes to (`state_shift`)
    if not nested and form != "loop_reversed" and g.on("cum_concat", 0.5):
        # a state grown by a frame per step (over a dim of its own), attended over in the step;
        # only its `cum_concat` reads it (not a visible value)
        kinds.append("grow")
    for k in kinds:
        s_dim = r.choice(g.statics())
        if k == "grow":
            grow = g.dim(g.fresh("grow"))
            name = g.fresh("hist")
            g.emit(f"{name} = nc.empty(batch, {grow.code}, {s_dim.code})")
            state_specs.append(("grow", name, (grow, s_dim)))
            continue
        if k == "dyn":
            keys = [v for v in g.floats() if len(g.dyn(v)) == 1 and g.dyn(v)[0].name != axis and g.dyn(v)[0].code]
            keys = [v for v in keys if v.dims == {"batch", g.dyn(v)[0].name, g.static(v).name}]
            if end and not g.on("state_dyn_dim_end", 0.7):
                keys = []
            if not keys or not g.on("state_dyn_dim", 0.7):
                k = "plain"
            else:
                kv = g.pick(keys)
                e = g.dyn(kv)[0]
                name = g.fresh("acc")
                g.emit(f"{name} = nc.zeros(batch, {e.code})")
                states.append(V(name, frozenset({"batch", e.name})))
                state_specs.append(("dyn", name, kv))
                continue
        if k == "lstm":
            h, c = g.fresh("h"), g.fresh("c")
            g.emit(f"{h} = nc.zeros(batch, {s_dim.code})")
            g.emit(f"{c} = nc.zeros(batch, {s_dim.code})")
            states += [V(h, frozenset({"batch", s_dim.name})), V(c, frozenset({"batch", s_dim.name}))]
            state_specs.append(("lstm", (h, c), s_dim))
            continue
        name = g.fresh("h")
        inits = [v for v in g.floats() if v.dims == {"batch", s_dim.name} and not v.stacked]
        if inits and g.on("state_from_value", 0.4):
            g.emit(f"{name} = {g.pick(inits).name}")
        else:
            g.emit(f"{name} = nc.zeros(batch, {s_dim.code})")
        states.append(V(name, frozenset({"batch", s_dim.name})))
        state_specs.append((k, name, s_dim))
        if k == "plain" and g.on_own("state_shift", 0.3):  # takes the state's previous value each step
            shifts[name] = shift = g.own_name("state_shift", "shift")
            g.emit(f"{shift} = nc.zeros(batch, {s_dim.code})")
    counter = None
    if form == "loop_while" or (end and r.random() < 0.5):
        counter = g.fresh("n")
        g.emit(f"{counter} = nc.zeros(batch)")
    lists = [g.fresh("out") for _ in range(r.randint(1, 2) if g.on("append", 0.85) else 0)]
    for li in lists:
        g.emit(f"{li} = []")
    header_at = len(g.body)  # where a value read after the loop gets bound before it (below)
    g.emit(header)
    g.ind += 1
    g.scopes.append([])
    lp = Loop(axis, states, end)
    g.loops.append(lp)
    if form == "loop_range_index":
        idx = [v for v in g.visible() if axis in v.dims and len(g.dyn(v)) == 1 and g.static(v)]
        two = [v for v in g.visible() if axis in v.dims and len(g.dyn(v)) == 2 and v.kind == "float"]
        for v in g.r.sample(idx, min(len(idx), 2)):
            frames.append(("", g.new(f"{g.ref(v)}[ti]", v.dims - {axis}, prefix="f")))
        if two and g.on("index_two_dyn", 0.5):
            v = g.pick(two)
            g.new(f"{g.ref(v)}[ti]", v.dims - {axis}, prefix="f")
    for name, fv in frames:
        if name:
            g.add(fv)
    last_frame = None  # a frame (or an op of it) read after the loop: each sequence's last
    named = [(name, fv) for name, fv in frames if name]
    if named and g.on("frame_read_after", 0.3):
        name, fv = g.r.choice(named)
        last_frame = g.new(name if r.random() < 0.5 else f"nc.tanh({name})", fv.dims, prefix="a")
    # a loop over frames reads one in every state update (a loop that reads none of its
    # frames is a construct of its own: `frame_unused`)
    step_in = [fv for _, fv in frames if len(fv.dims) == 2 and g.static(fv)]
    if not step_in or g.on("frame_unused", 0.2):
        step_in = []
    for s in states:
        g.add(s)
    if counter:
        g.add(V(counter, frozenset({"batch"})))
    # in an `end` loop, values computed from the previous state (before its update) are a
    # construct of their own (`end_prev_state_value`): otherwise the step's work follows the update
    prev_first = not end or g.on("end_prev_state_value", 0.5)
    if prev_first:
        g.ops(r.randint(1, 3))
    nest = not nested and g.on("loop_nested", 0.3) and (not end or g.on("nested_in_end", 0.5))
    nest_after = nest and r.random() < 0.4  # the inner loop reads the states this step made
    if nest and not nest_after:
        inner_loop(g, states)
    # state updates (before any `end`)
    for spec in state_specs:
        kind = spec[0]
        if kind == "grow":
            _, name, (grow, sd) = spec
            # what reads the grown state also reads a value of the step (RETURNN: see grow_rules.py)
            fl = [
                v
                for v in g.floats()
                if len(v.dims) == 2 and not v.stacked and g.static(v) and "batch" in v.dims and v.variant
            ]
            src = step_in[0] if step_in else g.pick(fl) if fl else None
            if src is None:
                continue
            g.emit(f"{name} = nc.cum_concat({name}, nc.tanh(nc.Linear({sd.code})({src.name})), axis={grow.code})")
            qs = [v for v in g.floats() if v.dims == {"batch", sd.name} and not v.stacked and v.variant]
            q = g.ref(g.pick(qs)) if qs else f"nc.Linear({sd.code})({src.name})"
            w = g.new(
                f"nc.softmax(nc.dot({name}, {q}, reduce={sd.code}), axis={grow.code})",
                {"batch", grow.name},
                prefix="w",
            )
            g.new(f"nc.dot({w.name}, {name}, reduce={grow.code})", {"batch", sd.name}, prefix="ctx")
            g.scopes[-1].remove(w)  # a value over the grown dim stays in its step: not read later
            continue
        if kind == "dyn":
            _, name, kv = spec
            old = next(v for v in g.visible() if v.name == name)
            qs = [v for v in g.floats() if v.dims == {"batch", g.static(kv).name}]
            e = g.dyn(kv)[0]
            if qs:
                q = g.pick(qs)
                sk = g.static(kv)
                g.emit(
                    f"{name} = {name} + nc.softmax(nc.dot({g.ref(kv)}, {g.ref(q)}, reduce={sk.code}), axis={e.code})"
                )
            else:
                g.emit(f"{name} = 0.9 * {name} + 0.1")
            g.add(V(name, old.dims))
            g.new(f"nc.dot({name}, {g.ref(kv)}, reduce={e.code})", kv.dims - {e.name}, prefix="ctx")
        elif kind == "lstm":
            _, (h, c), sd = spec
            ins = [v for v in g.floats() if len(v.dims) == 2 and not v.stacked]
            x_in = step_in[0].name if step_in else g.pick(ins).name if ins else h
            g.emit(f"{h}, {c} = nc.LstmCell({sd.code})({x_in}, ({h}, {c}))")
            g.add(V(h, frozenset({"batch", sd.name})))
            g.add(V(c, frozenset({"batch", sd.name})))
        elif kind == "gru":
            _, h, sd = spec
            ins = [v for v in g.floats() if len(v.dims) == 2 and not v.stacked]
            x_in = step_in[0].name if step_in else g.pick(ins).name if ins else h
            g.emit(f"{h} = nc.GruCell({sd.code})({x_in}, {h})")
            g.add(V(h, frozenset({"batch", sd.name})))
        else:
            _, h, sd = spec
            old = next(v for v in reversed(g.visible()) if v.name == h)
            shift = shifts.get(h)
            if shift:
                g.emit(f"{shift}_prev = {h}")
            add = f" + 0.5 * {shift}" if shift else ""
            if step_in:
                f = step_in[0]
                g.emit(
                    f"{h} = nc.tanh(nc.Linear({sd.code})({f.name}) + nc.Linear({sd.code}, with_bias=False)({h})){add}"
                )
            else:
                g.emit(f"{h} = {g.same_expr(old)}{add}")
            if shift:  # after the update: the state's previous value, not its new one
                g.emit(f"{shift} = {shift}_prev")
            g.add(V(h, old.dims))
    if nest_after:
        inner_loop(g, states)
    if counter:
        g.emit(f"{counter} = {counter} + 1.0")
        g.add(V(counter, frozenset({"batch"})))
    g.ops(r.randint(0, 2) if prev_first else r.randint(1, 3))
    labels_v = None
    if g.on("stacked_labels", 0.3):
        fl = [v for v in g.floats() if len(v.dims) == 2 and v.variant]
        if fl:
            labels_v = g.new(
                f"nc.argmax(nc.Linear(vocab)(nc.tanh({g.pick(fl).name})), axis=vocab)",
                {"batch"},
                "labels",
                "vocab",
                prefix="lab",
            )
            g.used.add("argmax")
    after_side = end and r.random() < 0.3 and g.on("append_after_end", 1.0)
    if end:
        if counter and (form == "loop_while" or r.random() < 0.5):
            data = [v for v in g.floats(need_static=False) if v.dims == {"batch"} and v.variant and v.name != counter]
            lim = r.randint(2, 5)
            if data:
                cond = f"nc.maximum({counter} - {lim}.5, {g.pick(data).name} - 0.7) > 0.0"
            else:
                cond = f"{counter} > {lim}.5"
        elif labels_v is not None:
            cond = f"{labels_v.name} == 0"
        else:
            fl = [v for v in g.floats() if len(v.dims) == 2 and v.variant]
            v = g.pick(fl) if fl else states[0]
            sd = g.static(v)
            # not 0.2: a softmax's mean over a dim of 5 is 1/5, a tie each framework rounds its own
            # way (seed 320037); no 1/n is 0.23
            cond = f"nc.reduce_mean({v.name}, axis={sd.code}) > 0.23" if sd and sd.code else f"{counter} > 2.5"
        if after_side:
            g.emit(f"if nc.end({cond}):")
            g.emit("    break")
            before_break = {id(v) for v in g.scopes[-1]}
            g.ops(r.randint(1, 2))

    # appends
    dyn_ok = end and g.on("end_stack_dyn", 0.3)  # an `end` loop stacking values over dynamic dims

    def stackable_dims(v: V) -> bool:
        return not v.stacked and ((not g.dyn(v) or dyn_ok) if end else axis not in v.dims)

    stackable = [v for v in g.scopes[-1] if stackable_dims(v) and v.variant]
    if g.on("invariant_append", 0.2):
        inv = [v for v in g.floats() if not v.variant and stackable_dims(v) and v.kind == "float"]
        if inv:
            stackable = inv
    appended: list[tuple[str, V]] = []
    inner_lists = [v for v in lp.inner_lists if axis not in v.dims]  # not over this loop's own dim
    for li in lists:
        if li == lists[0] and inner_lists and g.on("list_of_lists", 0.5):  # stacked over both loops
            v = g.pick(inner_lists)
            g.emit(f"{li}.append({v.name})")
            appended.append((li, v))
            continue
        cands = stackable
        if li == lists[0] and lp.inner_result is not None and g.r.random() < 0.7:  # the inner loop's result
            cands = [lp.inner_result]
        if labels_v is not None and li == lists[-1] and labels_v in cands:
            cands = [labels_v]
        if not cands:
            continue
        v = g.pick(cands)
        g.emit(f"{li}.append({v.name})")
        appended.append((li, v))
    made = axis if not end else g.made_dim(f"{appended[0][0]}_time") if appended else None
    if end and after_side and made is not None:  # a sequence that ends at its first step stacks nothing
        g.maybe_empty.add(made)
    # values read after the loop
    read_after = []
    bound = {s.name for s in states} | {name for name, _ in frames}
    cands = [v for v in g.scopes[-1] if v.variant and not v.stacked and v.name not in bound]
    if not g.on("own_axis_after", 0.3):
        cands = [v for v in cands if axis not in v.dims]
    if g.on("invariant_read_after", 0.15):
        inv = [v for v in g.floats() if not v.variant and axis not in v.dims and not v.stacked and v.kind == "float"]
        inv = [v for v in inv if any(v is w for w in g.scopes[-1])]
        cands = inv or cands
    if after_side:  # values read after the loop: on the appends' side of the `end` (RETURNN)
        cands = [v for v in cands if id(v) not in before_break]
        if not g.on("after_break", 1.0):
            cands = []
    if end and not g.on("dyn_read_after_end", 0.5):  # a value with a dynamic dim, after an `end` loop
        cands = [v for v in cands if not g.dyn(v)]
    if end and not g.on("read_after_end", 0.7):
        cands = []
    if axis in g.maybe_empty:  # a loop that ran no step for a sequence assigned nothing (Python: unbound)
        cands = []
    if not g.on("labels_read_after", 0.5):
        cands = [v for v in cands if v.kind != "labels"]
    over_raw = axis is not None and axis in raw_dims(g)  # over the dim of an input in another order
    if last_frame is not None and axis not in g.maybe_empty:
        read_after.append(last_frame)
    elif cands and g.on("read_after", 0.8 if over_raw else 0.5):
        v = g.pick(cands)
        if after_side and id(v) not in before_break:
            # assigned after the break: a sequence that ends at its first step never assigns it,
            # so Python (and netc) need it bound before the loop
            if v.kind != "float" or any(g.dims[d].size is None or not g.dims[d].code for d in v.dims - {"batch"}):
                v = None
            else:
                codes = ", ".join(g.dims[d].code for d in sorted(v.dims - {"batch"}))
                g.body.insert(header_at, "    " * (g.ind - 1) + f"{v.name} = nc.zeros(batch, {codes})")
        if v is not None:
            read_after.append(v)
    if end and not after_side:
        g.emit(f"if nc.end({cond}):")
        g.emit("    break")
    g.ind -= 1
    g.scopes.pop()
    g.loops.pop()
    final_states = {}
    for s in states:
        final_states[s.name] = V(s.name, s.dims, variant=True)
    for v in final_states.values():
        g.add(v)
    for v in read_after:
        g.add(V(v.name, v.dims, v.kind, v.cls, variant=True))
    if made is None and appended:
        return
    for li, v in appended:
        g.add(V(li, v.dims | {made}, v.kind, v.cls, variant=True, stacked=True, seq=made))
    if appended and g.on("stack_op", 0.3):
        li, v = appended[0]
        if v.kind == "float":
            g.new(f"nc.stack({li}) * 2.0", v.dims | {made})


def inner_loop(g: Gen, outer_states: list[V]) -> None:
    """A loop in the step of another, over a sequence from before the outer loop (with
    `loop_nested_same_dim` over the outer loop's own dim, whose whole sequences its stack mixes
    in); one result."""
    outer = g.loops[-1].axis
    seqs = [v for v in g.floats() if not v.variant and len(g.dyn(v)) == 1 and g.dyn(v)[0].code and g.static(v)]
    same = [v for v in seqs if g.dyn(v)[0].name == outer]
    seqs = [v for v in seqs if g.dyn(v)[0].name != outer]
    if same and g.on("loop_nested_same_dim", 0.4):
        seqs = same
    if any("ctime" in v.dims for v in seqs) and not g.on("conv_loop", 1.0):  # as in `loop`
        seqs = [v for v in seqs if "ctime" not in v.dims]
    raw = [v for v in seqs if v.name in g.raw_inputs]
    if raw and g.r.random() < 0.5:
        seqs = raw
    if not seqs:
        return
    g.used.add("loop_nested")
    s = g.pick(seqs)
    e = g.dyn(s)[0]
    sd = g.r.choice(g.statics())
    st, f = g.fresh("s"), g.fresh("g")
    from_outer = [v for v in outer_states if v.dims == {"batch", sd.name}]
    if from_outer and g.on("inner_state_from_outer", 0.3):
        g.emit(f"{st} = {from_outer[0].name}")
    else:
        g.emit(f"{st} = nc.zeros(batch, {sd.code})")
    q = [v for v in g.floats() if v.variant and v.dims == {"batch", sd.name}]
    extra = f" + {g.pick(q).name}" if q else ""
    lp = g.loops[-1]
    if outer is not None and g.on("nested_inner_end", 0.25):  # an `end` loop, its state from the outer step's
        x_in = any(v.name == "x" for v in g.scopes[0])
        bound = g.r.choice([str(g.r.randint(2, 4)), "x.max_seq_len" if x_in else "3"])
        # a name of its own: `_` of an earlier loop holds a Python int before the outer loop
        g.emit(f"for {g.fresh('_k')} in range({bound}):")
        g.emit(f"    {st} = nc.tanh(nc.Linear({sd.code}, with_bias=False)({st}){extra} + 0.5)")
        g.emit(f"    if nc.end(nc.reduce_sum({st}, axis={sd.code}) > {g.r.choice(['0.0', '0.5'])}):")
        g.emit("        break")
        lp.inner_result = g.add(V(st, frozenset({"batch", sd.name}), variant=bool(q)))
        return
    stack = g.r.random() < (0.8 if e.name == outer else 0.5)
    lst = g.fresh("inner")
    if stack:
        g.emit(f"{lst} = []")
    it = f"reversed({s.name})" if g.on("nested_reversed", 0.3) else s.name
    g.emit(f"for {f} in {it}:")
    g.emit(f"    {st} = nc.tanh(nc.Linear({sd.code})({f}) + nc.Linear({sd.code}, with_bias=False)({st}){extra})")
    if stack:
        if e.name == outer:
            item = whole_or_state(g, st, sd, outer_states)
        else:
            item = frame_or_state(g, st, f, g.static(s), sd, outer_states)
        var = bool(q) or item != st  # a `where` on the outer state varies with the outer step
        g.emit(f"    {lst}.append({item})")
        lp.inner_result = g.new(f"nc.reduce_mean({lst}, axis={e.code})", {"batch", sd.name}, prefix="m", variant=var)
        lp.inner_lists.append(V(lst, frozenset({"batch", e.name, sd.name}), variant=var))
    else:  # the inner loop's result varies with the outer step only if it reads the step's values
        lp.inner_result = g.add(V(st, frozenset({"batch", sd.name}), variant=bool(q)))


def frame_or_state(g: Gen, st: str, f: str, fd, sd, outer_states: list[V]) -> str:
    """With `nested_mix`: the inner state, or where the outer state says so, the inner frame
    (each frame of the stack mixes the outer step's values and the inner loop's)."""
    conds = [v for v in outer_states if g.static(v) and g.static(v).code]
    if not conds or not fd.code or not g.on("nested_mix", 0.5):
        return st
    c = g.pick(conds)
    frame = f if fd.name == sd.name else f"nc.tanh(nc.Linear({sd.code})({f}))"
    return f"nc.where(nc.argmax({c.name}, axis={g.static(c).code}) > {g.r.randint(0, 2)}, {frame}, {st})"


def whole_or_state(g: Gen, st: str, sd, outer_states: list[V]) -> str:
    """In a loop nested in one over the same dim: the inner state, or where the outer state says
    so, a whole sequence of that dim reduced (each frame of the stack mixes both)."""
    outer = g.dims[g.loops[-1].axis]
    whole = [v for v in g.floats() if not v.variant and outer.name in v.dims and len(v.dims) == 3 and g.static(v)]
    conds = [v for v in outer_states if g.static(v) and g.static(v).code]
    if not whole or not conds or not outer.code:
        return st
    w, c = g.pick(whole), g.pick(conds)
    red = f"nc.reduce_{g.r.choice(['sum', 'mean'])}({g.ref(w)}, axis={outer.code})"
    if g.static(w).name != sd.name:
        red = f"nc.tanh(nc.Linear({sd.code})({red}))"
    cond = f"nc.argmax({c.name}, axis={g.static(c).code}) > {g.r.randint(0, 2)}"
    return f"nc.where({cond}, {red}, {st})"


def invariant_end_loop(g: Gen) -> bool:
    """An `end` loop whose body reads only values from before it: a loop-invariant end condition
    and appended value, the append after the `end` (the ending step not stacked) or before it."""
    r = g.r
    items = [v for v in g.floats() if not g.dyn(v) and not v.stacked]
    if not items or "x" not in {v.name for v in g.scopes[0]}:
        return False
    conds = [v for v in g.floats(need_static=False) if v.dims == {"batch"} and not v.stacked]
    if conds:
        c = g.pick(conds).name
    else:
        it = g.pick(items)
        c = f"nc.reduce_mean({it.name}, axis={g.static(it).code})" if g.static(it).code else None
    if c is None:
        return False
    item = g.pick(items)
    lst = g.fresh("out")
    g.emit(f"{lst} = []")
    if r.random() < 0.5:
        g.emit(f"for _ in range({r.randint(2, 6)}):")
    else:
        g.emit(f"for _ in range({r.randint(1, 2)} * x.max_seq_len + {r.randint(0, 2)}):")
    body = [f"    if nc.end({c} > {r.choice(['0.0', '0.3', '-0.3'])}):", "        break"]
    after = r.random() < 0.7
    body.insert(2 if after else 0, f"    {lst}.append({item.name})")
    for line in body:
        g.emit(line)
    made = g.made_dim(f"{lst}_time")
    if after:  # a sequence that ends at its first step stacks nothing
        g.maybe_empty.add(made)
    g.add(V(lst, item.dims | {made}, variant=True, stacked=True, seq=made))
    return True


def raw_dims(g: Gen) -> set[str]:
    """The dynamic dims of the inputs annotated in another order than batch, time, feat."""
    return {d.name for v in g.scopes[0] if v.name in g.raw_inputs for d in g.dyn(v)}
