"""A seeded generator of valid netc models (docs/language.md), for the differential tester.

`generate(seed, features)` writes one model file: 1-3 inputs, work on whole sequences, 1-3
loops of every form (with states, stacks, values read after them, tensor `if`s, nested loops,
`end` loops, a `choice` decoder), losses and outputs. It tracks each value's dims and dtype in
scope, so every op is applied only where the language's rules allow it (broadcasting needs one
operand with all the dims, `Linear` needs one feature dim, ...): a CompileError on a generated
program is a finding (or a documented limitation), not noise.

Numbers are kept well-scaled so that float32 differences stay below 1e-4: Linears are followed
by `tanh`/`sigmoid`, `exp` and `log` get clipped or shifted arguments, `where` selects
continuously (`where(a > b, a, b)`, `where(a > 0, a, 0.1 * a)`). `argmax`, `choice` and `end`
conditions are discontinuous: they read a Linear of a tanh with random weights, where a tie
within 1e-5 is unlikely (a rare mismatch there is a near-tie, not a bug: check by hand).

Each construct has a feature name (FEATURES); a program lists those it used. `KNOWN_FAILING`
(tests/diffgen/known.py) names the features that fail on the current compiler; CI generates
with the others only (`GREEN`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from . import shapes
from .features import FEATURES, GREEN

__all__ = ["FEATURES", "GREEN", "Gen", "Program", "generate"]


@dataclass
class Program:
    seed: int
    source: str
    features: set[str]
    search: bool  # has a `choice` decoder: also check the beam search
    derived_lens: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # dim -> (dim, divisor, plus)
    # dim -> (dim or None, scale, offset): drawn per sequence within scale * that dim's length + offset
    bounded_lens: dict[str, tuple[str | None, int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class D:
    name: str
    code: str | None  # how the source names it (None: a dim only an op makes, e.g. `feat/2`)
    size: int | None  # None: dynamic


@dataclass
class V:
    name: str
    dims: frozenset[str]  # with batch
    kind: str = "float"  # float | labels
    cls: str | None = None  # a labels value's class dim
    variant: bool = True  # in a loop body: depends on the step (a frame or a state)
    split_part: bool = False
    stacked: bool = False  # a list stacked by a loop: operators need stack() first
    seq: str | None = None  # an input or op's sequence: loopable over this dim


@dataclass
class Loop:
    axis: str | None  # the dim iterated over (None: an `end` loop)
    states: list[V]
    end: bool = False
    inner_lists: list[V] = field(default_factory=list)  # lists stacked by loops in its step
    inner_result: V | None = None  # the result of a loop in its step


class Gen:
    def __init__(self, seed: int, features: set[str] | None):
        self.r = random.Random(seed)
        # features added later decide on draws of their own (`on_side`): a seed's program without
        # them stays the program it was (FOUND_SEEDS, tests/diffgen/found/)
        self.side = random.Random(seed * 7919 + 1)
        self.seed = seed
        self.own_streams: dict[str, random.Random] = {}  # `on_own`: one stream per feature
        self.own_names: dict[str, int] = {}  # `new_own`: names counted per feature
        self.allowed = set(FEATURES if features is None else features)
        self.used: set[str] = set()
        self.dims: dict[str, D] = {"batch": D("batch", "batch", 0)}
        self.decls: list[str] = []
        self.defs: list[str] = []
        self.body: list[str] = []
        self.ind = 1
        self.n = 0
        self.scopes: list[list[V]] = [[]]
        self.loops: list[Loop] = []
        self.losses = 0
        self.search = False
        self.derived_lens: dict[str, tuple[str, int, int]] = {}
        self.bounded_lens: dict[str, tuple[str | None, int, int]] = {}
        self.dec = None  # decoder.Dec: the `choice` loop's form, target, class dim, beam and bound
        self.after_outputs: list[V] = []  # values read after the decoder, returned
        self.stacked_dims: dict[str, frozenset[str]] = {}  # a decoder list -> the dims of its items
        self.raw_inputs: set[str] = set()  # float inputs annotated in another order than batch, time, feat
        # instance, in dim, out dim, dims, the loops it was made in (outside them it may be unbound:
        # made after an `end`'s break, a sequence ending at its first step never makes it)
        self.modules: list[tuple[str, str, str, frozenset[str], tuple[Loop, ...]]] = []
        self.params: list[str] = []
        self.decoder_outputs: list[str] = []
        self.made_dims: set[str] = set()  # dynamic dims ops made (max_pool, slice_frames, ...)
        # dynamic dims with no frame for a short sequence (a valid Conv1d's, a slice's, the stacks
        # of a loop whose appends stand after its `break`): a loop over one may run no step
        self.maybe_empty: set[str] = set()

    def source(self) -> str:
        head = ["import netc as nc", "from netc import batch", "", *self.decls, ""]
        for d in self.defs:
            head += ["", d]
        sig = ", ".join(self.params)
        return "\n".join([*head, "", "@nc.network", f"def net({sig}):", *self.body, ""])

    def made_dim(self, name: str) -> str:
        self.dims.setdefault(name, D(name, None, None))
        return name

    # ---- basics
    def on(self, feat: str, p: float = 0.5) -> bool:
        if feat in self.allowed and self.r.random() < p:
            self.used.add(feat)
            return True
        return False

    def on_side(self, feat: str, p: float = 0.5) -> bool:
        """`on`, drawn apart from the program's other choices."""
        if feat in self.allowed and self.side.random() < p:
            self.used.add(feat)
            return True
        return False

    def own(self, feat: str) -> random.Random:
        """The random stream of feature `feat` alone (features added after `two_choices`: drawing
        one changes neither the program's other choices nor another late feature's)."""
        if feat not in self.own_streams:
            self.own_streams[feat] = random.Random(f"{self.seed}/{feat}")
        return self.own_streams[feat]

    def on_own(self, feat: str, p: float = 0.5) -> bool:
        """`on`, drawn on the feature's own stream (`own`)."""
        if feat in self.allowed and self.own(feat).random() < p:
            self.used.add(feat)
            return True
        return False

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def emit(self, line: str) -> None:
        self.body.append("    " * self.ind + line)

    def dim(self, name: str, size: int | None = None, code: str | None = None) -> D:
        if name not in self.dims:
            code = code or name
            if code == name:
                self.decls.append(f'{name} = nc.Dim("{name}"{"" if size is None else f", {size}"})')
            self.dims[name] = D(name, code, size)
        return self.dims[name]

    def visible(self) -> list[V]:
        return [v for s in self.scopes for v in s]

    def add(self, v: V) -> V:
        self.scopes[-1].append(v)
        return v

    def static(self, v: V) -> D | None:
        s = [self.dims[d] for d in v.dims if self.dims[d].size]
        return s[0] if len(s) == 1 else None

    def dyn(self, v: V) -> list[D]:
        return [self.dims[d] for d in sorted(v.dims) if self.dims[d].size is None]

    def ref(self, v: V) -> str:
        return f"nc.stack({v.name})" if v.stacked else v.name

    def in_loop(self) -> bool:
        return bool(self.loops)

    def floats(self, need_static: bool = True) -> list[V]:
        out = [v for v in self.visible() if v.kind == "float" and (self.static(v) is not None or not need_static)]
        if self.loops and any(v.dims & self.made_dims for v in out) and not self.on("made_dim_in_loop", 0.5):
            out = [v for v in out if not v.dims & self.made_dims]
        loop = self.loops[-1] if self.loops else None
        if loop is not None and loop.axis is not None:
            # values over the loop's own axis are whole sequences: allowed, but keep frames likelier
            out = [v for v in out if loop.axis not in v.dims] * 3 + [v for v in out if loop.axis in v.dims]
        return out

    def pick(self, vs: list[V]) -> V:
        """Prefer recent values (and, in a loop, the step's own) so programs chain their work."""
        if self.in_loop():
            var = [v for v in vs if v.variant]
            if var and self.r.random() < 0.8:
                vs = var
        k = len(vs)
        return vs[min(k - 1, int(k * (1 - self.r.random() ** 2)))]

    def new(self, expr: str, dims, kind: str = "float", cls: str | None = None, prefix: str = "v", **kw) -> V:
        v = V(self.fresh(prefix), frozenset(dims), kind, cls, **kw)
        self.emit(f"{v.name} = {expr}")
        return self.add(v)

    def own_name(self, feat: str, prefix: str) -> str:
        """A name counted on feature `feat`'s own counter (`<prefix><k>`), as `new_own`'s."""
        self.own_names[feat] = self.own_names.get(feat, 0) + 1
        return f"{prefix}{self.own_names[feat]}"

    def new_own(self, feat: str, expr: str, dims, **kw) -> V:
        """`new` named from a counter of feature `feat`'s own (`<feat>_<k>`): the names after it, and
        so the program where it is pruned away, stay what they were without the feature."""
        self.own_names[feat] = self.own_names.get(feat, 0) + 1
        v = V(f"{feat}_{self.own_names[feat]}", frozenset(dims), "float", None, **kw)
        self.emit(f"{v.name} = {expr}")
        return self.add(v)

    def variant_of(self, *vs: V) -> bool:
        return any(v.variant for v in vs)

    def statics(self) -> list[D]:
        return [self.dims[n] for n in ("feat", "hidden", "model")]

    # ---- ops producing a float value with one feature dim (or none, for reductions)
    def op(self) -> V | None:
        fl = self.floats()
        if not fl:
            return None
        a = self.pick(fl)
        raw = [v for v in fl if v.name in self.raw_inputs]  # an input annotated in another order, itself
        if raw and self.r.random() < 0.25:
            a = self.pick(raw)
        sa = self.static(a)
        ops = ["linear", "linear", "unary", "binary", "binary"]
        for f in (
            "where",
            "concat",
            "split",
            "split_dims",
            "reduce_static",
            "reduce_dyn",
            "softmax",
            "attention",
            "layer_norm",
            "bias",
            "embedding",
            "expand_static",
            "expand_dyn",
            "dropout",
            "stop_gradient",
            "helper",
            "module",
            "tensor_if",
            *shapes.OP_FEATURES,
            "training_flag",
            "search_only",
        ):
            if f in self.allowed:
                ops.append(f)
        kind = self.r.choice(ops)
        var = a.variant
        others = [d for d in a.dims if d != sa.name]
        if kind == "linear":
            out = self.r.choice(self.statics())
            bias = "" if not self.on("linear_nobias", 0.3) else ", with_bias=False"
            act = self.r.choice(["tanh", "sigmoid", "tanh"])
            return self.new(f"nc.{act}(nc.Linear({out.code}{bias})({self.ref(a)}))", others + [out.name], variant=var)
        if kind == "unary" and self.on("unary", 0.9):
            f = self.r.choice(
                [
                    "nc.tanh({})",
                    "nc.sigmoid({})",
                    "nc.relu({})",
                    "nc.gelu({})",
                    "nc.exp(nc.clip({}, -2.0, 2.0))",
                    "nc.log(nc.sigmoid({}) + 0.5)",
                    "nc.sqrt(nc.sigmoid({}) + 0.1)",
                    "abs({})",
                    "-{}",
                    "0.5 * {} ** 2",
                    "nc.clip({}, -0.5, 0.5)",
                ]
            )
            if self.on("maximum_scaled", 0.15):  # TensorFlow's grappler made this a leaky ReLU
                f = f"nc.maximum({{}} * {self.r.choice(['2.0', '0.5', '-1.5'])}, {self.ref(a)})"
            return self.new(f.format(self.ref(a)), a.dims, variant=var)
        if kind == "binary" and self.on("binary", 0.9):
            bs = [b for b in self.floats(need_static=False) if b.dims <= a.dims and b is not a]
            if not bs:
                return None
            b = self.pick(bs)
            x, y = (a, b) if self.r.random() < 0.5 else (b, a)
            f = self.r.choice(["{} + {}", "{} - {}", "{} * {}", "nc.maximum({}, {})", "nc.minimum({}, {})"])
            if self.r.random() < 0.15:
                return self.new(f"{self.ref(x)} / (1.5 + nc.sigmoid({self.ref(y)}))", a.dims, variant=var or b.variant)
            return self.new(f.format(self.ref(x), self.ref(y)), a.dims, variant=var or b.variant)
        if kind == "where" and self.on("where"):
            bs = [b for b in self.floats(need_static=False) if b.dims <= a.dims and b is not a]
            if bs and self.r.random() < 0.5:
                b = self.pick(bs)
                x, y = self.ref(a), self.ref(b)
                return self.new(f"nc.where({x} > {y}, {x}, {y})", a.dims, variant=var or b.variant)
            return self.new(f"nc.where({self.ref(a)} > 0.0, {self.ref(a)}, 0.1 * {self.ref(a)})", a.dims, variant=var)
        if kind == "concat" and "concat" in self.allowed:
            bs = [
                b
                for b in self.floats()
                if b is not a and self.static(b) and b.dims - {self.static(b).name} == a.dims - {sa.name}
            ]
            bs = [b for b in bs if self.static(b).name != sa.name and (sa.size + self.static(b).size) <= 16]
            if not bs:
                return None
            b = self.pick(bs)
            if self.in_loop() and a.variant != b.variant and not self.on("concat_invariant", 0.5):
                return None
            self.used.add("concat")
            sb = self.static(b)
            name = f"{sa.name}+{sb.name}"
            code = f"({sa.code} + {sb.code})" if sa.code and sb.code else None
            self.dims.setdefault(name, D(name, code, sa.size + sb.size))
            return self.new(f"nc.concat({self.ref(a)}, {self.ref(b)})", others + [name], variant=var or b.variant)
        if kind == "split" and self.on("split"):
            out = self.r.choice(self.statics())
            two = f"2*{out.name}"
            self.dims.setdefault(two, D(two, f"2 * {out.code}", 2 * out.size))
            p, q = self.fresh("p"), self.fresh("q")
            self.emit(f"{p}, {q} = nc.split(nc.Linear(2 * {out.code})({self.ref(a)}), 2)")
            self.add(V(p, frozenset(others + [out.name]), variant=var, split_part=True))
            return self.add(V(q, frozenset(others + [out.name]), variant=var, split_part=True))
        if kind == "split_dims" and sa.size == 6 and sa.code and self.on("split_dims"):
            pa, pb = self.dim("pa", 2), self.dim("pb", 3)
            sd = f"nc.split_dims({self.ref(a)}, axis={sa.code}, dims=({pa.code}, {pb.code}))"
            if self.on("merge_dims"):
                mix = self.dim("mix", 6)
                return self.new(
                    f"nc.merge_dims({sd}, dims=(pb, pa), out_dim={mix.code})", others + ["mix"], variant=var
                )
            if self.on_own("split_axis", 0.4):
                return self.split_axis(sd, others, var)
            return self.new(f"nc.reduce_max({sd}, axis={pb.code})", others + ["pa"], variant=var)
        if kind == "reduce_static" and sa.code and self.on("reduce_static"):
            f = self.r.choice(["reduce_sum", "reduce_mean", "reduce_max"])
            return self.new(f"nc.{f}({self.ref(a)}, axis={sa.code})", others, variant=var)
        if kind == "reduce_dyn":
            ds = [d for d in self.dyn(a) if d.code and not (self.loops and d.name == self.loops[-1].axis)]
            if ds and self.on("reduce_dyn"):
                f = self.r.choice(["reduce_sum", "reduce_mean", "reduce_max"])
                d = self.r.choice(ds)
                return self.new(f"nc.{f}({self.ref(a)}, axis={d.code})", a.dims - {d.name}, variant=var)
        if kind == "softmax" and self.on("softmax"):
            ds = [d for d in [sa, *self.dyn(a)] if d.code]
            if ds:
                d = self.r.choice(ds)
                f = self.r.choice(["softmax", "log_softmax"]) if d is sa else "softmax"
                return self.new(f"nc.{f}({self.ref(a)}, axis={d.code})", a.dims, variant=var)
        if kind == "attention":
            return self.attention(a)
        if kind == "layer_norm" and self.on("layer_norm"):
            return self.new(f"nc.LayerNorm()({self.ref(a)})", a.dims, variant=var)
        if kind == "bias" and sa.code and self.on("bias"):
            return self.new(f"nc.Bias({sa.code})({self.ref(a)})", a.dims, variant=var)
        if kind == "embedding" and self.on("embedding"):
            return self.embedding(a)
        if kind == "expand_static":
            bs = [
                b
                for b in self.floats()
                if self.static(b)
                and self.static(b).name != sa.name
                and b.dims - {self.static(b).name} == a.dims - {sa.name}
            ]
            bs = [b for b in bs if sa.code and self.static(b).code]
            if bs and self.on("expand_static"):
                b = self.pick(bs)
                sb = self.static(b)
                return self.new(
                    f"nc.reduce_max(nc.expand({self.ref(a)}, {sb.code}) + nc.expand({self.ref(b)}, {sa.code}), axis={sa.code})",
                    b.dims,
                    variant=var or b.variant,
                )
        if kind == "expand_dyn":
            bs = [
                b
                for b in self.floats()
                if len(b.dims - a.dims) == 1
                and a.dims <= b.dims
                and self.dims[next(iter(b.dims - a.dims))].size is None
                and self.dims[next(iter(b.dims - a.dims))].code
            ]
            if not self.on("expand_pool", 1.0 if "expand_pool" in self.allowed else 0):
                bs = [b for b in bs if "ptime" not in b.dims - a.dims]
            else:
                self.used.discard("expand_pool")
            if bs and self.on("expand_dyn"):
                b = self.pick(bs)
                d = next(iter(b.dims - a.dims))
                if d == "ptime":
                    self.used.add("expand_pool")
                return self.new(
                    f"nc.expand({self.ref(a)}, {self.dims[d].code}) * {self.ref(b)}", b.dims, variant=var or b.variant
                )
        if kind == "dropout" and self.on("dropout", 0.3):
            return self.new(f"nc.dropout({self.ref(a)}, 0.1)", a.dims, variant=var)
        if kind == "stop_gradient" and self.on("stop_gradient", 0.3):
            return self.new(f"nc.stop_gradient({self.ref(a)})", a.dims, variant=var)
        if kind == "helper" and self.on("helper", 0.4):
            return self.helper(a)
        if kind == "module" and self.on("module", 0.4):
            return self.module(a)
        if kind == "tensor_if" and self.on("tensor_if", 0.3):
            return self.tensor_if(a)
        if kind in shapes.OP_FEATURES:
            return shapes.op(self, kind, a)
        if kind == "training_flag" and self.on("training_flag", 0.5):
            if self.r.random() < 0.5:
                return self.tensor_if(a, training=True)
            return self.new(f"nc.where(nc.training(), 0.5 * {self.ref(a)}, {self.ref(a)})", a.dims, variant=var)
        if kind == "search_only" and self.on("search_only", 0.5):
            return self.new(f"nc.where(nc.searching(), 0.5 * {self.ref(a)}, {self.ref(a)})", a.dims, variant=var)
        return None

    def attention(self, q: V) -> V | None:
        """Keys [batch, T, S] and a query with S but not T: weights over T, a context like q."""
        sq = self.static(q)
        keys = [
            k
            for k in self.floats()
            if self.static(k)
            and self.static(k).name == sq.name
            and len(self.dyn(k)) == 1
            and self.dyn(k)[0].code
            and self.dyn(k)[0].name not in q.dims
            and not (
                self.loops and self.loops[-1].axis == self.dyn(k)[0].name and not self.on("attention_in_loop", 0.7)
            )
        ]
        if not keys or not sq.code or not self.on("attention"):
            return None
        k = self.pick(keys)
        t = self.dyn(k)[0]
        w = self.new(
            f"nc.softmax(nc.dot({self.ref(k)}, {self.ref(q)}, reduce={sq.code}), axis={t.code})",
            (q.dims - {sq.name}) | {t.name},
            variant=q.variant or k.variant,
            prefix="w",
        )
        return self.new(f"nc.dot({w.name}, {self.ref(k)}, reduce={t.code})", q.dims, variant=w.variant, prefix="ctx")

    def embedding(self, a: V) -> V:
        sa = self.static(a)
        lab = self.new(
            f"nc.argmax(nc.Linear(vocab)(nc.tanh({self.ref(a)})), axis=vocab)",
            a.dims - {sa.name},
            kind="labels",
            cls="vocab",
            variant=a.variant,
            prefix="lab",
        )
        self.used.add("argmax")
        return self.embed(lab)

    def embed(self, lab: V) -> V:
        if self.on("embedding_class_dim", 0.2):
            return self.new(f"nc.Embedding({lab.cls})({lab.name})", lab.dims | {lab.cls}, variant=lab.variant)
        emb = self.dims["emb"]
        if not self.on("tied", 0.3):
            return self.new(f"nc.Embedding(emb)({lab.name})", lab.dims | {emb.name}, variant=lab.variant)
        # an output layer whose weight is the embedding's, transposed (a Transformer LM's logits)
        m = self.fresh("tied_emb")
        self.emit(f"{m} = nc.Embedding(emb)")
        e = self.new(f"{m}({lab.name})", lab.dims | {emb.name}, variant=lab.variant)
        cls = self.dims[lab.cls]
        self.new(
            f"nc.Linear({cls.code}, weight={m}.weight)(nc.tanh({e.name}))", lab.dims | {cls.name}, variant=e.variant
        )
        return e

    def helper(self, a: V) -> V:
        sa = self.static(a)
        out = self.r.choice(self.statics())
        name = self.fresh("helper")
        default = self.on("helper_default", 0.5)
        sig = "a, scale=0.5" if default else "a, scale"
        self.defs.append(
            f"def {name}({sig}):\n"
            f"    z = nc.Linear({out.code})(a)\n"
            f"    return nc.tanh(z * scale + nc.Linear({out.code}, with_bias=False)(nc.tanh(a)))\n"
        )
        others = a.dims - {sa.name}
        call = f"{name}({self.ref(a)})" if default and self.r.random() < 0.5 else f"{name}({self.ref(a)}, 0.8)"
        return self.new(call, others | {out.name}, variant=a.variant)

    def module(self, a: V) -> V:
        """A Module class and an instance made at its first call; `module_shared`: an instance
        is called again later, on values with the same dims."""
        sa = self.static(a)
        for inst, _, outd, dims, made_in in self.modules:
            if len(made_in) > len(self.loops) or any(a is not b for a, b in zip(made_in, self.loops)):
                continue
            if dims == a.dims and self.on("module_shared", 0.7):
                return self.new(f"{inst}({self.ref(a)})", (a.dims - {sa.name}) | {outd}, variant=a.variant)
        out = self.r.choice(self.statics())
        cls = self.fresh("Block")
        method = self.on("module_method", 0.5)
        nested = self.on("nested_module", 0.3)
        lines = [f"class {cls}(nc.Module):", "    def __init__(self, d):", "        super().__init__()"]
        if nested:
            inner = self.fresh("Inner")
            self.defs.append(
                f"class {inner}(nc.Module):\n    def __init__(self, d):\n        self.lin = nc.Linear(d)\n"
                f"        self.norm = nc.LayerNorm()\n\n    def __call__(self, x):\n"
                f"        return self.norm(nc.tanh(self.lin(x)))\n"
            )
            lines.append(f"        self.inner = {inner}(d)")
        if not nested or self.on("unused_submodule", 0.3):  # nested: `proj` is constructed, never called
            lines.append("        self.proj = nc.Linear(d)")
        lines.append("")
        lines.append("    def __call__(self, x):")
        core = "self.inner(x)" if nested else "nc.tanh(self.proj(x))"
        lines.append(f"        return self.gate(x, {core})" if method else f"        return {core}")
        if method:
            lines[3:3] = ["        self.gate_lin = nc.Linear(d)"]
            lines += ["", "    def gate(self, x, y):", "        return y * nc.sigmoid(self.gate_lin(x))"]
        self.defs.append("\n".join(lines) + "\n")
        inst = self.fresh("block")
        self.emit(f"{inst} = {cls}({out.code})")
        self.modules.append((inst, sa.name, out.name, a.dims, tuple(self.loops)))
        if self.on("unused_module_result", 0.2):
            self.emit(f"{inst}({self.ref(a)})")
        return self.new(f"{inst}({self.ref(a)})", (a.dims - {sa.name}) | {out.name}, variant=a.variant)

    def split_axis(self, sd: str, others: list[str], var: str | None) -> V:
        """`split(..., axis=)` of one of `sd`'s two static dims (pa: 2, pb: 3; as a per-head
        projection's query, key and value), both parts read; the value has the dims of the
        `reduce_max` over pb it stands for, so the program's other choices stay as they were."""
        x, y = self.own_name("split_axis", "sx"), self.own_name("split_axis", "sy")
        if self.own("split_axis").random() < 0.5:  # along pa: parts [pa1, pb] sort pb first (a permute)
            pa1, pa2 = self.dim("pa1", 1), self.dim("pa2", 1)
            self.emit(f"{x}, {y} = nc.split({sd}, [{pa1.code}, {pa2.code}], axis=pa)")
            both = f"nc.reduce_sum({x}, axis={pa1.code}) - nc.reduce_sum({y}, axis={pa2.code})"
            expr = f"nc.reduce_max({sd}, axis=pb) + nc.reduce_mean({both}, axis=pb)"
        else:  # along pb, into sizes 1 and 2
            pb1, pb2 = self.dim("pb1", 1), self.dim("pb2", 2)
            self.emit(f"{x}, {y} = nc.split({sd}, [{pb1.code}, {pb2.code}], axis=pb)")
            expr = f"nc.reduce_sum({x}, axis={pb1.code}) * nc.reduce_max({y}, axis={pb2.code})"
        return self.new_own("split_axis", expr, others + ["pa"], variant=var)

    def same_expr(self, t: V, exclude_split: bool = False) -> str:
        """An expression with exactly `t`'s dims (a state update, an `if` branch)."""
        st = self.static(t)
        cands = [
            v
            for v in self.floats(need_static=False)
            if v.dims <= t.dims and v is not t and not (exclude_split and v.split_part)
        ]
        lin = (
            [
                v
                for v in self.floats()
                if v.dims - {self.static(v).name} == t.dims - {st.name} and not (exclude_split and v.split_part)
            ]
            if st
            else []
        )
        if lin and self.r.random() < 0.6:
            v = self.pick(lin)
            bias = ", with_bias=False" if self.on("linear_nobias", 0.2) else ""
            return f"nc.tanh(nc.Linear({st.code})({self.ref(v)}) + nc.Linear({st.code}{bias})({self.ref(t)}))"
        if cands:
            v = self.pick(cands)
            return f"nc.tanh(0.5 * {self.ref(t)} + {self.ref(v)})"
        return f"0.9 * {self.ref(t)}"

    def tensor_if(self, a: V, training: bool = False) -> V | None:
        """`if <bool [batch]>:` (`training`: `if nc.training():`) assigning one variable bound
        before it in every branch."""
        conds = [v for v in self.floats(need_static=False) if v.dims == {"batch"}]
        targets = [v for v in self.visible() if v.kind == "float" and not v.stacked and self.static(v)]
        if self.loops:
            targets = [v for v in targets if self.loops[-1].axis not in v.dims]
        if not targets:
            return None
        t = self.pick(targets)
        if training:
            cond = "nc.training()"
        elif conds:
            c = self.pick(conds)
            cond = f"{c.name} > 0.0"
        else:
            st = self.static(t)
            if not st.code or t.dims != {"batch", st.name}:
                return None
            cond = f"nc.reduce_sum({t.name}, axis={st.code}) > 0.0"
        excl = not self.on("split_in_if", 0.5)
        res = V(self.fresh("r"), t.dims, variant=t.variant)
        self.emit(f"{res.name} = {t.name}")
        self.emit(f"if {cond}:")
        self.ind += 1
        self.emit(f"{res.name} = {self.same_expr(t, excl)}")
        self.ind -= 1
        if not training and self.on("elif", 0.4):
            self.emit(f"elif {cond.replace('> 0.0', '< -0.5')}:")
            self.ind += 1
            self.emit(f"{res.name} = 0.5 * {t.name}")
            self.ind -= 1
        if self.r.random() < 0.6:
            self.emit("else:")
            self.ind += 1
            self.emit(f"{res.name} = {self.same_expr(t, excl)}")
            self.ind -= 1
        if not excl and "split_in_if" in self.used and not any(v.split_part for v in self.visible()):
            self.used.discard("split_in_if")
        return self.add(res)

    def ops(self, n: int) -> None:
        for _ in range(n * 3):
            if n <= 0:
                break
            if self.op() is not None:
                n -= 1


def generate(seed: int, features: set[str] | None = None) -> Program:
    """A valid model for `seed`, using only `features` (None: every feature)."""
    from .build import build

    g = Gen(seed, features)
    build(g)
    from .prune import prune_source

    return Program(seed, prune_source(g.source()), set(g.used), g.search, g.derived_lens, g.bounded_lens)
