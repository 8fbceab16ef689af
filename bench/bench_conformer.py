"""One training step of a Conformer encoder: netc's emitted torch module vs RETURNN frontend's
`rf.ConformerEncoder` on RETURNN's PyTorch backend, side by side in one run.

    .venv/bin/python bench/bench_conformer.py [--batch 8] [--time 100] [--labels 20] [--runs 5] [--device cpu]

The model is `conformer_model.py` (model dim 256, 4 heads, feed-forward 1024, depthwise kernel 31,
4 blocks; input 80 features projected without bias, no subsampling, no dropout) with a `Linear` to
100 labels plus the blank and a CTC loss summed over the batch. rf builds the same:
`ConformerEncoder(input_layer=None, ...)` (its input projection is the same bias-free `Linear`),
a masked batch norm in the convolution blocks (`use_mask=True`, `rf_use_mask`: padded frames are
zeros before a convolution and out of the batch statistics, as netc's), an `rf.Linear` and
`rf.ctc_loss`. rf's parameters (its own initialisation; layer and batch norms and the position
biases drawn at random, so that every parameter's mapping shows) are copied into netc's module
and the hand-written one.
Before timing, on a padded batch with unequal lengths, in training mode: the encoder outputs on
valid frames (<= 1e-4), the loss and every parameter's gradient are checked equal to rf's.
A step, each on the same batch: forward, backward, `torch.optim.Adam.step()`:
- netc torch module: `model(**batch)["ctc"]`
- rf ConformerEncoder: the rf module as RETURNN's torch engine runs it (`rf_module_to_pt_module`
  for the parameters, a train-step run context, the batch's `Tensor`s and dims made anew each step
  as the engine does per batch), `loss.raw_tensor.backward()`
- hand-written torch: the same model as a PyTorch engineer writes it (`HandWritten`)
torch on 1 thread. Medians of interleaved runs after a warm-up, milliseconds (wall in the table,
CPU time above it), and the peak memory a step allocates (torch profiler's allocation events on
CPU, `torch.cuda.max_memory_allocated` on CUDA). `--device cuda` runs all on the GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from bench_torch import report, synced
from bench_train import peak_bytes, timed_wall_cpu

from netc.compiler import compile_graph
from netc_runtime.backends import load_torch_module

MODEL = Path(__file__).with_name("conformer_model.py")
LR = 1e-3
LAYERS = 4  # the blocks conformer_model.py writes out
# conformer_model.py's size constants, in the order of its line
SIZES = dict(FEAT=80, MODEL_SIZE=256, HALF_SIZE=128, HEADS=4, HEAD_SIZE=64, FF_SIZE=1024, CONV_KERNEL=31, VOCAB=100)
SMALL = dict(FEAT=5, MODEL_SIZE=8, HALF_SIZE=4, HEADS=2, HEAD_SIZE=4, FF_SIZE=16, CONV_KERNEL=5, VOCAB=6)


def model_file(sizes: dict[str, int], directory: str) -> str:
    """conformer_model.py with its size constants set to `sizes`, written into `directory`."""
    text = MODEL.read_text(encoding="utf-8")
    line = f"{', '.join(SIZES)} = {', '.join(str(SIZES[k]) for k in SIZES)}\n"
    assert line in text, "conformer_model.py's size line changed: update SIZES"
    text = text.replace(line, f"{', '.join(SIZES)} = {', '.join(str(sizes[k]) for k in SIZES)}\n")
    path = Path(directory) / "conformer_model.py"
    path.write_text(text, encoding="utf-8")
    return str(path)


@contextlib.contextmanager
def rf_torch(device: str = "cpu"):
    """RETURNN's frontend on its PyTorch backend, with masked convolutions and reductions
    (`rf_use_mask`), in a train-step run context, tensors rf makes on `device` (as RETURNN's torch
    engine sets it); RETURNN's process-wide state restored after."""
    import returnn.frontend as rf
    from returnn.config import Config, global_config_ctx
    from returnn.frontend._backend import global_backend
    from returnn.frontend.run_ctx import reset_run_ctx
    from returnn.util.basic import BehaviorVersion

    state, backend = BehaviorVersion._get_state(), global_backend.__class__
    rf.select_backend_torch()
    try:
        with global_config_ctx(Config({"rf_use_mask": True, "rf_att_dropout_broadcast": False})):
            rf.init_train_step_run_ctx(train_flag=True)
            with rf.set_default_device_ctx(device):
                yield rf
    finally:
        reset_run_ctx()
        global_backend.__class__ = backend
        BehaviorVersion._reset(state)


class RfModel:
    """rf's ConformerEncoder, a Linear to the labels and the blank, and CTC: the model of
    conformer_model.py. `pt` is its torch view (the parameters Adam updates)."""

    def __init__(self, sizes: dict[str, int], device: str, seed: int):
        import returnn.frontend as rf
        from returnn.frontend.encoder.conformer import ConformerEncoder
        from returnn.tensor import Dim
        from returnn.torch.frontend.bridge import rf_module_to_pt_module

        rf.set_random_seed(seed)
        self.sizes = sizes
        self.feat, self.model = Dim(sizes["FEAT"], name="feat"), Dim(sizes["MODEL_SIZE"], name="model")
        self.vocab = Dim(sizes["VOCAB"], name="vocab")
        self.encoder = ConformerEncoder(
            self.feat,
            self.model,
            num_layers=LAYERS,
            input_layer=None,
            ff_dim=Dim(sizes["FF_SIZE"], name="ff"),
            dropout=0.0,
            att_dropout=0.0,
            input_dropout=0.0,
            conv_kernel_size=sizes["CONV_KERNEL"],
            num_heads=sizes["HEADS"],
            encoder_layer_opts={"conv_norm_opts": {"use_mask": True}},
        )
        self.logits = rf.Linear(self.model, Dim(sizes["VOCAB"] + 1, name="vocab_blank"))
        rng = np.random.default_rng(seed)
        for module in (self.encoder, self.logits):
            for name, p in module.named_parameters():
                last = name.split(".")[-1]
                if last in ("scale", "gamma", "running_variance"):
                    v = rng.uniform(0.5, 1.5, p.raw_tensor.shape)
                elif last in ("bias", "beta", "running_mean", "pos_bias_u", "pos_bias_v"):
                    v = rng.normal(0, 0.1, p.raw_tensor.shape)
                else:
                    continue  # rf's own initialisation
                with torch.no_grad():
                    p.raw_tensor.copy_(torch.as_tensor(v, dtype=torch.float32))
        self.pt = torch.nn.ModuleDict(
            {"encoder": rf_module_to_pt_module(self.encoder), "logits": rf_module_to_pt_module(self.logits)}
        ).to(device)

    def __call__(self, x, y, time_lens, label_time_lens):
        """(encoder output [batch, time, model] raw, summed CTC loss raw) of one padded batch; the
        batch's dims made here, as RETURNN's engine makes them per batch (lengths on the CPU)."""
        import returnn.frontend as rf
        from returnn.tensor import Dim, Tensor

        batch_dim = Dim(x.shape[0], name="batch")

        def dyn(name, lens):
            lens = lens.to("cpu", torch.int32)
            return Dim(Tensor(f"{name}_lens", [batch_dim], dtype="int32", raw_tensor=lens), name=name)

        time_dim, label_dim = dyn("time", time_lens), dyn("label_time", label_time_lens)
        src = Tensor("x", [batch_dim, time_dim, self.feat], dtype="float32", raw_tensor=x)
        targets = Tensor("y", [batch_dim, label_dim], dtype="int32", sparse_dim=self.vocab, raw_tensor=y)
        enc, _ = self.encoder(src, in_spatial_dim=time_dim)
        loss = rf.ctc_loss(
            logits=self.logits(enc),
            targets=targets,
            input_spatial_dim=time_dim,
            targets_spatial_dim=label_dim,
            blank_index=self.sizes["VOCAB"],
        )
        loss = rf.reduce_sum(loss, axis=batch_dim)
        return enc.copy_transpose([batch_dim, time_dim, self.model]).raw_tensor, loss.raw_tensor

    def netc_values(self, get) -> dict[str, np.ndarray]:
        """`get(rf parameter)` (a torch tensor, or None) of each parameter, under netc's names and
        in netc's layouts."""
        m, h = self.sizes["MODEL_SIZE"], self.sizes["HEADS"]

        def val(p):
            t = get(p)
            return None if t is None else t.detach().cpu().numpy()

        out = {"input_projection/W": val(self.encoder.input_projection.weight)}
        for i, layer in enumerate(self.encoder.layers):
            pre = f"layer{i + 1}"
            for part in ("ffn1", "ffn2"):
                for lin in ("linear_ff", "linear_out"):
                    out[f"{pre}/{part}/{lin}/W"] = val(getattr(getattr(layer, part), lin).weight)
                    out[f"{pre}/{part}/{lin}/b"] = val(getattr(getattr(layer, part), lin).bias)
            for norm in (
                "ffn1_layer_norm",
                "self_att_layer_norm",
                "conv_layer_norm",
                "ffn2_layer_norm",
                "final_layer_norm",
            ):
                out[f"{pre}/{norm}/scale"] = val(getattr(layer, norm).scale)
                out[f"{pre}/{norm}/bias"] = val(getattr(layer, norm).bias)
            att = layer.self_att
            # rf's qkv kernel is [model, heads, (q, k, v), head]; netc has one Linear each for q, k, v
            w, b = val(att.qkv.weight), val(att.qkv.bias)
            for j, name in enumerate(("query", "key", "value")):
                if w is not None:
                    out[f"{pre}/self_att/{name}/W"] = w.reshape(m, h, 3, -1)[:, :, j].reshape(m, m)
                    out[f"{pre}/self_att/{name}/b"] = b.reshape(h, 3, -1)[:, j].reshape(m)
            out[f"{pre}/self_att/linear_pos/W"] = val(att.linear_pos.weight)
            out[f"{pre}/self_att/pos_bias_u/b"] = val(att.pos_bias_u)  # [heads, head]
            out[f"{pre}/self_att/pos_bias_v/b"] = val(att.pos_bias_v)
            out[f"{pre}/self_att/proj/W"] = val(att.proj.weight)
            out[f"{pre}/self_att/proj/b"] = val(att.proj.bias)
            conv = layer.conv_block
            for lin in ("positionwise_conv1", "positionwise_conv2"):
                out[f"{pre}/conv_block/{lin}/W"] = val(getattr(conv, lin).weight)
                out[f"{pre}/conv_block/{lin}/b"] = val(getattr(conv, lin).bias)
            dw = val(conv.depthwise_conv.filter)  # rf's [out, 1, k]; netc's [k, 1, out]
            out[f"{pre}/conv_block/depthwise_conv/W"] = None if dw is None else dw.transpose(2, 1, 0)
            out[f"{pre}/conv_block/depthwise_conv/bias"] = val(conv.depthwise_conv.bias)
            bn = f"{pre}/conv_block/norm/batch_norm/v2_"
            out[bn + "mean"] = val(conv.norm.running_mean)
            out[bn + "variance"] = val(conv.norm.running_variance)
            out[bn + "gamma"] = val(conv.norm.gamma)
            out[bn + "beta"] = val(conv.norm.beta)
        out["logits/W"] = val(self.logits.weight)
        out["logits/b"] = val(self.logits.bias)
        return out


class HandWritten(torch.nn.Module):
    """The same model as a PyTorch engineer writes it: activations [batch, time, feature], heads as
    [batch, heads, time, head] with `@` for the scores; one positional encoding [2T-1, model] for the
    batch (the relative position j - i of a key j to a query i picked by one `gather`); padded keys
    masked before the softmax, padded frames zeros before the depthwise `conv1d`, the batch norm's
    statistics over valid frames; `F.ctc_loss` summed. Parameters in netc's layouts (by its names,
    `/` as `_`)."""

    def __init__(self, params: dict[str, np.ndarray], sizes: dict[str, int]):
        super().__init__()
        self.sizes = sizes
        self.w = torch.nn.ParameterDict(
            {
                k.replace("/", "_"): torch.nn.Parameter(
                    torch.as_tensor(v).clone(), requires_grad="v2_mean" not in k and "v2_variance" not in k
                )
                for k, v in params.items()
            }
        )

    def forward(self, x, y, time_lens, label_time_lens):
        w, n = self.w, self.sizes
        heads, head, model = n["HEADS"], n["HEAD_SIZE"], n["MODEL_SIZE"]
        b, t = x.shape[:2]
        dev = x.device
        valid = (torch.arange(t, device=dev)[None, :] < time_lens[:, None])[:, :, None]  # [B, T, 1]
        key_pad = ~valid[:, None, :, 0][:, :, None, :]  # [B, 1, 1, T]
        rel = torch.arange(-(t - 1), t, device=dev, dtype=x.dtype)  # relative positions -(T-1) .. T-1
        angles = rel[:, None] * torch.exp(
            torch.arange(n["HALF_SIZE"], device=dev, dtype=x.dtype) * (-2.0 * math.log(1e4) / model)
        )
        pos_enc = torch.cat([torch.sin(angles), torch.cos(angles)], -1)  # [2T-1, model]
        idx = torch.arange(t, device=dev)[None, :] - torch.arange(t, device=dev)[:, None] + (t - 1)  # [i, j]: j - i
        idx = idx.expand(b, heads, t, t)

        def linear(name, v):
            return torch.nn.functional.linear(v, w[name + "_W"].t(), w[name + "_b"])

        def norm(name, v):
            return torch.nn.functional.layer_norm(v, (model,), w[name + "_scale"], w[name + "_bias"], eps=1e-6)

        def ff(pre, v):
            return linear(pre + "_linear_out", torch.nn.functional.silu(linear(pre + "_linear_ff", v)))

        def split(v):
            return v.view(b, -1, heads, head).transpose(1, 2)  # [B, H, T, D]

        h = x @ w["input_projection_W"]
        for i in range(1, LAYERS + 1):
            pre = f"layer{i}_"
            h = h + 0.5 * ff(pre + "ffn1", norm(pre + "ffn1_layer_norm", h))
            a = norm(pre + "self_att_layer_norm", h)
            att = pre + "self_att_"
            q, k, v = (split(linear(att + name, a)) for name in ("query", "key", "value"))
            pos = (pos_enc @ w[att + "linear_pos_W"]).view(-1, heads, head).transpose(0, 1)  # [H, 2T-1, D]
            content = (q + w[att + "pos_bias_u_b"][:, None, :]) @ k.transpose(-1, -2)  # [B, H, T, T]
            position = ((q + w[att + "pos_bias_v_b"][:, None, :]) @ pos.transpose(-1, -2)).gather(-1, idx)
            scores = ((content + position) * head**-0.5).masked_fill(key_pad, float("-inf"))
            a = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(b, t, model)
            h = h + linear(att + "proj", a)
            conv = pre + "conv_block_"
            c = torch.nn.functional.glu(linear(conv + "positionwise_conv1", norm(pre + "conv_layer_norm", h)), -1)
            c = torch.nn.functional.conv1d(
                c.masked_fill(~valid, 0.0).transpose(1, 2),
                w[conv + "depthwise_conv_W"].permute(2, 1, 0),
                w[conv + "depthwise_conv_bias"],
                padding=n["CONV_KERNEL"] // 2,
                groups=model,
            ).transpose(1, 2)
            bn = conv + "norm_batch_norm_v2_"
            if self.training:
                count = valid.sum()
                mean = (c * valid).sum((0, 1)) / count
                var = ((c - mean) ** 2 * valid).sum((0, 1)) / count
                with torch.no_grad():
                    w[bn + "mean"].lerp_(mean, 0.1)
                    w[bn + "variance"].lerp_(var, 0.1)
            else:
                mean, var = w[bn + "mean"], w[bn + "variance"]
            c = (c - mean) * torch.rsqrt(var + 1e-3) * w[bn + "gamma"] + w[bn + "beta"]
            h = h + linear(conv + "positionwise_conv2", torch.nn.functional.silu(c))
            h = h + 0.5 * ff(pre + "ffn2", norm(pre + "ffn2_layer_norm", h))
            h = norm(pre + "final_layer_norm", h)
        log_probs = torch.log_softmax(linear("logits", h), -1).transpose(0, 1)
        loss = torch.nn.functional.ctc_loss(
            log_probs, y.long(), time_lens, label_time_lens, blank=n["VOCAB"], reduction="sum", zero_infinity=True
        )
        return h, loss


def batch_of(sizes: dict[str, int], lens: list[int], label_lens: list[int], device: str, seed: int) -> dict:
    """A padded batch of features and labels with these lengths (netc's module's inputs)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lens), max(lens), sizes["FEAT"], generator=gen)
    y = torch.randint(0, sizes["VOCAB"], (len(lens), max(label_lens)), generator=gen, dtype=torch.int32)
    lengths = {"time_lens": torch.tensor(lens), "label_time_lens": torch.tensor(label_lens)}
    return {"x": x.to(device), "y": y.to(device), **{k: v.to(device) for k, v in lengths.items()}}


def build(sizes: dict[str, int], device: str, seed: int = 0):
    """(netc's torch module, rf's model, the hand-written module) with the same parameters, on
    `device`, in training mode.
    Call inside `rf_torch()`."""
    rf_model = RfModel(sizes, device, seed)
    with tempfile.TemporaryDirectory() as d:
        g = compile_graph(model_file(sizes, d))
    model = load_torch_module(g).Model()
    params = rf_model.netc_values(lambda p: p.raw_tensor)
    assert set(params) == {q.name for q in g.params}, set(params) ^ {q.name for q in g.params}
    model.load_returnn_params(params)
    hand = HandWritten(params, sizes)
    return model.to(device).train(), rf_model, hand.to(device).train()


def check(model, rf_model, hand, batch: dict) -> dict[str, float]:
    """netc's and the hand-written module's encoder outputs on valid frames, losses and gradients
    on `batch` checked equal to rf's (one forward and backward each, in training mode); the largest
    differences found. The gradients are left in place (the next step's `zero_grad` clears them)."""
    ours = model(**batch)
    enc, loss = rf_model(**batch)
    by_hand = hand(**batch)
    for v in (ours["ctc"], loss, by_hand[1]):
        v.backward()
    valid = (torch.arange(enc.shape[1], device=enc.device)[None, :] < batch["time_lens"][:, None])[:, :, None]
    diffs = {
        "encoder": max(((mine - enc).abs() * valid).max().item() for mine in (ours["encoder"], by_hand[0])),
        "loss": max(abs(mine.item() - loss.item()) / abs(loss.item()) for mine in (ours["ctc"], by_hand[1])),
    }
    by_name = dict(model.named_parameters())
    theirs = {k: g for k, g in rf_model.netc_values(lambda p: p.raw_tensor.grad).items() if g is not None}
    # relative to each gradient's largest entry, but at least 1% of the largest of all: the
    # depthwise convolutions' biases, just before a batch norm (which takes out any shift), have
    # gradients of rounding noise only
    floor = 0.01 * max(np.abs(g).max() for g in theirs.values())
    grads = {}
    for name, g in theirs.items():  # all but the batch norms' running statistics
        for mine in (by_name[model.returnn_param_names[name]].grad, hand.w[name.replace("/", "_")].grad):
            err = np.abs(mine.detach().cpu().numpy() - g).max() / max(np.abs(g).max(), floor)
            grads[name] = max(grads.get(name, 0.0), err)
    worst = max(grads, key=grads.get)
    diffs["gradient"] = float(grads[worst])
    assert diffs["encoder"] <= 1e-4, diffs
    assert diffs["loss"] <= 1e-4, diffs
    assert diffs["gradient"] <= 1e-3, (worst, diffs)
    return diffs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--time", type=int, default=100)
    ap.add_argument("--labels", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--small", action="store_true", help="tiny sizes (model dim 8), for a quick check")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    sizes = SMALL if args.small else SIZES
    lens = [int(n) for n in np.linspace(args.time, args.time // 2, args.batch)]
    label_lens = [max(1, min(args.labels * n // args.time, n // 2)) for n in lens]
    with rf_torch(args.device):
        model, rf_model, hand = build(sizes, args.device)
        batch = batch_of(sizes, lens, label_lens, args.device, 0)
        diffs = check(model, rf_model, hand, batch)
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        rf_opt = torch.optim.Adam(rf_model.pt.parameters(), lr=LR)
        hand_opt = torch.optim.Adam(hand.parameters(), lr=LR)

        def netc_step():
            loss = model(**batch)["ctc"]
            opt.zero_grad()
            loss.backward()
            opt.step()

        def rf_step():
            _, loss = rf_model(**batch)
            rf_opt.zero_grad()
            loss.backward()
            rf_opt.step()

        def hand_step():
            _, loss = hand(**batch)
            hand_opt.zero_grad()
            loss.backward()
            hand_opt.step()

        dev = torch.device(args.device)
        steps = {"netc torch module": netc_step, "rf ConformerEncoder": rf_step, "hand-written torch": hand_step}
        steps = {name: synced(fn, dev) for name, fn in steps.items()}
        for fn in steps.values():  # Adam's state made: the peaks of a step as in training, not of the first
            fn()
        peaks = {name: peak_bytes(fn, dev) / 2**20 for name, fn in steps.items()}
        rows, cpu = timed_wall_cpu(steps, args.runs)
    print(
        f"checked equal first: encoder outputs (valid frames) max diff {diffs['encoder']:.1e}, loss rel. diff "
        f"{diffs['loss']:.1e}, gradients max rel. diff {diffs['gradient']:.1e}"
    )
    print(
        "peak memory a step allocates: "
        + ", ".join(f"{name} {mb:.1f} MiB" for name, mb in peaks.items())
        + f" (netc {peaks['netc torch module'] / peaks['rf ConformerEncoder']:.2f}x rf)"
    )
    print("CPU time of the process per step, median: " + ", ".join(f"{name} {ms:.1f} ms" for name, ms in cpu.items()))
    title = (
        f"Conformer encoder training step (forward, backward, Adam), {LAYERS} blocks, model dim "
        f"{sizes['MODEL_SIZE']}, batch {args.batch}, {args.time} frames, CTC over {sizes['VOCAB']} labels, "
        f"{args.device}, 1 thread, median of {args.runs} runs"
    )
    report(title, rows, "rf ConformerEncoder", "rf")


if __name__ == "__main__":
    sys.exit(main())
