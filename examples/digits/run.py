"""The spoken-digit recipe, end to end on a CPU: synthesise a corpus with espeak-ng (if the data dir
does not hold it yet), compute log-mel features, compile the model's netc source to a PyTorch module,
train it with Adam on CTC, decode the held-out voices greedily and with a CTC prefix beam search,
and print the digit error rate (WER, each digit a word) of both. A streaming model (`--model
streaming`) is then exported as a step module (`netc export --streaming`, ONNX) and the test set
streamed through it chunk by chunk in onnxruntime (and through the chunked torch module, and the
whole-sequence one over the audio so far): WER, compute per chunk, real-time factor.

    python examples/digits/run.py --data /tmp/digits

See docs/recipe-digits.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the recipe's own modules, when run as a script or imported by a test

from features import wav_features  # noqa: E402
from make_data import have_corpus, make_corpus, read_split  # noqa: E402
from stream import Streamed, stream_chunked, stream_decode, stream_step  # noqa: E402

from netc.compiler import compile_file  # noqa: E402


@dataclass(frozen=True)
class ModelSource:
    """A model of the recipe: its netc source, the training network (one `ctc` loss) and the
    decoding network (same parameters; `greedy` and `labels` outputs)."""

    path: Path
    train: str
    decode: str
    encode: str | None = None  # a streaming model's log-probabilities network (stream.py runs it)
    chunked: str | None = None  # and the same chunk by chunk (a chunked loop, caches as state)
    pool: int = 0  # input frames per encoder frame
    chunk_size: int = 0  # encoder frames per chunk


MODELS = {
    "blstm": ModelSource(HERE / "blstm_ctc.py", "blstm_ctc", "blstm_ctc_decode"),
    "streaming": ModelSource(
        HERE / "streaming_ctc.py",
        "streaming_ctc",
        "streaming_ctc_decode",
        "streaming_ctc_encode",
        "streaming_ctc_chunked",
        pool=4,
        chunk_size=4,
    ),
}


@dataclass
class Utterance:
    features: np.ndarray  # [frames, 40], normalised
    digits: list[int]
    variant: str  # espeak-ng's voice variant (`f5` of `en-us+f5`)


def load_split(data: Path, split: str) -> list[Utterance]:
    return [
        Utterance(wav_features(data / split / row["file"]), [int(d) for d in row["digits"]], row["voice"].split("+")[1])
        for row in read_split(data, split)
    ]


def normalise(train: list[Utterance], test: list[Utterance]) -> None:
    """Each feature to zero mean and unit variance over the training frames."""
    frames = np.concatenate([u.features for u in train])
    mean, std = frames.mean(0), frames.std(0) + 1e-5
    for u in train + test:
        u.features = (u.features - mean) / std


def batches(utts: list[Utterance], size: int, rng: np.random.Generator | None) -> list[dict[str, torch.Tensor]]:
    """Padded batches of utterances of similar length (less padding); shuffled when rng is given."""
    order = sorted(range(len(utts)), key=lambda i: len(utts[i].features))
    groups = [order[i : i + size] for i in range(0, len(order), size)]
    if rng is not None:
        rng.shuffle(groups)
    out = []
    for group in groups:
        frames = [len(utts[i].features) for i in group]
        labels = [len(utts[i].digits) for i in group]
        x = np.zeros((len(group), max(frames), utts[group[0]].features.shape[1]), np.float32)
        y = np.zeros((len(group), max(labels)), np.int64)
        for b, i in enumerate(group):
            x[b, : frames[b]], y[b, : labels[b]] = utts[i].features, utts[i].digits
        out.append(
            {
                "x": torch.from_numpy(x),
                "y": torch.from_numpy(y),
                "time_lens": torch.tensor(frames),
                "label_time_lens": torch.tensor(labels),
                "index": torch.tensor(group),
            }
        )
    return out


def load_module(source: ModelSource, network: str, out: Path) -> type[torch.nn.Module]:
    """`netc compile <source> --network <network> --target torch`, written to out and imported."""
    path = out / f"{network}_torch.py"
    path.write_text(compile_file(str(source.path), "torch", network=network))
    spec = importlib.util.spec_from_file_location(f"digits_{network}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Model


def edit_distance(ref: list[int], hyp: list[int]) -> int:
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


def wer(utts: list[Utterance], hyps: list[list[int]]) -> float:
    """Digit error rate in percent: edits over reference digits."""
    return 100.0 * sum(edit_distance(u.digits, h) for u, h in zip(utts, hyps)) / sum(len(u.digits) for u in utts)


@torch.no_grad()
def decode(decoder: torch.nn.Module, utts: list[Utterance], batch_size: int) -> dict[str, list[list[int]]]:
    """Greedy and beam hypotheses of each utterance, in utts' order."""
    decoder.eval()
    hyps: dict[str, list[list[int]]] = {"greedy": [[] for _ in utts], "beam": [[] for _ in utts]}
    for b in batches(utts, batch_size, None):
        res = decoder(b["x"], b["time_lens"])
        for k, i in enumerate(b["index"].tolist()):
            hyps["greedy"][i] = res["greedy"][k, : res["greedy_time_lens"][k]].tolist()
            hyps["beam"][i] = res["labels"][k, : res["search_time_lens"][k]].tolist()
    return hyps


def run(
    data: Path,
    model: str = "blstm",
    n_train: int = 2000,
    n_test: int = 300,
    epochs: int = 10,
    batch_size: int = 8,
    lr: float = 1e-3,
    seed: int = 0,
    log=print,
) -> dict[str, float]:
    """The whole recipe; returns the WERs (untrained, greedy, beam) and the seconds each stage took."""
    times = {}
    start = time.perf_counter()
    if not have_corpus(data, n_train, n_test):
        log(f"synthesising {n_train} + {n_test} utterances with espeak-ng under {data}")
        make_corpus(data, n_train, n_test, seed)
    times["data_s"] = time.perf_counter() - start

    start = time.perf_counter()
    train, test = load_split(data, "train"), load_split(data, "test")
    normalise(train, test)
    times["features_s"] = time.perf_counter() - start
    hours = sum(len(u.features) for u in train) / 100 / 3600
    log(f"features: {len(train)} training utterances ({hours:.2f} h), {len(test)} test (held-out voices)")

    source = MODELS[model]
    out = data / "work"
    out.mkdir(exist_ok=True)
    torch.manual_seed(seed)
    net = load_module(source, source.train, out)().train()
    decoder = load_module(source, source.decode, out)()
    decoder.load_state_dict(net.state_dict())
    results = {"untrained_wer": wer(test, decode(decoder, test, batch_size)["greedy"])}
    log(f"untrained: greedy WER {results['untrained_wer']:.1f}%")

    start = time.perf_counter()
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    for epoch in range(1, epochs + 1):
        net.train()
        total, labels = 0.0, 0
        for b in batches(train, batch_size, rng):
            loss = net(b["x"], b["y"], b["time_lens"], b["label_time_lens"])["ctc"]  # summed over the batch
            opt.zero_grad()
            (loss / b["label_time_lens"].sum()).backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
            opt.step()
            total, labels = total + loss.item(), labels + int(b["label_time_lens"].sum())
        log(f"epoch {epoch}: CTC loss per digit {total / labels:.3f} ({time.perf_counter() - start:.0f} s)")
    times["train_s"] = time.perf_counter() - start
    torch.save(net.state_dict(), out / f"{source.train}.pt")

    start = time.perf_counter()
    decoder.load_state_dict(net.state_dict())
    hyps = decode(decoder, test, batch_size)
    times["decode_s"] = time.perf_counter() - start
    results.update(greedy_wer=wer(test, hyps["greedy"]), beam_wer=wer(test, hyps["beam"]))
    log(f"held-out voices, {sum(len(u.digits) for u in test)} digits:")
    log(f"  greedy WER {results['greedy_wer']:.2f}%")
    log(f"  beam   WER {results['beam_wer']:.2f}%")
    for variant in sorted({u.variant for u in test}):
        ids = [i for i, u in enumerate(test) if u.variant == variant]
        sub = [test[i] for i in ids]
        log(f"  voice variant {variant}: greedy WER {wer(sub, [hyps['greedy'][i] for i in ids]):.2f}%")
    if source.encode:
        start = time.perf_counter()
        results |= streamed(source, out, net, test, hyps["greedy"], log)
        times["stream_s"] = time.perf_counter() - start
    log("seconds: " + ", ".join(f"{k[:-2]} {v:.0f}" for k, v in times.items()))
    return results | times


def streamed(
    source: ModelSource, out: Path, net: torch.nn.Module, test: list[Utterance], whole: list[list[int]], log
) -> dict[str, float]:
    """The test set streamed chunk by chunk (stream.py): by the chunked network's step module as
    `netc export --streaming` writes it, in onnxruntime (the caches carried by netc's host runner);
    by the chunked network's torch module (its caches carried from chunk to chunk in the module);
    and by the whole-sequence encoder over the audio so far. Their WERs, which must equal the
    whole-sequence greedy WER (`whole`: the same hypotheses), the compute per chunk and the
    real-time factor."""
    encoder = load_module(source, source.encode, out)().eval()
    encoder.load_state_dict(net.state_dict())
    chunked = load_module(source, source.chunked, out)()
    chunked.load_state_dict(net.state_dict())
    start = time.perf_counter()
    step = export_step(source, chunked, out)
    log(f"exported in {time.perf_counter() - start:.1f} s")
    feats = [u.features for u in test]
    with torch.no_grad():  # the whole utterance at once, to compare the streamed log-probabilities with
        ref = [
            encoder(torch.from_numpy(f[None].astype(np.float32)), torch.tensor([len(f)]))["output"][0] for f in feats
        ]
    chunk_ms = 10 * source.pool * source.chunk_size
    results: dict[str, float] = {}
    runs: list[tuple[str, str, Streamed]] = [
        ("onnx", "the exported step module in onnxruntime", stream_step(step, feats, torch.get_num_threads())),
        ("chunked", "the chunked network", stream_chunked(chunked, feats, source.pool, source.chunk_size)),
        (
            "prefix",
            "whole-sequence encoder over the audio so far",
            stream_decode(encoder, feats, source.pool, source.chunk_size),
        ),
    ]
    for key, what, res in runs:
        diff = max(float(np.abs(r.numpy() - lp).max()) for r, lp in zip(ref, res.log_probs))
        same = sum(h == w for h, w in zip(res.hyps, whole))
        results |= {
            f"{key}_wer": wer(test, res.hyps),
            f"{key}_max_diff": diff,
            f"{key}_same": same,
            f"{key}_chunk_ms_median": float(np.median(res.chunk_ms)),
            f"{key}_rtf": res.rtf,
        }
        log(f"streamed {key}, chunks of {chunk_ms} ms ({what}): greedy WER {results[f'{key}_wer']:.2f}%")
        log(f"  = whole-sequence greedy hypotheses: {same} of {len(test)}; log-probs max|diff| {diff:.1e}")
        log(
            f"  compute per {chunk_ms} ms chunk: median {results[f'{key}_chunk_ms_median']:.2f} ms,"
            f" 90th percentile {np.percentile(res.chunk_ms, 90):.2f} ms ({len(res.chunk_ms)} values);"
            f" real-time factor {res.rtf:.3f}"
        )
    return results


def export_step(source: ModelSource, chunked: torch.nn.Module, out: Path) -> str:
    """`netc export <source> --network <chunked> --streaming --format onnx --params <its trained
    parameters>`: the chunked network's step (one chunk's frames and the caches in, its outputs
    and the new caches out) as an ONNX file with its sidecar, checked against torch by the export."""
    from netc.cli_stream import export_streaming

    params = out / f"{source.chunked}_params.npz"
    np.savez(
        params,
        **{
            f"param:{name}": chunked.get_parameter(attr).detach().numpy()
            for name, attr in chunked.returnn_param_names.items()
        },
    )
    path = str(out / f"{source.chunked}.onnx")
    export_streaming(str(source.path), source.chunked, "onnx", path, str(params), 0, None, None, False)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the corpus's directory (made if missing)")
    parser.add_argument("--model", choices=sorted(MODELS), default="blstm")
    parser.add_argument("--train", type=int, default=2000, help="training utterances")
    parser.add_argument("--test", type=int, default=300, help="test utterances (held-out voices)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    run(args.data, args.model, args.train, args.test, args.epochs, args.batch_size, args.lr, args.seed)


if __name__ == "__main__":
    main()
