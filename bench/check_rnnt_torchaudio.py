"""netc's `transducer_search(method="graves")` against torchaudio's `RNNTBeamSearch` on many small
searches: tests/test_transducer_search_ref.py's model (5 classes, the blank last: merges and
near-ties are frequent), torchaudio's predictor and joiner computing its numpy networks (float64),
hypotheses ranked by score, `step_max_tokens` netc's `max_sym_per_frame`. Counts the sequences
whose best hypothesis (labels, score within 1e-4) netc's torch module and eager mode find, and
those where netc's `time_sync` finds another (the searches differ).

    .venv/bin/python bench/check_rnnt_torchaudio.py --torchaudio DIR [--seeds 40]

DIR: torchaudio installed apart, its C++ extension removed (see bench_transducer.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def torchaudio_search(net, max_sym: int):
    """RNNTBeamSearch over `net` (the test's numpy networks); its start token, the blank, is
    read as the start label."""
    from torchaudio.models import RNNT, RNNTBeamSearch

    class Transcriber(torch.nn.Module):  # the input is the encoder's output already
        def forward(self, input, lengths):
            return input, lengths

    class Predictor(torch.nn.Module):
        def forward(self, input, lengths, state=None):
            outs = []
            for r in range(input.shape[0]):
                k = int(input[r, 0])
                outs.append(torch.tensor(net.start() if k == net.blank else net.predict(k, state[0][0][r].numpy())))
            out = torch.stack(outs)
            return out[:, None], lengths, [[out]]

    class Joiner(torch.nn.Module):
        def forward(self, source_encodings, source_lengths, target_encodings, target_lengths):
            e = source_encodings[0, 0].numpy()
            lp = [net.log_probs(e, target_encodings[r, 0].numpy()) for r in range(target_encodings.shape[0])]
            return torch.tensor(lp)[:, None, None], source_lengths, target_lengths

    model = RNNT(Transcriber(), Predictor(), Joiner())
    return RNNTBeamSearch(model, net.blank, hypo_sort_key=lambda h: h[3], step_max_tokens=max_sym)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torchaudio", type=Path, required=True, help="a directory holding torchaudio")
    ap.add_argument("--seeds", type=int, default=40)
    args = ap.parse_args()
    sys.path[:0] = [str(args.torchaudio), str(ROOT / "tests")]
    import test_transducer_search_ref as ref

    directory = Path(tempfile.mkdtemp(prefix="check_rnnt_"))
    same, total, other = {"torch": 0, "eager": 0}, 0, 0
    for beam, max_sym in ((2, 2), (3, 3), (4, 1)):
        path = ref._model(directory, "graves", beam, max_sym)
        sync = ref._model(directory, "time_sync", beam, max_sym)
        for seed in range(args.seeds):
            x, frames, net, res = ref._run(path, seed)
            _, _, _, sync_res = ref._run(sync, seed)
            search = torchaudio_search(net, max_sym)
            for b, n in enumerate(frames):
                with torch.no_grad():
                    tokens, _, _, score = search(torch.tensor(net.encode(x[b, :n]))[None], torch.tensor([n]), beam)[0]
                total += 1
                for backend, r in res.items():
                    labels = r.outputs["labels"][b, : r.lens["labels"]["dec_time"][b]].tolist()
                    same[backend] += labels == tokens[1:] and abs(float(r.outputs["scores"][b]) - score) <= 1e-4
                s = sync_res["torch"]
                labels = s.outputs["labels"][b, : s.lens["labels"]["dec_time"][b]].tolist()
                other += labels != tokens[1:] or abs(float(s.outputs["scores"][b]) - score) > 1e-4
    print(
        f"{total} sequences: torchaudio's best hypothesis is netc graves' in {same['torch']} (torch) and "
        f"{same['eager']} (eager); netc time_sync's differs in {other}"
    )


if __name__ == "__main__":
    main()
