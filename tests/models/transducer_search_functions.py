"""`transducer_search` whose prediction and joint networks are helper functions that construct
their modules where they are called (eager mode finds their parameters by the call path through
the search: a regression case of tests/diffgen), its state a tuple."""

from netc import Dim, Embedding, Linear, Tensor, batch, concat, network, tanh, transducer_search, zeros

time = Dim("time")
dec_time = Dim("dec_time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 4)
blank = Dim("blank", 1)
emb = Dim("emb", 3)
hidden = Dim("hidden", 5)


def predict(label, state):
    h, c = state
    c = tanh(Linear(hidden)(concat(Embedding(emb)(label), h))) + 0.5 * c
    h = tanh(Linear(hidden, with_bias=False)(c))
    return h, (h, c)


def joint(e, p):
    return Linear(vocab + blank)(tanh(Linear(hidden)(e) + Linear(hidden, with_bias=False)(p)))


@network
def transducer_search_functions(x: Tensor[batch, time, feat]):
    labels, scores = transducer_search(
        tanh(Linear(hidden)(x)),
        axis=time,
        predict=predict,
        joint=joint,
        state=(zeros(batch, hidden), zeros(batch, hidden)),
        label_dim=vocab,
        start=2,
        blank=0,
        beam=3,
        method="time_sync",
        max_sym_per_frame=2,
        out_axis=dec_time,
    )
    return {"labels": labels, "scores": scores}
