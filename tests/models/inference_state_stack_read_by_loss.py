"""A state read after its loop (an output) whose stack only a loss reads: the inference module
drops the loss and the stack, so the state is no longer each sequence's last frame of that stack
(`inference_graph` lowers its copy again; it raised a KeyError in the torch emitter)."""

from netc import Dim, Linear, Tensor, batch, mark_as_loss, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def state_stack_read_by_loss(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    ys = []
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + h)
        ys.append(h)
    mark_as_loss(reduce_sum(ys, axis=hidden), "l")
    return {"h": h}
