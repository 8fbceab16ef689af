"""One training step (forward, backward, optimizer step) of the emitted torch module vs RETURNN on
TensorFlow, side by side in one run.

    .venv/bin/python bench/bench_train.py [--batch 16] [--enc 150] [--dec 40] [--runs 5]

The model is the attention decoder of `attention_model.py` (D512, vocabulary 1000) with its cross
entropy marked as the loss (`mark_as_loss`, added to a copy of the file here). Both start from the
same parameters; the summed loss over valid frames is checked equal before timing. A step:
- torch: `model(**batch)["ce"]`, `backward()`, `torch.optim.Adam.step()`, on 1 thread
- RETURNN: the config netc emits, built by RETURNN as for training (`TFNetwork`, graph mode), its
  loss minimised by TF's Adam; one `session.run` per step, TF on 1 intra-op and 1 inter-op thread
Medians of interleaved runs after a warm-up, milliseconds.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from bench_attention import attention_args
from bench_torch import report, timed

from netc.compiler import compile_file, compile_graph
from netc_runtime.backends import load_torch_module
from netc_runtime.verify import random_params

MODEL = Path(__file__).with_name("attention_model.py")
LR = 1e-3


def training_model(directory: str) -> str:
    """`attention_model.py` with its cross entropy as the loss `ce`."""
    text = MODEL.read_text(encoding="utf-8")
    text = text.replace("from netc import ", "from netc import cross_entropy, mark_as_loss, ", 1)
    ret = '    return {"output": logits}\n'
    assert ret in text
    text = text.replace(ret, '    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")\n' + ret)
    path = Path(directory) / "attention_train_model.py"
    path.write_text(text, encoding="utf-8")
    return str(path)


def returnn_step(path: str, params: dict, batch: dict):
    """RETURNN's network for training with TF's Adam on its loss: (step, loss value) functions."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.log import log
    from returnn.tensor import batch_dim
    from returnn.tf.network import TFNetwork

    from netc.emit_tf.emitter import dim_vars

    tf.compat.v1.disable_eager_execution()
    log.initialize(verbosity=[0])
    g = compile_graph(path)
    with tempfile.NamedTemporaryFile("w", suffix=".config.py", delete=False) as f:
        f.write(compile_file(path, "returnn"))
    cfg = Config()
    cfg.load_file(f.name)
    graph = tf.Graph()
    with graph.as_default(), contextlib.redirect_stdout(sys.stderr):
        net = TFNetwork(config=cfg, train_flag=True, eval_flag=True)
        net.construct_from_dict(cfg.typed_value("network"))
        holders, _, _ = net.get_losses_initialized()
        loss = holders["ce"].get_loss_value()
        train = tf.compat.v1.train.AdamOptimizer(LR).minimize(loss, var_list=net.get_params_list())
        feed = {net.extern_data.data[k].placeholder: batch[k].numpy() for k in ("x", "y")}
        names = dim_vars(g)
        for d in ("enc_time", "dec_time"):
            tag = cfg.typed_value(names[d])
            feed[tag.dyn_size_ext.placeholder] = batch[f"{d}_lens"].numpy().astype(np.int32)
        assert batch_dim is not None
        threads = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
        session = tf.compat.v1.Session(graph=graph, config=threads)
        session.run(tf.compat.v1.global_variables_initializer())
        variables = {v.name[:-2]: v for v in net.get_params_list()}
        for name, value in params.items():
            net.get_var_assigner(variables[name]).assign(np.asarray(value, dtype=np.float32), session=session)
    Path(f.name).unlink()
    return (lambda: session.run(train, feed_dict=feed)), (lambda: float(session.run(loss, feed_dict=feed)))


def main() -> None:
    args = attention_args()
    with tempfile.TemporaryDirectory() as d:
        path = training_model(d)
        g = compile_graph(path)
        params = random_params(g, np.random.default_rng(0))
        for q in g.params:  # as in bench_attention.py: smaller recurrent weights, a recursion that is not chaotic
            if f"{q.path}/{q.role}" in ("s_2/W", "query/W"):
                params[q.name] = params[q.name] * 0.25
        model = load_torch_module(g).Model()
        batch = {
            "x": torch.randn(args.batch, args.enc, 512),
            "y": torch.randint(0, 1000, (args.batch, args.dec)),
            "enc_time_lens": torch.as_tensor(np.linspace(args.enc, args.enc // 2, args.batch).astype(np.int64)),
            "dec_time_lens": torch.as_tensor(np.linspace(args.dec, args.dec // 2, args.batch).astype(np.int64)),
        }
        tf_step, tf_loss = returnn_step(path, params, batch)
    model.load_returnn_params(params)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    def torch_step():
        loss = model(**batch)["ce"]
        opt.zero_grad()
        loss.backward()
        opt.step()

    with torch.no_grad():
        ours = model(**batch)["ce"].item()
    theirs = tf_loss()
    assert abs(ours - theirs) <= 1e-4 * abs(theirs), (ours, theirs)
    rows = timed({"netc torch module": torch_step, "RETURNN (TensorFlow)": tf_step}, args.runs)
    title = (
        f"attention decoder training step (forward, backward, Adam), batch {args.batch}, {args.enc} encoder / "
        f"{args.dec} decoder frames, D512, summed loss {ours:.2f} in both, 1 thread, median of {args.runs} runs"
    )
    report(title, rows, "RETURNN (TensorFlow)", "RETURNN")


if __name__ == "__main__":
    main()
