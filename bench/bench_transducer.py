"""Transducer search speed: netc's `transducer_search` (torch module and eager mode) against
torchaudio's `RNNTBeamSearch`, on the same prediction and joint networks and parameters.

    .venv/bin/python bench/bench_transducer.py [--batch 4] [--time 50] [--beam 4] [--runs 3]
        [--eager-runs 1] [--blank-bias 2.5] [--joint-scale 1] [--methods ...] [--torchaudio DIR]

The decoder is `transducer_model.py` (encoder output 256 → LSTM prediction 320, joint 320, vocab
500 + blank), searched greedily (up to 10 symbols per frame), with icefall's modified beam search
time-synchronously and with torchaudio's search (`graves`; both up to 3 labels per frame), each
with a beam of `--beam`; the encoder frames are random, each sequence's frames spread from
`--time` down to half of it. torchaudio's `RNNTBeamSearch` decodes one sequence per call, with a
predictor and joiner computing netc's networks from the torch module's parameters (its hypotheses
start from the blank, which its predictor reads as netc's start label), its hypotheses ranked by
score (`hypo_sort_key`, as netc's) and `step_max_tokens` netc's `max_sym_per_frame`. Before timing,
the networks as ported decode greedily as netc's `greedy` does, and its beam search (`--beam`)
finds netc's `graves` best hypothesis in every sequence (the same labels, the score within 1e-4
relative: torchaudio adds scores in float32); its beam of 1 is timed beside `greedy`. Rows are
milliseconds per batch, medians of interleaved runs after a warm-up, 1 thread.

torchaudio: its newest wheel on PyPI (2.11) is a CUDA build whose C++ extension fails to load with
a CPU torch (`libc10_cuda.so: cannot open shared object file`); `RNNTBeamSearch` is Python only,
so `--torchaudio DIR` takes a copy installed apart and with its extension removed
(`pip install --target DIR --no-deps torchaudio && rm DIR/torchaudio/lib/*.so`). Without the
option, or where it does not import, the torchaudio row is left out (and says why).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from bench_torch import report, timed

from netc.compiler import compile_graph
from netc_runtime.backends import load_torch_module, run_backend
from netc_runtime.verify import random_params

MODEL = Path(__file__).with_name("transducer_model.py")
BLANK, START = 500, 0
METHODS = {
    "greedy": ("greedy", 1, 10),
    "modified": ("modified", None, 1),
    "time_sync": ("time_sync", None, 3),
    "graves": ("graves", None, 3),
}


def variant(directory: Path, method: str, beam: int, max_sym: int) -> Path:
    text = MODEL.read_text(encoding="utf-8")
    for old, new in (
        ('METHOD = "time_sync"', f"METHOD = {method!r}"),
        ("BEAM = 4", f"BEAM = {beam}"),
        ("MAX_SYM = 3", f"MAX_SYM = {max_sym}"),
    ):
        assert f"\n{old}\n" in text, old
        text = text.replace(f"\n{old}\n", f"\n{new}\n")
    path = directory / f"transducer_{method}.py"
    path.write_text(text, encoding="utf-8")
    return path


def torchaudio_search(model, max_sym: int):
    """torchaudio's RNNTBeamSearch over netc's networks (`model`: the netc torch module's)."""
    from torchaudio.models import RNNT, RNNTBeamSearch

    class Transcriber(torch.nn.Module):  # the input is the encoder's output already
        def forward(self, input, lengths):
            return input, lengths

    class Predictor(torch.nn.Module):
        def forward(self, input, lengths, state=None):
            p = model.prediction
            labels = torch.where(input == BLANK, START, input)  # its start token, netc's start label
            x = torch.nn.functional.embedding(labels, p.embedding.W)  # [B, U, emb]
            n = x.shape[0]
            h, c = state[0] if state is not None else (x.new_zeros(n, 320), x.new_zeros(n, 320))
            outs = []
            for u in range(x.shape[1]):
                z = x[:, u] @ p.ff_linear.W + p.ff_linear.b + h @ p.rec_linear.W
                x_in, g_in, g_forget, g_out = z.split(320, dim=-1)
                c = c * torch.sigmoid(g_forget) + torch.tanh(x_in) * torch.sigmoid(g_in)
                h = torch.tanh(c) * torch.sigmoid(g_out)
                outs.append(h)
            return torch.stack(outs, 1), lengths, [[h, c]]

    class Joiner(torch.nn.Module):
        def forward(self, source_encodings, source_lengths, target_encodings, target_lengths):
            j = model.joint
            source, target = source_encodings, target_encodings
            hidden = (source @ j.enc_proj.W + j.enc_proj.b)[:, :, None] + (target @ j.pred_proj.W)[:, None]
            return torch.tanh(hidden) @ j.out.W + j.out.b, source_lengths, target_lengths

    rnnt = RNNT(Transcriber(), Predictor(), Joiner())
    return RNNTBeamSearch(rnnt, BLANK, hypo_sort_key=lambda h: h[3], step_max_tokens=max_sym)


def port_greedy(rnnt, enc: torch.Tensor, max_sym: int) -> tuple[list[int], float]:
    """Greedy decoding (netc's `greedy`) with torchaudio's model of netc's networks."""
    one = torch.tensor([1])
    with torch.no_grad():
        out, _, state = rnnt.predict(torch.tensor([[BLANK]]), one, None)
        labels, score = [], 0.0
        for t in range(enc.shape[0]):
            for _ in range(max_sym):
                joined, _, _ = rnnt.join(enc[None, t : t + 1], one, out, one)
                lp = torch.log_softmax(joined[0, 0, 0], dim=-1)
                k = int(lp.argmax())
                score += float(lp[k])
                if k == BLANK:
                    break
                labels.append(k)
                out, _, state = rnnt.predict(torch.tensor([[k]]), one, state)
    return labels, score


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--time", type=int, default=50)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--blank-bias", type=float, default=2.5, help="added to the joint's blank bias")
    ap.add_argument("--joint-scale", type=float, default=1.0, help="the joint's output weights multiplied")
    ap.add_argument("--methods", default=",".join(METHODS), help="the methods to run, comma-separated")
    ap.add_argument("--eager-runs", type=int, default=1, help="eager mode's runs (0: leave it out)")
    ap.add_argument("--torchaudio", type=Path, help="a directory holding torchaudio (see the docstring)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    lens = np.linspace(args.time, max(1, args.time // 2), args.batch).round().astype(np.int64)
    enc = rng.standard_normal((args.batch, args.time, 256)).astype(np.float32)
    tmp = Path(tempfile.mkdtemp(prefix="bench_transducer_"))
    torchaudio_error = None
    if args.torchaudio is None:
        torchaudio_error = "no --torchaudio DIR"
    else:
        sys.path.insert(0, str(args.torchaudio))
        try:
            import torchaudio  # noqa: F401
        except Exception as e:  # noqa: BLE001 - reported as the row's absence
            torchaudio_error = f"{type(e).__name__}: {e}"
    x, x_lens = torch.from_numpy(enc), torch.from_numpy(lens)
    params = None
    for name in args.methods.split(","):
        method, beam, max_sym = METHODS[name]
        beam = beam or args.beam
        path = variant(tmp, method, beam, max_sym)
        g = compile_graph(str(path))
        if params is None:
            params = random_params(g, np.random.default_rng(1))
            params["joint/out/W"] *= args.joint_scale  # > 1: peaked distributions (labels in beam searches)
            params["joint/out/b"][BLANK] += args.blank_bias  # frames of 0 to several labels (at 2.5)
        model = load_torch_module(g).Model()
        model.load_returnn_params(params)
        model.eval()

        def netc_torch(model=model):
            with torch.no_grad():
                return model(x, x_lens)

        rows = {f"netc torch ({method})": netc_torch}
        same = ""
        ours = netc_torch()
        n_labels = ours["dec_time_lens"].tolist()
        if torchaudio_error is None and method in ("greedy", "graves"):
            ta = torchaudio_search(model, max_sym)
            ta_beam = 1 if method == "greedy" else beam

            def theirs(ta=ta, ta_beam=ta_beam):
                with torch.no_grad():
                    return [ta(x[b, : lens[b]], torch.tensor([int(lens[b])]), ta_beam)[0] for b in range(args.batch)]

            if method == "greedy":  # the ported networks decode greedily as netc's
                for b in range(args.batch):
                    labels, score = port_greedy(ta.model, x[b, : lens[b]], max_sym)
                    assert labels == ours["labels"][b, : n_labels[b]].tolist(), b
                    assert abs(score - float(ours["scores"][b])) <= 1e-3 * max(1.0, abs(score)), b
            else:  # its hypotheses are netc's
                for b, (tokens, _, _, score) in enumerate(theirs()):
                    assert tokens[1:] == ours["labels"][b, : n_labels[b]].tolist(), (b, tokens[1:])
                    assert abs(score - float(ours["scores"][b])) <= 1e-4 * max(1.0, abs(score)), b
                same = f", torchaudio's best hypothesis netc's in {args.batch} of {args.batch}"
            rows[f"torchaudio RNNTBeamSearch (beam {ta_beam})"] = theirs
        times = timed(rows, args.runs)
        if args.eager_runs:
            eager = run_backend("eager", str(path), {"enc": enc}, {"time": lens}, params, g)
            assert eager.outputs["labels"].tolist() == ours["labels"].tolist(), method
            diff = np.abs(eager.outputs["scores"] - ours["scores"].numpy())
            assert (diff <= 1e-4 * np.maximum(1.0, np.abs(ours["scores"].numpy()))).all(), (
                method,
                diff,
                ours["scores"],
            )

            def netc_eager(path=path, g=g, params=params):
                run_backend("eager", str(path), {"enc": enc}, {"time": lens}, params, g)

            times.update(timed({f"netc eager ({method})": netc_eager}, args.eager_runs))
        title = (
            f"{name}: beam {beam}, up to {max_sym} labels per frame, batch {args.batch}, "
            f"{args.time}..{lens[-1]} frames, {sum(n_labels)} labels found (1 thread){same}"
        )
        report(title, times, f"netc torch ({method})", "netc torch")
    if torchaudio_error is not None:
        print(f"torchaudio left out: {torchaudio_error}")


if __name__ == "__main__":
    main()
