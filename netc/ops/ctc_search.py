"""The CTC decoding algorithms, as functions: eager mode calls them, and the torch module gets
their source as helpers (one definition, so eager and torch agree bit for bit; the plain-Python
reference in tests/ checks them). Blank is the last class, as in `ctc_loss`. Both prefix searches
(with a bigram table, with an LM function) run one frame as `ctc_prefix_frame` does, which their
helpers' source includes. The greedy decoding and the bigram search script with TorchScript (no
`from __future__ import annotations` here: TorchScript reads the annotations); the search with an
LM function calls it, so it does not. `netc.ops.ctc_decode` imports this module only where it
runs them (eager mode), and reads their source from this file, so compiling does not import
torch."""

import torch


def ctc_greedy_decode(logits: torch.Tensor, lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Best path: the argmax class per frame, repeats collapsed, blanks dropped. logits [batch,
    time, classes], lens [batch] -> (labels [batch, n] int64, zero-padded; their lengths [batch])."""
    best = logits.argmax(dim=-1)
    blank = logits.shape[-1] - 1
    valid = torch.arange(best.shape[1], device=best.device)[None, :] < lens[:, None]
    prev = torch.cat([torch.full_like(best[:, :1], blank), best[:, :-1]], dim=1)
    keep = valid & (best != blank) & (best != prev)
    out_lens = keep.sum(dim=1)
    # kept frames first, in order (a stable sort of "not kept"), then the first max(lengths)
    order = torch.sort((~keep).to(torch.uint8), dim=1, stable=True).indices
    size = int(out_lens.max()) if out_lens.numel() > 0 else 0
    labels = best.gather(1, order)[:, :size]
    pos = torch.arange(size, device=best.device)[None, :]
    return torch.where(pos < out_lens[:, None], labels, 0), out_lens


def ctc_prefix_frame(
    lp: torch.Tensor,
    lm_add: torch.Tensor | None,
    seqs: torch.Tensor,
    plen: torch.Tensor,
    last: torch.Tensor,
    pb: torch.Tensor,
    pnb: torch.Tensor,
) -> tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor
]:
    """One frame of the prefix beam search: log probabilities lp [batch, classes] (float64), the
    LM's part of each extension lm_add [batch, beam, vocab] (weighted) or None, and the beam: each
    slot's labels seqs [batch, beam, time], their number plen, its last label `last` (`vocab`
    before the first), its log probabilities of ending in a blank pb and in its last label pnb.

    Candidates, in this order: the beam's prefixes unchanged (a blank, or a repeat of their last
    label), in beam order; then each prefix extended by each label (prefix-major); a label equal
    to the last one extends a prefix only after a blank. An extension equal to a prefix of the beam
    is merged into it. The `beam` best candidates by total probability are kept, ties to the
    earlier (a stable sort). Returns the new beam (seqs, plen, last, pb, pnb) and, per slot, the
    slot k it came from, the label c it was extended by, and whether it was (ext)."""
    beam, n_time = seqs.shape[1], seqs.shape[2]
    blank = vocab = lp.shape[1] - 1
    dev = lp.device
    neg_inf = torch.tensor(float("-inf"), dtype=torch.float64, device=dev)
    pos = torch.arange(n_time, device=dev)
    labels = torch.arange(vocab, device=dev)
    total = torch.logaddexp(pb, pnb)
    u_pb = total + lp[:, blank, None]
    u_pnb = torch.where(plen > 0, pnb + lp.gather(1, last.clamp_max(vocab - 1)), neg_inf)
    # extensions [batch, beam, vocab]: after a blank only, when c repeats the last label
    e_pnb = torch.where(labels == last[:, :, None], pb[:, :, None], total[:, :, None]) + lp[:, None, :vocab]
    if lm_add is not None:
        e_pnb = e_pnb + lm_add
    # slot j is slot k extended by j's last label: merge that extension into j
    valid = total > neg_inf
    prefix_of = ((seqs[:, :, None, :] == seqs[:, None, :, :]) | (pos >= plen[:, None, :, None])).all(dim=3)
    match = prefix_of & (plen[:, :, None] == plen[:, None, :] + 1) & valid[:, :, None] & valid[:, None, :]
    into = e_pnb.gather(2, last.clamp_max(vocab - 1)[:, None, :].expand(-1, beam, -1)).transpose(1, 2)  # [b, j, k]
    u_pnb = torch.logaddexp(u_pnb, torch.where(match, into, neg_inf).logsumexp(dim=2))
    onehot = torch.nn.functional.one_hot(last, vocab + 1)[:, :, :vocab].to(torch.float64)
    taken = (match.transpose(1, 2).to(torch.float64) @ onehot) > 0  # [batch, k, c]
    e_pnb = torch.where(taken, neg_inf, e_pnb)
    cand = torch.cat([torch.logaddexp(u_pb, u_pnb), e_pnb.flatten(1)], dim=1)
    idx = torch.sort(cand, dim=1, descending=True, stable=True).indices[:, :beam]
    ext = idx >= beam
    k = torch.where(ext, (idx - beam) // vocab, idx)
    c = (idx - beam) % vocab
    n_seqs = seqs.gather(1, k[:, :, None].expand(-1, -1, n_time))
    n_plen = plen.gather(1, k)
    n_seqs = torch.where(ext[:, :, None] & (pos == n_plen[:, :, None]), c[:, :, None], n_seqs)
    n_pb = torch.where(ext, neg_inf, u_pb.gather(1, k))
    n_pnb = torch.where(ext, e_pnb.flatten(1).gather(1, (idx - beam).clamp_min(0)), u_pnb.gather(1, k))
    n_last = torch.where(ext, c, last.gather(1, k))
    return n_seqs, n_plen + ext.long(), n_last, n_pb, n_pnb, k, c, ext


def ctc_prefix_start(
    logits: torch.Tensor, beam: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Both prefix searches' start: the log probabilities (float64) and `beam` slots per sequence,
    the first the empty prefix: (logp, labels, lengths, last label, log pb, log pnb)."""
    logp = torch.log_softmax(logits.to(torch.float64), dim=-1)
    n_batch, n_time, n_classes = logp.shape[0], logp.shape[1], logp.shape[2]
    vocab, dev = n_classes - 1, logp.device
    seqs = torch.zeros(n_batch, beam, n_time, dtype=torch.long, device=dev)
    plen = torch.zeros(n_batch, beam, dtype=torch.long, device=dev)
    last = torch.full((n_batch, beam), vocab, dtype=torch.long, device=dev)  # `vocab`: no label yet
    pb = torch.full((n_batch, beam), float("-inf"), dtype=torch.float64, device=dev)
    pb[:, 0] = 0.0  # the empty prefix
    pnb = torch.full_like(pb, float("-inf"))
    return logp, seqs, plen, last, pb, pnb


def ctc_prefix_beam_search(
    logits: torch.Tensor, lens: torch.Tensor, beam: int, lm: torch.Tensor | None, lm_weight: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CTC prefix beam search: the label sequence (prefix) of highest probability summed over its
    alignments, keeping `beam` prefixes per frame (the frame function above), each with its probability
    of ending in a blank (pb) or in its last label (pnb), in log space (float64). A prefix extended
    by label c gets `lm_weight * lm[b, previous label (or the last row at the start), c]` added
    once. Returns (labels [batch, n] int64 zero-padded, lengths [batch], score [batch]: log p of
    the best prefix, plus its LM part)."""
    logp, seqs, plen, last, pb, pnb = ctc_prefix_start(logits, beam)
    n_batch, n_time, vocab = logp.shape[0], logp.shape[1], logp.shape[2] - 1
    lm_logp = None if lm is None else lm.to(torch.float64).expand(n_batch, vocab + 1, vocab) * lm_weight
    for t in range(n_time):
        lm_add = None if lm_logp is None else lm_logp.gather(1, last[:, :, None].expand(-1, -1, vocab))
        n_seqs, n_plen, n_last, n_pb, n_pnb, _, _, _ = ctc_prefix_frame(logp[:, t], lm_add, seqs, plen, last, pb, pnb)
        on = (lens > t)[:, None]  # a sequence's frames only
        seqs = torch.where(on[:, :, None], n_seqs, seqs)
        plen, last = torch.where(on, n_plen, plen), torch.where(on, n_last, last)
        pb, pnb = torch.where(on, n_pb, pb), torch.where(on, n_pnb, pnb)
    out_lens = plen[:, 0]
    size = int(out_lens.max()) if n_batch > 0 else 0
    return seqs[:, 0, :size], out_lens, torch.logaddexp(pb[:, 0], pnb[:, 0])


def ctc_prefix_beam_search_lm(
    logits: torch.Tensor, lens: torch.Tensor, beam: int, lm_step, lm_state: tuple, bos: int, lm_weight: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`ctc_prefix_beam_search` with an LM of state: `lm_step(labels [n], *state) -> (log_probs
    [n, vocab], *state)`, each state tensor [n, ...], `lm_state` its state before `bos` [batch, ...].
    Each prefix carries the LM's state after its labels (fed from `bos` on) and its log
    probabilities of the next label; a prefix extended by label c gets `lm_weight` times that log
    probability of c added once. The LM runs once per frame on the new prefixes (extensions) of
    all sequences together, in slot order. Python only (it calls `lm_step`): not scripted."""
    logp, seqs, plen, last, pb, pnb = ctc_prefix_start(logits, beam)
    n_batch, n_time, vocab, dev = logp.shape[0], logp.shape[1], logp.shape[2] - 1, logp.device
    out, *st = lm_step(torch.full((n_batch,), bos, dtype=torch.long, device=dev), *lm_state)
    # per slot: the weighted LM log probabilities of its next label, and the LM's state
    lm_next = (out.to(torch.float64) * lm_weight)[:, None, :].expand(n_batch, beam, vocab)
    states = [s[:, None].expand(n_batch, beam, *s.shape[1:]) for s in st]
    rows = torch.arange(n_batch, device=dev)[:, None]
    for t in range(n_time):
        n_seqs, n_plen, n_last, n_pb, n_pnb, k, c, ext = ctc_prefix_frame(
            logp[:, t], lm_next, seqs, plen, last, pb, pnb
        )
        on = (lens > t)[:, None]  # a sequence's frames only
        n_next, n_states = lm_next[rows, k], [s[rows, k] for s in states]
        grown = (ext & on).flatten().nonzero().squeeze(1)  # the new prefixes: the LM reads their label
        if grown.numel() > 0:
            out, *st = lm_step(c.flatten()[grown], *(s.flatten(0, 1)[grown] for s in n_states))
            n_next = n_next.flatten(0, 1).index_copy(0, grown, out.to(torch.float64) * lm_weight).view_as(n_next)
            n_states = [
                s.flatten(0, 1).index_copy(0, grown, new.to(s.dtype)).view_as(s) for s, new in zip(n_states, st)
            ]
        lm_next = torch.where(on[:, :, None], n_next, lm_next)
        states = [torch.where(on.view(n_batch, 1, *[1] * (s.dim() - 2)), n, s) for s, n in zip(states, n_states)]
        seqs = torch.where(on[:, :, None], n_seqs, seqs)
        plen, last = torch.where(on, n_plen, plen), torch.where(on, n_last, last)
        pb, pnb = torch.where(on, n_pb, pb), torch.where(on, n_pnb, pnb)
    out_lens = plen[:, 0]
    size = int(out_lens.max()) if n_batch > 0 else 0
    return seqs[:, 0, :size], out_lens, torch.logaddexp(pb[:, 0], pnb[:, 0])
