"""The batch `netc verify` (and `netc check --construct`) draws obeys what it claims: every
dynamic input dim within --max-len, unequal lengths with the first sequence the longest, and the
labels of a `ctc_loss` alignable to its frames, so that the CTC loss (0 on every backend for
labels that cannot be aligned) really compares something, and the target of a `choice` loop
within the loop's bound (training runs over all of its frames)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, ROOT

from netc.compiler import compile_graph
from netc.ops.losses import ctc_frames_needed
from netc_runtime.backends import run_torch
from netc_runtime.verify import choice_target_bounds, ctc_labels, random_inputs, random_lengths, random_params

MODELS = ROOT / "tests" / "models"


def _draw(g, seed: int, batch: int, max_len: int):
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, batch, max_len, rng)
    inputs = random_inputs(g, lens, rng)
    return lens, inputs, random_params(g, rng)


def _check_lengths(lens: dict[str, np.ndarray], max_len: int, batch: int) -> None:
    for d, ls in lens.items():
        assert len(ls) == batch and ls.min() >= 1 and ls.max() <= max_len, (d, ls)
        assert ls[0] == ls.max(), (d, ls)  # the first sequence is the longest


@pytest.mark.parametrize(
    "model, losses",
    [
        # the loss per sequence is an output; `frames` is pooled from `time`
        (MODELS / "ctc_input_labels.py", {"label_time": ("y", "ctc_seq"), "one_time": ("z", "ctc_one_seq")}),
        (EXAMPLES / "librispeech_2018.py", {"dec_time": ("y", None)}),  # 8x fewer frames than `time`
    ],
)
def test_ctc_labels_fit_their_frames(model, losses):
    g = compile_graph(str(model))
    found = {c.labels_dim: c for c in ctc_labels(g)}
    assert set(found) == set(losses)
    seeds = range(6) if "librispeech" not in model.name else range(2)
    for seed in seeds:
        for max_len in (4, 7, 17):
            batch = 3 + seed % 2
            lens, inputs, params = _draw(g, seed, batch, max_len)
            _check_lengths(lens, max_len, batch)
            res = run_torch(g, inputs, lens, params)
            for dim, (labels_input, per_seq) in losses.items():
                frames_dim = found[dim].frames_dim
                frames = res.lens.get(per_seq or "ctc_prob", {}).get(frames_dim)
                if frames is None:  # a per-sequence loss output has no frames: pooled from time
                    frames = -(-lens["time"] // 2)
                labels = inputs[labels_input]
                for b in range(batch):
                    seq = labels[b, : lens[dim][b]].tolist()
                    assert ctc_frames_needed(seq) <= frames[b], (seed, max_len, dim, b, seq, frames)
                if per_seq:
                    loss = res.outputs[per_seq]
                else:  # librispeech: CTC per sequence of the torch module's own CTC probabilities
                    logp = torch.log(torch.as_tensor(res.outputs["ctc_prob"])).transpose(0, 1)
                    loss = torch.nn.functional.ctc_loss(
                        logp,
                        torch.as_tensor(labels).long(),
                        torch.as_tensor(frames),
                        torch.as_tensor(lens[dim]),
                        blank=logp.shape[-1] - 1,
                        reduction="none",
                    ).numpy()
                assert np.all(np.isfinite(loss)) and np.all(loss > 0), (seed, max_len, dim, loss)


def test_later_dims_stay_within_max_len_and_differ():
    g = compile_graph(str(EXAMPLES / "beam_search.py"))  # enc_time, then dec_time
    for seed in range(10):
        lens, _, _ = _draw(g, seed, 3, 7)
        _check_lengths(lens, 7, 3)
        assert lens["enc_time"][0] == 7 and lens["dec_time"][0] == 6  # a mix-up of the two shows
    lens, _, _ = _draw(g, 0, 2, 1)
    assert [ls.tolist() for ls in lens.values()] == [[1, 1], [1, 1]]


@pytest.mark.parametrize(
    "model, network, bounds",
    [
        # one class per encoder frame, in a loop over `range(x.max_seq_len)`: the input's frames
        (EXAMPLES / "conformer_transducer.py", "conformer_transducer_search", {"align_time": ("time", 1, 0)}),
        (EXAMPLES / "beam_search.py", None, {"dec_time": ("enc_time", 2, 0)}),  # range(2 * x.max_seq_len)
    ],
)
def test_choice_targets_fit_their_loops_bound(model, network, bounds):
    g = compile_graph(str(model), network=network)
    assert choice_target_bounds(g) == bounds
    ((target, (frames, scale, offset)),) = bounds.items()
    at_bound = 0
    for seed in range(20):
        lens = random_lengths(g, 4, 7, np.random.default_rng(seed))
        _check_lengths(lens, 7, 4)
        assert (lens[target] <= scale * lens[frames] + offset).all(), (seed, lens)
        at_bound += int((lens[target][1:] == scale * lens[frames][1:] + offset).sum())
    assert at_bound > 0  # cut to the bound


def test_choice_targets_fit_a_constant_bound():
    """`for _ in range(4)`: every target is drawn within 4 frames, still of unequal lengths."""
    g = compile_graph(str(ROOT / "tests" / "models" / "search_const_bound.py"))
    assert choice_target_bounds(g) == {"time": (None, 0, 4)}
    unequal = 0
    for seed in range(20):
        lens = random_lengths(g, 4, 7, np.random.default_rng(seed))
        assert lens["time"].max() <= 4 and lens["time"].min() >= 1, (seed, lens)
        assert lens["time"][0] == lens["time"].max()  # the first sequence the longest, as for any dim
        unequal += len(set(lens["time"].tolist())) > 1
    assert unequal >= 15
