"""An unconditional language model: the decoder's only input is its target, its first label a
constant, its bound a constant. Trained with cross entropy; searched from nothing but a batch
size (`batch_size`, else the target's batch size: RETURNN reads the target for it)."""

from netc import Dim, Embedding, Labels, Linear, batch, choice, cross_entropy, end, full, mark_as_loss, network, tanh

time = Dim("time")
vocab = Dim("vocab", 5)
hidden = Dim("hidden", 8)


@network
def search_no_inputs(y: Labels[batch, time, vocab]):
    label = full(batch, value=0, class_dim=vocab)
    h = full(batch, hidden, value=0.0)
    logits, labels = [], []
    for _ in range(6):
        h = tanh(Embedding(hidden)(label) + Linear(hidden)(h))
        scores = Linear(vocab)(h)
        logits.append(scores)
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels}
