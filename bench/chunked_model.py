"""The chunked benchmark model: `examples/chunked_encoder.py` at speech-model sizes (80 features,
256 wide, chunks of 16 frames = 160 ms of 10 ms frames), the input arriving chunk by chunk."""

import netc as nc
from netc import Dim, Tensor, batch

time = Dim("time")
feat = Dim("feat", 80)
model = Dim("model", 256)
vocab = Dim("vocab", 32)
chunk = Dim("chunk", 16)


@nc.network
def chunked(x: Tensor[batch, time, feat]):
    state = nc.zeros(batch, model)
    frames = []
    for c in nc.chunks(x, chunk):  # c: [batch, chunk, feat]
        h = nc.relu(nc.Linear(model)(c) + nc.Linear(model, with_bias=False)(state))
        for _ in range(2):  # a residual feed-forward layer applied twice
            h = h + nc.relu(nc.Linear(model)(nc.LayerNorm()(h)))
        w = nc.softmax(nc.reduce_sum(nc.tanh(nc.Linear(model)(h)), axis=model), axis=chunk)
        state = nc.tanh(nc.Linear(model)(nc.dot(w, h, reduce=chunk)) + state)
        frames.append(h)
    return {"logits": nc.Linear(vocab)(frames), "state": state}
