"""The streamed decode of the recipe's streaming model: audio in chunk by chunk, each chunk's
digits out once it is in.

`stream_step` runs the chunked network's step module (`netc export --streaming`: one chunk's
frames and the caches in, its log-probabilities and the new caches out) chunk by chunk in
onnxruntime through netc's host runner (`netc_runtime/stream_runner.py`), as a deployment would.

The model's attention reads no frame after its query's chunk and its convolution is causal, so the
log-probabilities of an encoder frame are final once the input chunk holding it is complete. This
decode feeds each utterance's features in chunks of `POOL * CHUNK_SIZE` input frames (160 ms) and,
after each, runs the whole-sequence (chunk-masked) encoder over all the audio so far and keeps the
new chunk's frames: the same numbers as the chunked form with caches, at a cost that grows with the
utterance (the chunked form computes only the new chunk). It measures the compute time of each
chunk (the latency a chunk adds after its audio is in) and the real-time factor.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

BLANK = 10  # CTC's blank: after the ten digits


@dataclass
class Streamed:
    hyps: list[list[int]]  # greedy digits of each utterance
    log_probs: list[np.ndarray]  # [enc_frames, 11] of each utterance, as streamed
    chunk_ms: list[float]  # compute time of each chunk, all utterances
    compute_s: float  # all chunks together
    audio_s: float  # the audio streamed

    @property
    def rtf(self) -> float:
        return self.compute_s / self.audio_s


def greedy(log_probs: np.ndarray) -> list[int]:
    """CTC's best path: the argmax per frame, repeats merged, blanks dropped."""
    best = log_probs.argmax(-1).tolist()
    return [k for t, k in enumerate(best) if k != BLANK and (t == 0 or k != best[t - 1])]


def stream_step(path: str, features: list[np.ndarray], threads: int | None = None) -> Streamed:
    """Each utterance (features [frames, 40] at 10 ms) through the step module at `path` (its
    sidecar `<path>.json` says how many input frames a chunk takes), one chunk a call, the caches
    carried by the host runner; the compute of each call timed."""
    from netc_runtime.stream_runner import StepModule, Stream

    module = StepModule(path, threads)
    chunk = module.meta["chunk"]
    size, lens_name = int(chunk["size"]), chunk["lengths"]
    out_lens = next(o["name"] for o in module.outputs if o["kind"] == "lengths")
    out = Streamed([], [], [], 0.0, sum(len(f) for f in features) / 100)
    for f in features:
        stream = Stream(module, 1)
        frames: list[np.ndarray] = []
        for begin in range(0, len(f), size):
            x = np.zeros((1, size, f.shape[1]), np.float32)  # the last chunk filled up; its lengths say so
            n = min(size, len(f) - begin)
            x[0, :n] = f[begin : begin + n]
            start = time.perf_counter()
            got = stream.feed({"x": x, lens_name: np.array([n], np.int64)})
            out.chunk_ms.append(1000 * (time.perf_counter() - start))
            frames.append(got["output"][0, : int(got[out_lens][0])])
        out.log_probs.append(np.concatenate(frames))
        out.hyps.append(greedy(out.log_probs[-1]))
    out.compute_s = sum(out.chunk_ms) / 1000
    return out


@torch.no_grad()
def stream_decode(encoder: torch.nn.Module, features: list[np.ndarray], pool: int, chunk_size: int) -> Streamed:
    """Each utterance (features [frames, 40] at 10 ms) streamed in chunks of pool * chunk_size frames
    through `encoder` (the `streaming_ctc_encode` module: log-probabilities [1, enc_time, 11])."""
    encoder.eval()
    chunk = pool * chunk_size
    out = Streamed([], [], [], 0.0, sum(len(f) for f in features) / 100)
    for f in features:
        x = torch.from_numpy(np.ascontiguousarray(f, np.float32))[None]
        frames: list[np.ndarray] = []
        done = 0  # encoder frames final so far
        for end in range(chunk, len(f) + chunk, chunk):
            end = min(end, len(f))
            start = time.perf_counter()
            lp = encoder(x[:, :end], torch.tensor([end]))["output"][0]
            final = -(-end // pool)  # every encoder frame of a complete chunk (all at the end)
            frames.append(lp[done:final].numpy())
            done = final
            out.chunk_ms.append(1000 * (time.perf_counter() - start))
        out.log_probs.append(np.concatenate(frames))
        out.hyps.append(greedy(out.log_probs[-1]))
    out.compute_s = sum(out.chunk_ms) / 1000
    return out


@torch.no_grad()
def stream_chunked(chunked: torch.nn.Module, features: list[np.ndarray], pool: int, chunk_size: int) -> Streamed:
    """Each utterance through `chunked` (the `streaming_ctc_chunked` module: the encoder as a loop over
    chunks of chunk_size encoder frames, the keys, values and convolution frames cached from chunk to
    chunk), one utterance at a time. The module runs an utterance's chunks in one call, so a chunk's
    compute is the call's time over its chunks (the front end's too): one number per utterance."""
    chunked.eval()
    out = Streamed([], [], [], 0.0, sum(len(f) for f in features) / 100)
    for f in features:
        x = torch.from_numpy(np.ascontiguousarray(f, np.float32))[None]
        start = time.perf_counter()
        lp = chunked(x, torch.tensor([len(f)]))["output"][0].numpy()
        seconds = time.perf_counter() - start
        out.compute_s += seconds
        out.chunk_ms.append(1000 * seconds / -(-len(f) // (pool * chunk_size)))
        out.log_probs.append(lp)
        out.hyps.append(greedy(lp))
    return out
