"""`ctc_prefix_search` with an LM function in generated programs: a Module (its state one tensor,
or an LSTM cell's tuple) or a helper function (unnormalised scores: the search uses them as they
are) stepping over the labels. RETURNN refuses it (a documented, located refusal): eager and
torch are compared."""

from __future__ import annotations

from .gen import Gen

LM_MODULE = """class ClLm(nc.Module):
    def __init__(self):
        self.embed = nc.Embedding(emb)
        self.step = nc.Linear(hidden)
        self.out = nc.Linear(vocab)

    def __call__(self, label, s):
        s = nc.tanh(self.step(nc.concat(self.embed(label), s)))
        return nc.log_softmax(self.out(s), axis=vocab), s
"""

LM_TUPLE = """class ClLm(nc.Module):
    def __init__(self):
        self.embed = nc.Embedding(emb)
        self.lstm = nc.LstmCell(hidden)
        self.out = nc.Linear(vocab)

    def __call__(self, label, state):
        h, c = self.lstm(self.embed(label), state)
        return nc.log_softmax(self.out(h), axis=vocab), (h, c)
"""

LM_FUNCTION = """def cl_lm(label, s):
    s = nc.tanh(nc.Linear(hidden)(nc.concat(nc.Embedding(emb)(label), s)))
    return nc.Linear(vocab)(s), s
"""


def lm_function(g: Gen) -> str:
    """The arguments `lm=..., lm_state=..., bos=...` of a prefix search with an LM function (its
    definition added to the program)."""
    r = g.r
    form = r.choice(["module", "tuple", "function"])
    g.defs.append({"module": LM_MODULE, "tuple": LM_TUPLE, "function": LM_FUNCTION}[form])
    if form == "function":
        lm, state = "cl_lm", "nc.zeros(batch, hidden)"
    else:
        lm = g.fresh("ctc_lm")
        g.emit(f"{lm} = ClLm()")
        state = "(nc.zeros(batch, hidden), nc.zeros(batch, hidden))" if form == "tuple" else "nc.zeros(batch, hidden)"
    return f", lm={lm}, lm_state={state}, bos={r.randrange(5)}"
