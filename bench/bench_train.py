"""One training step (forward, backward, optimizer step) of the emitted torch module vs RETURNN on
TensorFlow, side by side in one run.

    .venv/bin/python bench/bench_train.py [--batch 16] [--enc 150] [--dec 40] [--runs 5] [--device cpu|cuda] [--no-returnn]

The model is the attention decoder of `attention_model.py` (D512, vocabulary 1000) with its cross
entropy marked as the loss (`mark_as_loss`, added to a copy of the file here). Both start from the
same parameters; the summed loss over valid frames is checked equal before timing. A step:
- torch: `model(**batch)["ce"]`, `backward()`, `torch.optim.Adam.step()`, on 1 thread
- hand-written torch: the same model as a PyTorch engineer writes it (`HandWritten`), the same steps
- RETURNN: the config netc emits, built by RETURNN as for training (`TFNetwork`, graph mode), its
  loss minimised by TF's Adam; one `session.run` per step, TF on 1 intra-op and 1 inter-op thread
Medians of interleaved runs after a warm-up, milliseconds (wall in the table; CPU time above it).
Above the table also the peak memory torch allocates during one step, netc's module and by hand.
`--device cuda` runs the torch rows on the GPU (RETURNN stays on the CPU: leave it out with
`--no-returnn`); each step then ends with `torch.cuda.synchronize()` and the peak is CUDA's.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from bench_attention import attention_args
from bench_torch import CPU, device_name, report, synced

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


class HandWritten(torch.nn.Module):
    """The same model as a PyTorch engineer writes it for training: the encoder's key projection,
    the previous labels' embeddings and their rows of the state's Linear computed once before the
    loop, `bmm` for the attention (the query as a row vector against the keys, transposed once),
    one output projection after the loop, `F.cross_entropy` on the valid frames."""

    def __init__(self, p: dict[str, torch.Tensor]):
        super().__init__()
        self.w = torch.nn.ParameterDict({k.replace("/", "_"): torch.nn.Parameter(v.clone()) for k, v in p.items()})

    def forward(self, x, y, enc_time_lens, dec_time_lens):
        w = self.w
        enc_mask = torch.arange(x.shape[1], device=x.device)[None, :] < enc_time_lens[:, None]
        dec_mask = torch.arange(y.shape[1], device=y.device)[None, :] < dec_time_lens[:, None]
        enc = torch.tanh(x @ w["enc_W"] + w["enc_b"])  # [B, T, H]
        keys_t = (enc @ w["keys_W"] + w["keys_b"]).transpose(1, 2)  # [B, K, T]
        n_emb = w["prev_emb_W"].shape[1]
        prev_emb = torch.nn.functional.pad(w["prev_emb_W"][y], (0, 0, 1, 0))[:, :-1]  # the previous labels'
        emb_part = prev_emb @ w["s_W"][:n_emb] + w["s_b"]  # [B, U, H]
        w_ctx = w["s_W"][n_emb:]
        pad = (~enc_mask)[:, None, :]
        s = x.new_zeros(x.shape[0], w["s_2_W"].shape[0])
        states, contexts = [], []
        for t in range(y.shape[1]):
            query = torch.addmm(w["query_b"], s, w["query_W"])
            energy = torch.bmm(query[:, None, :], keys_t).masked_fill(pad, float("-inf"))  # [B, 1, T]
            context = torch.bmm(torch.softmax(energy, dim=-1), enc)[:, 0]  # [B, H]
            s = torch.tanh(torch.addmm(emb_part[:, t], context, w_ctx).addmm(s, w["s_2_W"]))
            states.append(s)
            contexts.append(context)
        logits = torch.cat([torch.stack(states, 1), torch.stack(contexts, 1)], -1) @ w["logits_W"] + w["logits_b"]
        return torch.nn.functional.cross_entropy(logits[dec_mask], y[dec_mask], reduction="sum")


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


def timed_wall_cpu(fns: dict, runs: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall and CPU (process) milliseconds per variant, runs interleaved, after a warm-up. On a
    shared machine CPU time is steadier; TF's CPU time also counts its threads' spinning. A CUDA
    variant must synchronise before it returns (`synced`)."""
    for fn in fns.values():
        fn()
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return tuple({name: 1000 * statistics.median(ts) for name, ts in d.items()} for d in (wall, cpu))


def peak_bytes(fn, device: torch.device = CPU) -> int:
    """The most bytes torch's allocator holds during `fn()` beyond what it held before: on CPU from
    the profiler's allocation events (their running total), on CUDA from the allocator's statistics."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as d:
        trace = Path(d) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    totals = [e["args"]["Total Allocated"] for e in memory]
    return max(totals) - (totals[0] - memory[0]["args"]["Bytes"])


def main() -> None:
    args = attention_args(returnn=True)
    dev = args.device
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
        tf_step, tf_loss = (None, None) if args.no_returnn else returnn_step(path, params, batch)
    batch = {k: v.to(dev) for k, v in batch.items()}
    model.load_returnn_params(params)
    model.train().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    hand = HandWritten({f"{q.path}/{q.role}": torch.as_tensor(params[q.name]) for q in g.params}).to(dev)
    hand_opt = torch.optim.Adam(hand.parameters(), lr=LR)

    def torch_step():
        loss = model(**batch)["ce"]
        opt.zero_grad()
        loss.backward()
        opt.step()

    def hand_step():
        loss = hand(**batch)
        hand_opt.zero_grad()
        loss.backward()
        hand_opt.step()

    with torch.no_grad():
        ours = model(**batch)["ce"].item()
        by_hand = hand(**batch).item()
    for other in (by_hand,) if args.no_returnn else (by_hand, tf_loss()):
        assert abs(ours - other) <= 1e-4 * abs(other), (ours, other)
    steps = {"netc torch module": synced(torch_step, dev), "hand-written torch": synced(hand_step, dev)}
    if not args.no_returnn:
        steps["RETURNN (TensorFlow)"] = tf_step
    for name in ("netc torch module", "hand-written torch"):  # Adam's state, and on CUDA cuBLAS's workspace, made
        steps[name]()
    peaks = {name: peak_bytes(steps[name], dev) / 2**20 for name in ("netc torch module", "hand-written torch")}
    rows, cpu = timed_wall_cpu(steps, args.runs)
    print(
        f"peak memory torch allocates in a step ({'CUDA allocator' if dev.type == 'cuda' else 'torch profiler'}): "
        + ", ".join(f"{name} {mb:.1f} MiB" for name, mb in peaks.items())
        + f" ({peaks['netc torch module'] / peaks['hand-written torch']:.2f}x hand-written)"
    )
    print("CPU time of the process per step, median: " + ", ".join(f"{name} {ms:.0f} ms" for name, ms in cpu.items()))
    title = (
        f"attention decoder training step (forward, backward, Adam), batch {args.batch}, {args.enc} encoder / "
        f"{args.dec} decoder frames, D512, summed loss {ours:.2f} in all, {device_name(dev)}, median of {args.runs} runs"
    )
    if args.no_returnn:
        report(title, rows, "hand-written torch", "hand-written")
    else:
        report(title, rows, "RETURNN (TensorFlow)", "RETURNN")


if __name__ == "__main__":
    main()
