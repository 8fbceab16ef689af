"""The streaming Conformer (examples/conformer_streaming.py) trains on whole sequences with a chunk
mask (`chunk_mask`) and a causal convolution (`Conv1d(padding="causal")`); deployed, it runs chunk
by chunk with caches. This checks that the two are the same function: an independent reference
in plain torch (no netc) runs the encoder chunk by chunk, each sequence alone, with a cache of the
last LEFT_CHUNKS * CHUNK_SIZE keys and values per block and the convolution's last (kernel - 1)
input frames, and its encoder output equals netc's whole-sequence masked one (eager mode, the
emitted torch module and RETURNN) on every valid frame, within 1e-5. Lengths are several chunks,
most not multiples of the chunk size; a reference with a longer cache differs, so the test sees
the limited context."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import EXAMPLES

from netc.compiler import compile_graph
from netc_runtime.backends import run_eager, run_returnn, run_torch
from netc_runtime.verify import random_inputs, random_params

PATH = EXAMPLES / "conformer_streaming.py"
CHUNK_SIZE, LEFT_CHUNKS, KERNEL = 4, 2, 5  # the example's
HEADS, HEAD_SIZE, POS_HALF, MODEL = 2, 8, 8, 16
LOG_STEP = -2.0 * 9.210340371976184 / MODEL
EPS = 1e-6  # LayerNorm's default
FRAMES = [37, 24, 17, 9]  # input frames: 19, 12, 9 and 5 encoder frames (chunks of 4: 5, 3, 3, 2)


class Reference:
    """The encoder of examples/conformer_streaming.py, chunk by chunk, from RETURNN-named parameters."""

    def __init__(self, params: dict[str, np.ndarray], left_chunks: int = LEFT_CHUNKS):
        self.p = {k: torch.from_numpy(v).double() for k, v in params.items()}
        self.left = left_chunks * CHUNK_SIZE  # keys and values each block keeps

    def linear(self, name: str, x: torch.Tensor) -> torch.Tensor:
        b = self.p.get(f"{name}/b")
        return x @ self.p[f"{name}/W"] + (0 if b is None else b)

    def norm(self, name: str, x: torch.Tensor) -> torch.Tensor:
        mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + EPS) * self.p[f"{name}/scale"] + self.p[f"{name}/bias"]

    def ffn(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return self.linear(f"{name}/linear_out", torch.nn.functional.silu(self.linear(f"{name}/linear_ff", x)))

    def pos_enc(self, rel: torch.Tensor) -> torch.Tensor:
        """Sinusoidal encodings of relative positions (key minus query), [..., model]."""
        angles = rel.double()[..., None] * torch.exp(torch.arange(POS_HALF, dtype=torch.float64) * LOG_STEP)
        return torch.cat([torch.sin(angles), torch.cos(angles)], -1)

    def attention(self, name: str, x: torch.Tensor, start: int, cache: dict) -> torch.Tensor:
        """x: the chunk's frames [c, model], from frame `start`; `cache` holds the keys and values
        of the frames before it (at most `self.left`)."""
        c = x.shape[0]
        q, k, v = (self.linear(f"{name}/{m}", x).view(c, HEADS, HEAD_SIZE) for m in ("query", "key", "value"))
        keys, values = torch.cat([cache["k"], k]), torch.cat([cache["v"], v])  # [L, heads, head_feat]
        key_pos = torch.arange(start + c - keys.shape[0], start + c)
        rel = key_pos[None, :] - torch.arange(start, start + c)[:, None]  # [c, L]
        pos = self.linear(f"{name}/linear_pos", self.pos_enc(rel)).view(c, -1, HEADS, HEAD_SIZE)
        content = torch.einsum("qhd,khd->qkh", q + self.p[f"{name}/pos_bias_u/b"], keys)
        position = torch.einsum("qhd,qkhd->qkh", q + self.p[f"{name}/pos_bias_v/b"], pos)
        w = torch.softmax((content + position) * HEAD_SIZE**-0.5, dim=1)
        keep = max(keys.shape[0] - self.left, 0)  # the last `self.left` frames for the next chunk
        cache["k"], cache["v"] = keys[keep:], values[keep:]
        return self.linear(f"{name}/proj", torch.einsum("qkh,khd->qhd", w, values).reshape(c, MODEL))

    def conv(self, name: str, x: torch.Tensor, cache: dict) -> torch.Tensor:
        g = torch.nn.functional.glu(self.linear(f"{name}/positionwise_conv1", x), dim=-1)
        frames = torch.cat([cache["conv"], g])  # the last kernel - 1 inputs before the chunk, then its own
        w = self.p[f"{name}/depthwise_conv/W"][:, 0, :]  # [kernel, model]: one filter per channel
        y = sum(w[i] * frames[i : i + g.shape[0]] for i in range(KERNEL)) + self.p[f"{name}/depthwise_conv/bias"]
        cache["conv"] = frames[-(KERNEL - 1) :]
        h = torch.nn.functional.silu(self.norm(f"{name}/norm", y))
        return self.linear(f"{name}/positionwise_conv2", h)

    def block(self, name: str, x: torch.Tensor, start: int, cache: dict) -> torch.Tensor:
        x = 0.5 * self.ffn(f"{name}/ffn1", self.norm(f"{name}/ffn1_layer_norm", x)) + x
        x = self.attention(f"{name}/self_att", self.norm(f"{name}/self_att_layer_norm", x), start, cache) + x
        x = self.conv(f"{name}/conv_block", self.norm(f"{name}/conv_layer_norm", x), cache) + x
        x = 0.5 * self.ffn(f"{name}/ffn2", self.norm(f"{name}/ffn2_layer_norm", x)) + x
        return self.norm(f"{name}/final_layer_norm", x)

    def encode(self, x: np.ndarray) -> torch.Tensor:
        """One sequence's valid frames [n, feat] -> its encoder frames [ceil(n/2), model]."""
        h = self.linear("frontend", torch.from_numpy(x).double())
        h = torch.stack([h[j : j + 2].max(0).values for j in range(0, h.shape[0], 2)])  # pairs of frames
        caches = {
            b: {
                "k": torch.zeros(0, HEADS, HEAD_SIZE, dtype=torch.float64),
                "v": torch.zeros(0, HEADS, HEAD_SIZE, dtype=torch.float64),
                "conv": torch.zeros(KERNEL - 1, MODEL, dtype=torch.float64),
            }
            for b in ("block1", "block2")
        }
        out = []
        for start in range(0, h.shape[0], CHUNK_SIZE):  # the last chunk may be shorter
            chunk = h[start : start + CHUNK_SIZE]
            for b in ("block1", "block2"):
                chunk = self.block(b, chunk, start, caches[b])
            out.append(chunk)
        return torch.cat(out)


@pytest.fixture(scope="module")
def batch():
    g = compile_graph(str(PATH), network="conformer_streaming")
    rng = np.random.default_rng(3)
    enc = [math.ceil(n / 2) for n in FRAMES]
    lens = {"time": np.array(FRAMES), "label_time": np.array([max(1, e // 2) for e in enc])}
    return g, random_inputs(g, lens, rng), lens, random_params(g, rng), enc


def _max_diff(encoder: np.ndarray, reference: list[torch.Tensor]) -> float:
    return max(float(np.abs(encoder[b, : r.shape[0]] - r.numpy()).max()) for b, r in enumerate(reference))


@pytest.mark.parametrize("backend", ["eager", "torch", "returnn"])
def test_chunk_by_chunk_equals_whole_sequence(batch, backend):
    g, inputs, lens, params, enc = batch
    assert g.network == "conformer_streaming"
    if backend == "eager":
        res = run_eager(str(PATH), g, inputs, lens, params)
    elif backend == "torch":
        res = run_torch(g, inputs, lens, params)
    else:
        res = run_returnn(g, inputs, lens, params)
    assert res.dims["encoder"] == ["batch", "enc_time", "model"]
    assert list(res.lens["encoder"]["enc_time"]) == enc
    ref = Reference(params)
    streamed = [ref.encode(inputs["x"][b, :n]) for b, n in enumerate(FRAMES)]
    assert [r.shape[0] for r in streamed] == enc
    diff = _max_diff(res.outputs["encoder"], streamed)
    print(f"{backend}: chunk by chunk vs whole sequence, max |diff| {diff:.3g}")
    assert diff <= 1e-5, diff
    # the limited context matters on these lengths: one more chunk of cache gives other numbers
    wider = Reference(params, left_chunks=LEFT_CHUNKS + 1)
    assert _max_diff(res.outputs["encoder"], [wider.encode(inputs["x"][b, :n]) for b, n in enumerate(FRAMES)]) > 1e-3
