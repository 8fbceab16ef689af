"""`transducer_search` in generated programs: a prediction network (a Module or a function, its
state one tensor or a tuple) and a joint network over a sequence's frames, searched greedily, with
modified beam search, time-synchronously or as torchaudio's RNNTBeamSearch (`graves`); its labels
and scores are outputs. RETURNN refuses it (a documented, located refusal): eager and torch are
compared."""

from __future__ import annotations

from .gen import Gen

PREDICT_MODULE = """class TsPredict(nc.Module):
    def __init__(self):
        self.embed = nc.Embedding(emb)
        self.step = nc.Linear(hidden)

    def __call__(self, label, s):
        s = nc.tanh(self.step(nc.concat(self.embed(label), s)))
        return s, s
"""

PREDICT_TUPLE = """class TsPredict(nc.Module):
    def __init__(self):
        self.embed = nc.Embedding(emb)
        self.step = nc.Linear(hidden)
        self.out = nc.Linear(hidden, with_bias=False)

    def __call__(self, label, state):
        h, c = state
        c = nc.tanh(self.step(nc.concat(self.embed(label), h))) + 0.5 * c
        h = nc.tanh(self.out(c))
        return h, (h, c)
"""

PREDICT_FUNCTION = """def ts_predict(label, s):
    s = nc.tanh(nc.Linear(hidden)(nc.concat(nc.Embedding(emb)(label), s)))
    return s, s
"""

JOINT = """def ts_joint(e, p):
    return nc.Linear(vocab + blank)(nc.tanh(nc.Linear(hidden)(e) + nc.Linear(hidden, with_bias=False)(p)))
"""


def transducer_search(g: Gen) -> None:
    # over one dynamic dim the source names (not one only an op makes), one static dim
    seqs = [v for v in g.floats() if len(g.dyn(v)) == 1 and g.dyn(v)[0].code and len(v.dims) == 3 and not v.stacked]
    if not seqs:
        return
    r = g.r
    g.used.add("transducer_search")
    enc = g.pick(seqs)
    axis = g.dyn(enc)[0]
    g.dim("blank", 1)
    g.dim("ts_time")
    form = r.choice(["module", "tuple", "function"])
    g.defs.append({"module": PREDICT_MODULE, "tuple": PREDICT_TUPLE, "function": PREDICT_FUNCTION}[form])
    g.defs.append(JOINT)
    if form == "function":
        predict, state = "ts_predict", "nc.zeros(batch, hidden)"
    else:
        g.emit("ts_prediction = TsPredict()")
        predict = "ts_prediction"
        state = "(nc.zeros(batch, hidden), nc.zeros(batch, hidden))" if form == "tuple" else "nc.zeros(batch, hidden)"
    method = r.choice(["greedy", "modified", "time_sync", "graves"])
    beam = 1 if method == "greedy" else r.choice([1, 2, 3, 4])
    max_sym = 1 if method == "modified" else r.choice([1, 2, 3])
    g.emit(
        f"ts_labels, ts_scores = nc.transducer_search({g.ref(enc)}, axis={axis.code}, predict={predict}, "
        f"joint=ts_joint, state={state}, label_dim=vocab, start={r.randrange(5)}, "
        f"blank={r.choice([-1, 0, 2, 5])}, beam={beam}, method={method!r}, max_sym_per_frame={max_sym}, "
        "out_axis=ts_time)"
    )
    g.decoder_outputs += ["ts_labels", "ts_scores"]
