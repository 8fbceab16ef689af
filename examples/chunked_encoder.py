"""A streaming encoder: the input in chunks of 4 frames (`for c in chunks(x, chunk)`), as audio
arrives. Each chunk's frames are weighted by an attention pooling over the chunk (its valid
frames only: a sequence's last chunk is shorter), a state carries a summary from chunk to chunk,
and each frame's output (its own features, the state of the chunks before, the current chunk's
summary) is stacked back over `time` for a CTC loss. No frame sees a later chunk: the encoder can
run chunk by chunk as the input comes."""

from netc import (
    Dim,
    Labels,
    LayerNorm,
    Linear,
    Tensor,
    batch,
    chunks,
    ctc_loss,
    dot,
    mark_as_loss,
    network,
    reduce_sum,
    relu,
    softmax,
    tanh,
    zeros,
)

time = Dim("time")
label_time = Dim("label_time")
feat = Dim("feat", 8)
model = Dim("model", 16)
vocab = Dim("vocab", 5)
blank = Dim("blank", 1)
chunk = Dim("chunk", 4)


@network
def chunked_encoder(x: Tensor[batch, time, feat], y: Labels[batch, label_time, vocab]):
    state = zeros(batch, model)
    frames = []
    for c in chunks(x, chunk):  # c: [batch, chunk, feat], the chunk's frames
        h = relu(Linear(model)(c) + Linear(model, with_bias=False)(state))
        for _ in range(2):  # a residual feed-forward layer applied twice (unrolled; one module)
            h = h + relu(Linear(model)(LayerNorm()(h)))
        w = softmax(reduce_sum(tanh(Linear(model)(h)), axis=model), axis=chunk)  # attention pooling
        summary = dot(w, h, reduce=chunk)  # [batch, model]
        state = tanh(Linear(model)(summary) + state)
        frames.append(h + summary)
    logits = Linear(vocab + blank)(frames)
    mark_as_loss(ctc_loss(logits, y, axis=vocab + blank), "ctc")
    return {"logits": logits, "state": state}
