"""Plain-Python references for CTC decoding (no torch): the standard prefix beam search with
dicts of prefixes, and an exhaustive search over all alignments. Blank is the last class."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

# an LM with state, as the reference sees it: a prefix (its labels from BOS) -> the log
# probabilities of its next label over the vocabulary
NextLogProbs = Callable[[tuple[int, ...]], list[float]]

NEG_INF = float("-inf")


def log_softmax(row: list[float]) -> list[float]:
    m = max(row)
    z = m + math.log(sum(math.exp(v - m) for v in row))
    return [v - z for v in row]


def lse(a: float, b: float) -> float:
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


def greedy(logits: list[list[float]]) -> list[int]:
    blank = len(logits[0]) - 1 if logits else 0
    out, prev = [], blank
    for row in logits:
        c = max(range(len(row)), key=lambda i: (row[i], -i))  # the first maximum, as argmax
        if c != blank and c != prev:
            out.append(c)
        prev = c
    return out


def _next_lm(lm: list[list[float]] | NextLogProbs | None, blank: int) -> NextLogProbs | None:
    """A bigram table [previous label (blank: the start), next label] as an LM of the prefix."""
    if lm is None or callable(lm):
        return lm
    table = lm
    return lambda prefix: table[prefix[-1] if prefix else blank]


def prefix_beam_search(
    logits: list[list[float]], beam: int, lm: list[list[float]] | NextLogProbs | None = None, lm_weight: float = 0.0
) -> tuple[list[int], float]:
    """(best prefix, its log probability + lm_weight * its LM log probability). `lm`: a bigram
    table or a function of the prefix (`NextLogProbs`). Candidates are kept in the order: the
    beam's prefixes, then their extensions; the `beam` best by total probability survive, ties to
    the earlier (Python's sort is stable)."""
    next_lm = _next_lm(lm, len(logits[0]) - 1 if logits else 0)
    beams: list[tuple[tuple[int, ...], float, float]] = [((), 0.0, NEG_INF)]  # (prefix, pb, pnb)
    for row in logits:
        lp = log_softmax(row)
        blank = len(lp) - 1
        cand: dict[tuple[int, ...], list[float]] = {}
        for prefix, pb, pnb in beams:  # unchanged: a blank, or the last label repeated
            total = lse(pb, pnb)
            cand[prefix] = [total + lp[blank], pnb + lp[prefix[-1]] if prefix else NEG_INF]
        for prefix, pb, pnb in beams:
            total = lse(pb, pnb)
            last = prefix[-1] if prefix else None
            lm_lp = next_lm(prefix) if next_lm is not None else None
            for c in range(blank):
                p = (pb if c == last else total) + lp[c]
                if lm_lp is not None:
                    p += lm_weight * lm_lp[c]
                entry = cand.setdefault(prefix + (c,), [NEG_INF, NEG_INF])
                entry[1] = lse(entry[1], p)
        ranked = sorted(cand.items(), key=lambda kv: -lse(*kv[1]))
        beams = [(p, b, nb) for p, (b, nb) in ranked[:beam] if lse(b, nb) > NEG_INF]
    prefix, pb, pnb = beams[0]
    return list(prefix), lse(pb, pnb)


def exhaustive(
    logits: list[list[float]], lm: list[list[float]] | NextLogProbs | None = None, lm_weight: float = 0.0
) -> dict[tuple[int, ...], float]:
    """Every label sequence's log probability summed over all its alignments (plus its LM part)."""
    lps = [log_softmax(row) for row in logits]
    classes = len(logits[0]) if logits else 1
    blank = classes - 1
    probs: dict[tuple[int, ...], float] = {}
    for path in itertools.product(range(classes), repeat=len(lps)):
        labels, prev = [], blank
        for c in path:
            if c != blank and c != prev:
                labels.append(c)
            prev = c
        key = tuple(labels)
        probs[key] = lse(probs.get(key, NEG_INF), sum(lp[c] for lp, c in zip(lps, path)))
    next_lm = _next_lm(lm, blank)
    if next_lm is not None:
        for key in probs:
            probs[key] += lm_weight * sum(next_lm(key[:i])[c] for i, c in enumerate(key))
    return probs


def flashlight_search(
    logits: list[list[float]],
    beam: int,
    lm: list[list[float]] | NextLogProbs | None = None,
    lm_weight: float = 0.0,
    beam_size_token: int = 0,
    beam_threshold: float = math.inf,
    log_add: bool = True,
) -> tuple[list[int], float]:
    """flashlight-text's `LexiconFreeDecoder` (CTC, the silence the blank, no silence score, an LM
    whose state is the prefix), written out: hypotheses (prefix, ended in a blank) with one score
    each. Per frame, each hypothesis is followed by each of the frame's `beam_size_token` best
    classes (0: all): a blank keeps the prefix (ended in a blank), the last label after a label
    repeats it, another label extends the prefix (`lm_weight` times its LM log probability added).
    Candidates below the best minus `beam_threshold` are dropped, those of one (prefix, ending)
    merged (log-added, or their maximum), the `beam` best kept. At the end the hypotheses within
    `beam_threshold` of the best merge by prefix. Returns (best prefix, its score)."""
    next_lm = _next_lm(lm, len(logits[0]) - 1 if logits else 0)
    hyps: dict[tuple[tuple[int, ...], bool], float] = {((), True): 0.0}  # (prefix, ended in a blank) -> score
    merge = lse if log_add else max
    for row in logits:
        lp = log_softmax(row)
        blank = len(lp) - 1
        order = sorted(range(len(lp)), key=lambda i: (-lp[i], i))
        tokens = order[:beam_size_token] if 0 < beam_size_token < len(lp) else order
        cands: list[tuple[tuple[int, ...], bool, float]] = []
        for (prefix, ended_blank), score in hyps.items():
            lm_lp = next_lm(prefix) if next_lm is not None else None
            for n in tokens:
                if n == blank:
                    cands.append((prefix, True, score + lp[n]))
                elif not ended_blank and prefix and prefix[-1] == n:
                    cands.append((prefix, False, score + lp[n]))
                else:
                    p = score + lp[n] + (lm_weight * lm_lp[n] if lm_lp is not None else 0.0)
                    cands.append((prefix + (n,), False, p))
        best = max(p for _, _, p in cands)
        merged: dict[tuple[tuple[int, ...], bool], float] = {}
        for prefix, ended_blank, p in cands:
            if p >= best - beam_threshold:
                key = (prefix, ended_blank)
                merged[key] = merge(merged[key], p) if key in merged else p
        hyps = dict(sorted(merged.items(), key=lambda kv: -kv[1])[:beam])
    best = max(hyps.values())
    final: dict[tuple[int, ...], float] = {}
    for (prefix, _), score in hyps.items():
        if score >= best - beam_threshold:
            final[prefix] = merge(final[prefix], score) if prefix in final else score
    prefix = max(final, key=final.__getitem__)
    return list(prefix), final[prefix]
