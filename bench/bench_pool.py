"""Max-pooling over time: netc's `max_pool` against the `end`-loop workaround models needed before
it (`pool_loop_model.py`: one loop step per window, each a max over all frames, O(frames^2)).

    .venv/bin/python bench/bench_pool.py [--batch 8] [--time 1600] [--runs 5] [--no-returnn]

Both run as the emitted torch module and as the emitted RETURNN config (graph built once, then
`session.run` timed), on the same padded batch; outputs are checked equal on valid frames
first. Reports the median of several timed runs after a warm-up, in milliseconds, 1 thread.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from bench_torch import timed  # bench/ is on sys.path when the script runs

from netc.compiler import compile_graph
from netc.emit_tf.emitter import dim_vars, emit_returnn
from netc.ir.uses import values_by_id
from netc_runtime.backends import load_torch_module

HERE = Path(__file__).parent
MODELS = {"max_pool": str(HERE / "pool_model.py"), "end loop": str(HERE / "pool_loop_model.py")}


def returnn_runner(g, x: np.ndarray, lens: np.ndarray):
    """The emitted config in RETURNN, built once: a function running one forward pass."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.log import log
    from returnn.tensor import batch_dim
    from returnn.tf.network import TFNetwork

    tf.compat.v1.disable_eager_execution()
    log.initialize(verbosity=[0])
    with tempfile.NamedTemporaryFile("w", suffix=".config.py", delete=False) as f:
        f.write(emit_returnn(g))
    cfg = Config()
    cfg.load_file(f.name)
    graph = tf.Graph()
    with graph.as_default(), contextlib.redirect_stdout(sys.stderr):
        net = TFNetwork(config=cfg, train_flag=False)
        net.construct_from_dict(cfg.typed_value("network"))
        names = dim_vars(g)
        dims = values_by_id(g)[g.outputs[0].value].dims
        out_dims = [batch_dim if d == "batch" else cfg.typed_value(names[d]) for d in dims]
        out = net.get_layer("output").output.copy_transpose(out_dims).placeholder
        time_dim = cfg.typed_value(names["time"])
        feed = {net.extern_data.data["x"].placeholder: x, time_dim.dyn_size_ext.placeholder: lens.astype(np.int32)}
        session = tf.compat.v1.Session(
            graph=graph,
            config=tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1),
        )
        net.initialize_params(session)
    return lambda: session.run(out, feed_dict=feed)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--time", type=int, default=1600)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-returnn", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    lens = np.linspace(args.time, args.time // 2 + 1, args.batch).astype(np.int64)  # odd lengths too
    x = rng.standard_normal((args.batch, args.time, 64)).astype(np.float32)
    half = (lens + 1) // 2
    valid = (np.arange(half.max())[None, :] < half[:, None])[:, :, None]

    graphs = {name: compile_graph(path) for name, path in MODELS.items()}
    fns, outs = {}, {}
    for name, g in graphs.items():
        model = load_torch_module(g).Model().eval()
        args_t = {"x": torch.from_numpy(x), "time_lens": torch.from_numpy(lens)}
        fns[f"torch, {name}"] = lambda m=model, a=args_t: m(**a)
        with torch.no_grad():
            outs[f"torch, {name}"] = fns[f"torch, {name}"]()["output"].numpy()
        if not args.no_returnn:
            fns[f"RETURNN, {name}"] = returnn_runner(g, x, lens)
            outs[f"RETURNN, {name}"] = fns[f"RETURNN, {name}"]()
    ref = outs["torch, max_pool"]
    for name, out in outs.items():
        diff = float(np.abs(np.where(valid, out[:, : ref.shape[1]] - ref, 0.0)).max())
        assert diff < 1e-5, (name, diff)
    with torch.no_grad():
        rows = timed(fns, args.runs)
    print(f"max-pool over 2 frames, batch {args.batch}, {args.time} frames x 64, 1 thread, median of {args.runs} runs")
    for name, ms in rows.items():
        print(f"  {name:<20} {ms:10.2f} ms")


if __name__ == "__main__":
    main()
