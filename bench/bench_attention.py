"""Forward speed of the emitted attention decoder vs hand-written PyTorch, side by side.

    .venv/bin/python bench/bench_attention.py [--batch 16] [--enc 150] [--dec 40] [--runs 5] [--device cpu|cuda]

`attention_model.py` (D512, vocabulary 1000, the key projection written inside the loop), on
the same inputs and weights, outputs checked equal on valid frames first:
- netc: the emitted module (keys hoisted, the previous label's embedding a shifted sequence
  and its rows of the state's Linear applied over all frames, the output projection after the
  loop)
- netc, no hoisting: the same IR with every op where the source wrote it
- naive hand loop: the model as written, in PyTorch (keys, embedding, logits per step)
- hoisted hand loop: what a careful PyTorch user writes (keys once, embeddings of all labels
  and their part of the state's Linear at once, one output projection after the loop)
Medians of interleaved runs after a warm-up, 1 thread, milliseconds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from bench_torch import device_name, device_option, module_with, params_by_path, report, timed

from netc.compiler import compile_graph
from netc.passes.pipeline import PassOptions

MODEL = str(Path(__file__).with_name("attention_model.py"))


def _attend(keys, query, enc, enc_mask):
    energy = torch.einsum("btk,bk->bt", keys, query).masked_fill(~enc_mask, float("-inf"))
    att = torch.softmax(energy, dim=1)
    return torch.einsum("bt,bth->bh", att, enc)


def naive(p, x, y, enc_mask):
    """The source as written: every op of the loop body at every step."""
    enc = torch.tanh(x @ p["enc/W"] + p["enc/b"])
    s = x.new_zeros(x.shape[0], p["s_2/W"].shape[0])
    prev_emb = x.new_zeros(x.shape[0], p["prev_emb/W"].shape[1])
    logits = []
    for t in range(y.shape[1]):
        keys = enc @ p["keys/W"] + p["keys/b"]
        context = _attend(keys, s @ p["query/W"] + p["query/b"], enc, enc_mask)
        s = torch.tanh(torch.cat([prev_emb, context], -1) @ p["s/W"] + p["s/b"] + s @ p["s_2/W"])
        logits.append(torch.cat([s, context], -1) @ p["logits/W"] + p["logits/b"])
        prev_emb = p["prev_emb/W"][y[:, t]]
    return torch.stack(logits, 1)


def hoisted(p, x, y, enc_mask):
    """By hand, all that can leave the loop out of it."""
    enc = torch.tanh(torch.addmm(p["enc/b"], x.flatten(0, 1), p["enc/W"]).view(*x.shape[:2], -1))
    keys = enc @ p["keys/W"] + p["keys/b"]
    emb = torch.nn.functional.pad(p["prev_emb/W"][y], (0, 0, 1, 0))[:, :-1]  # the previous labels'
    n_emb = emb.shape[-1]
    w_emb, w_ctx = p["s/W"][:n_emb], p["s/W"][n_emb:]
    emb_part = emb @ w_emb + p["s/b"]
    s = x.new_zeros(x.shape[0], p["s_2/W"].shape[0])
    states, contexts = [], []
    for t in range(y.shape[1]):
        context = _attend(keys, torch.addmm(p["query/b"], s, p["query/W"]), enc, enc_mask)
        s = torch.tanh(torch.addmm(emb_part[:, t], context, w_ctx).addmm_(s, p["s_2/W"]))
        states.append(s)
        contexts.append(context)
    return torch.cat([torch.stack(states, 1), torch.stack(contexts, 1)], -1) @ p["logits/W"] + p["logits/b"]


def attention_args(returnn: bool = False) -> argparse.Namespace:
    """`--batch`, `--enc`, `--dec`, `--runs`, `--device` (and with `returnn`, `--no-returnn`) of an
    attention benchmark; torch on 1 thread, seeded."""
    ap = argparse.ArgumentParser()
    if returnn:
        ap.add_argument("--no-returnn", action="store_true", help="leave RETURNN (TensorFlow) out")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--enc", type=int, default=150)
    ap.add_argument("--dec", type=int, default=40)
    ap.add_argument("--runs", type=int, default=5)
    device_option(ap)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    return args


def main() -> None:
    args = attention_args()

    dev = args.device
    full = compile_graph(MODEL)
    p = {k: v.to(dev) for k, v in params_by_path(full).items()}
    # random weights at D512 make the recursion chaotic (rounding differences of summing in
    # another order double every step); smaller recurrent weights keep the variants comparable
    p["s_2/W"] *= 0.25
    p["query/W"] *= 0.25
    no_hoist = compile_graph(MODEL, options=PassOptions(hoist=False))
    models = {name: module_with(g, p) for name, g in (("netc", full), ("netc, no hoisting", no_hoist))}
    x = torch.randn(args.batch, args.enc, 512).to(dev)
    y = torch.randint(0, 1000, (args.batch, args.dec)).to(dev)
    enc_lens = torch.as_tensor(np.linspace(args.enc, args.enc // 2, args.batch).astype(np.int64)).to(dev)
    dec_lens = torch.as_tensor(np.linspace(args.dec, args.dec // 2, args.batch).astype(np.int64)).to(dev)
    enc_mask = torch.arange(args.enc, device=dev)[None, :] < enc_lens[:, None]
    inputs = {"x": x, "y": y, "enc_time_lens": enc_lens, "dec_time_lens": dec_lens}
    variants = {
        "netc": lambda: models["netc"](**inputs)["output"],
        "netc, no hoisting": lambda: models["netc, no hoisting"](**inputs)["output"],
        "naive hand loop": lambda: naive(p, x, y, enc_mask),
        "hoisted hand loop": lambda: hoisted(p, x, y, enc_mask),
    }
    with torch.no_grad():
        valid = (torch.arange(args.dec, device=dev)[None, :] < dec_lens[:, None])[:, :, None]
        ref = variants["netc"]()
        for name, fn in variants.items():
            diff = ((fn() - ref).abs() * valid).max().item()
            assert diff < 1e-3, (name, diff)
        rows = timed(variants, args.runs, dev)
    title = (
        f"attention decoder forward, batch {args.batch}, {args.enc} encoder / {args.dec} decoder frames, D512, "
        f"{device_name(dev)}, median of {args.runs} runs"
    )
    report(title, rows, "hoisted hand loop", "hoisted hand loop")


if __name__ == "__main__":
    main()
