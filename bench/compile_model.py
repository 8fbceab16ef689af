"""A generated model of about N statements, for compile-time benchmarks.

    python bench/compile_model.py 1000 > model.py

One `@network` of N // 10 blocks, each a loop of the shape models have (an input projection,
a recurrent update, a stacked output) and a few statements around it: ten statements a block.
"""

from __future__ import annotations

import sys

HEAD = """from netc import Dim, Linear, Tensor, batch, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 8)
hidden = Dim("hidden", 8)


@network
def generated(x: Tensor[batch, time, feat]):
    src = Linear(hidden)(x)
"""

BLOCK = """    h{i} = zeros(batch, hidden)
    ys{i} = []
    for t in range(x.max_seq_len):
        a{i} = Linear(hidden)(src[t])
        b{i} = Linear(hidden, with_bias=False)(h{i})
        h{i} = tanh(a{i} + b{i})
        ys{i}.append(h{i})
    s{i} = tanh(Linear(hidden)(ys{i}))
    src = src + s{i}
    last{i} = h{i}
"""


def model(statements: int) -> str:
    blocks = max(1, statements // 10)
    return HEAD + "".join(BLOCK.format(i=i) for i in range(blocks)) + '    return {"output": src}\n'


if __name__ == "__main__":
    sys.stdout.write(model(int(sys.argv[1])))
