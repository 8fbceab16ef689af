"""The CTC decoding algorithms, as functions: eager mode calls them, and the torch module gets
their source as helpers (one definition, so eager and torch agree bit for bit; the plain-Python
reference in tests/ checks them). Blank is the last class, as in `ctc_loss`. Both prefix searches
(with a bigram table, with an LM function) run one frame as `ctc_prefix_frame` does, which their
helpers' source includes. The greedy decoding and the bigram search script with TorchScript (no
`from __future__ import annotations` here: TorchScript reads the annotations); the search with an
LM function calls it, so it does not. flashlight's search (`method="flashlight"`) has its own
frame and end functions, and the same two forms. `netc.ops.ctc_decode` imports this module only
where it runs them (eager mode), and reads their source from this file, so compiling does not
import torch."""

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


def ctc_prefix_lm_begin(lm_step, lm_state: tuple, bos: int, lm_weight: float, n_batch: int, beam: int, vocab: int, dev):
    """The LM after `bos` in every slot: per slot, the weighted log probabilities of its next label
    [batch, beam, vocab] and the LM's state (each [batch, beam, ...])."""
    out, *st = lm_step(torch.full((n_batch,), bos, dtype=torch.long, device=dev), *lm_state)
    lm_next = (out.to(torch.float64) * lm_weight)[:, None, :].expand(n_batch, beam, vocab)
    return lm_next, [s[:, None].expand(n_batch, beam, *s.shape[1:]) for s in st]


def ctc_prefix_lm_advance(lm_step, lm_weight: float, lm_next, states: list, k, c, ext, on):
    """The LM of a frame's new slots: each slot takes its source slot `k`'s LM, and the slots that
    extended their prefix (`ext`, in sequences with this frame: `on`) by label `c` run the LM on
    it, all sequences' together in slot order; sequences without the frame keep theirs."""
    n_batch = lm_next.shape[0]
    rows = torch.arange(n_batch, device=lm_next.device)[:, None]
    n_next, n_states = lm_next[rows, k], [s[rows, k] for s in states]
    grown = (ext & on).flatten().nonzero().squeeze(1)  # the new prefixes: the LM reads their label
    if grown.numel() > 0:
        out, *st = lm_step(c.flatten()[grown], *(s.flatten(0, 1)[grown] for s in n_states))
        n_next = n_next.flatten(0, 1).index_copy(0, grown, out.to(torch.float64) * lm_weight).view_as(n_next)
        n_states = [s.flatten(0, 1).index_copy(0, grown, new.to(s.dtype)).view_as(s) for s, new in zip(n_states, st)]
    lm_next = torch.where(on[:, :, None], n_next, lm_next)
    states = [torch.where(on.view(n_batch, 1, *[1] * (s.dim() - 2)), n, s) for s, n in zip(states, n_states)]
    return lm_next, states


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
    lm_next, states = ctc_prefix_lm_begin(lm_step, lm_state, bos, lm_weight, n_batch, beam, vocab, dev)
    for t in range(n_time):
        n_seqs, n_plen, n_last, n_pb, n_pnb, k, c, ext = ctc_prefix_frame(
            logp[:, t], lm_next, seqs, plen, last, pb, pnb
        )
        on = (lens > t)[:, None]  # a sequence's frames only
        lm_next, states = ctc_prefix_lm_advance(lm_step, lm_weight, lm_next, states, k, c, ext, on)
        seqs = torch.where(on[:, :, None], n_seqs, seqs)
        plen, last = torch.where(on, n_plen, plen), torch.where(on, n_last, last)
        pb, pnb = torch.where(on, n_pb, pb), torch.where(on, n_pnb, pnb)
    out_lens = plen[:, 0]
    size = int(out_lens.max()) if n_batch > 0 else 0
    return seqs[:, 0, :size], out_lens, torch.logaddexp(pb[:, 0], pnb[:, 0])


def ctc_flashlight_frame(
    lp: torch.Tensor,
    lm_add: torch.Tensor | None,
    seqs: torch.Tensor,
    plen: torch.Tensor,
    last: torch.Tensor,
    blank_end: torch.Tensor,
    score: torch.Tensor,
    beam_size_token: int,
    beam_threshold: float,
    log_add: bool,
) -> tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor
]:
    """One frame of flashlight's CTC search (its `LexiconFreeDecoder`, the decoder torchaudio's
    `ctc_decoder(lexicon=None)` wraps): each slot is a hypothesis (prefix, ended in a blank or in
    its last label) with one score, `blank_end` telling which (a prefix has at most two slots).
    Each slot is followed by each of the frame's `beam_size_token` best classes (0: all): a blank
    keeps the prefix, ending in a blank; the last label after a label repeats it in place; any
    other label extends the prefix (`lm_add` [batch, beam, vocab], weighted, added). Candidates
    below the frame's best minus `beam_threshold` are dropped, then those of one (prefix, ending)
    merge (log-added, or the maximum without `log_add`), and the `beam` best are kept (ties to
    the earlier: a slot's labels in order, then its blank). Returns the new beam (seqs, plen, last,
    blank_end, score) and, per slot, the slot k it came from, the label c and whether it extended
    k's prefix (ext)."""
    beam, n_time = seqs.shape[1], seqs.shape[2]
    blank = vocab = lp.shape[1] - 1
    dev = lp.device
    neg_inf = torch.tensor(float("-inf"), dtype=torch.float64, device=dev)
    if beam_size_token > 0 and beam_size_token < vocab + 1:  # the frame's best classes only (ties to the lower class)
        top = torch.sort(lp, dim=1, descending=True, stable=True).indices[:, :beam_size_token]
        allowed = torch.zeros(lp.shape, dtype=torch.bool, device=dev).scatter(1, top, True)
        lp = torch.where(allowed, lp, neg_inf)
    pos = torch.arange(n_time, device=dev)
    labels = torch.arange(vocab, device=dev)
    valid = score > neg_inf
    last_c = last.clamp_max(vocab - 1)
    rep = ((~blank_end) & (plen > 0))[:, :, None] & (labels == last[:, :, None])  # [b, k, c]: c repeats in place
    c_blank = score + lp[:, blank, None]
    c_lab = score[:, :, None] + lp[:, None, :vocab]
    if lm_add is not None:
        c_lab = torch.where(rep, c_lab, c_lab + lm_add)
    best = torch.maximum(c_blank.amax(dim=1), c_lab.flatten(1).amax(dim=1))
    floor = best - beam_threshold
    c_blank = torch.where(c_blank >= floor[:, None], c_blank, neg_inf)
    c_lab = torch.where(c_lab >= floor[:, None, None], c_lab, neg_inf)
    # slots of one prefix: j is k's partner (the same prefix, the other ending), at most one
    in_k = pos[None, None, :] < plen[:, :, None]
    eq = (seqs[:, :, None, :] == seqs[:, None, :, :]) | ~in_k[:, :, None, :]  # [b, k, j]: equal in k's labels
    both = valid[:, :, None] & valid[:, None, :]
    same = eq.all(dim=3) & (plen[:, :, None] == plen[:, None, :]) & both
    same = same & ~torch.eye(beam, dtype=torch.bool, device=dev)
    has_p = same.any(dim=2)
    partner = same.to(torch.long).argmax(dim=2)
    # k's prefix plus j's last label is j's prefix, j ending in its label: k's extension by it
    # merges into j's repeat
    into = eq.all(dim=3) & (plen[:, None, :] == plen[:, :, None] + 1) & both  # [b, k, j]
    into = into & ((~blank_end) & (plen > 0))[:, None, :]
    ext_k_lastj = ~rep.gather(2, last_c[:, None, :].expand(-1, beam, -1))  # [b, k, j]
    into = into & ext_k_lastj
    lab_k_lastj = c_lab.gather(2, last_c[:, None, :].expand(-1, beam, -1))  # [b, k, j]: c_lab[k, last j]
    onehot = torch.nn.functional.one_hot(last, vocab + 1)[:, :, :vocab].to(torch.float64)
    taken = (into.to(torch.float64) @ onehot) > 0  # [b, k, c]
    incoming = torch.where(into, lab_k_lastj, neg_inf)
    repeat_val = c_lab.gather(2, last_c[:, :, None])[:, :, 0]  # [b, j]
    if log_add:
        repeat_val = torch.logaddexp(repeat_val, incoming.logsumexp(dim=1))
    else:
        repeat_val = torch.maximum(repeat_val, incoming.amax(dim=1))
    own_rep = rep & (labels == last_c[:, :, None])
    c_lab = torch.where(own_rep, repeat_val[:, :, None], c_lab)
    # the other extensions and the blanks merge with the partner's (kept at the lower slot)
    free = ~rep & ~taken
    p_free = free.gather(1, partner[:, :, None].expand(-1, -1, vocab)) & has_p[:, :, None]
    p_lab = torch.where(p_free, c_lab.gather(1, partner[:, :, None].expand(-1, -1, vocab)), neg_inf)
    p_blank = torch.where(has_p, c_blank.gather(1, partner), neg_inf)
    if log_add:
        m_lab, m_blank = torch.logaddexp(c_lab, p_lab), torch.logaddexp(c_blank, p_blank)
    else:
        m_lab, m_blank = torch.maximum(c_lab, p_lab), torch.maximum(c_blank, p_blank)
    k_idx = torch.arange(beam, device=dev)[None, :]
    second = has_p & (partner < k_idx)
    c_lab = torch.where(free, torch.where(second[:, :, None] & p_free, neg_inf, m_lab), c_lab)
    c_lab = torch.where(taken & ~rep, neg_inf, c_lab)
    c_blank = torch.where(second, neg_inf, m_blank)
    cand = torch.cat([c_lab, c_blank[:, :, None]], dim=2).flatten(1)  # per slot: labels, blank
    idx = torch.sort(cand, dim=1, descending=True, stable=True).indices[:, :beam]
    k = idx // (vocab + 1)
    j = idx % (vocab + 1)
    is_lab = j < vocab
    c = j.clamp_max(vocab - 1)
    ext = is_lab & ~rep.flatten(1).gather(1, k * vocab + c)
    n_seqs = seqs.gather(1, k[:, :, None].expand(-1, -1, n_time))
    n_plen = plen.gather(1, k)
    n_seqs = torch.where(ext[:, :, None] & (pos == n_plen[:, :, None]), c[:, :, None], n_seqs)
    n_last = torch.where(ext, c, last.gather(1, k))
    return n_seqs, n_plen + ext.long(), n_last, ~is_lab, cand.gather(1, idx), k, c, ext


def ctc_flashlight_end(
    seqs: torch.Tensor, plen: torch.Tensor, score: torch.Tensor, beam_threshold: float, log_add: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """flashlight's end of the search: the slots within `beam_threshold` of the best, those of
    one prefix merged; the best prefix (the first of equal ones): (labels, lengths, score)."""
    beam, n_time = seqs.shape[1], seqs.shape[2]
    neg_inf = torch.tensor(float("-inf"), dtype=torch.float64, device=score.device)
    s = torch.where(score >= score.amax(dim=1, keepdim=True) - beam_threshold, score, neg_inf)
    pos = torch.arange(n_time, device=score.device)
    in_k = pos[None, None, :] < plen[:, :, None]
    eq = ((seqs[:, :, None, :] == seqs[:, None, :, :]) | ~in_k[:, :, None, :]).all(dim=3)
    valid = score > neg_inf
    same = eq & (plen[:, :, None] == plen[:, None, :]) & valid[:, :, None] & valid[:, None, :]
    same = same & ~torch.eye(beam, dtype=torch.bool, device=score.device)
    other = torch.where(same, s[:, None, :], neg_inf)
    merged = torch.logaddexp(s, other.logsumexp(dim=2)) if log_add else torch.maximum(s, other.amax(dim=2))
    best = merged.argmax(dim=1)
    out_lens = plen.gather(1, best[:, None])[:, 0]
    size = int(out_lens.max()) if seqs.shape[0] > 0 else 0
    labels = seqs.gather(1, best[:, None, None].expand(-1, 1, n_time))[:, 0, :size]
    return labels, out_lens, merged.gather(1, best[:, None])[:, 0]


def ctc_flashlight_search(
    logits: torch.Tensor,
    lens: torch.Tensor,
    beam: int,
    lm: torch.Tensor | None,
    lm_weight: float,
    beam_size_token: int,
    beam_threshold: float,
    log_add: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """flashlight's CTC search (the frame function above, then its end), with a bigram table `lm`
    as `ctc_prefix_beam_search` takes it. Returns (labels [batch, n] int64 zero-padded, lengths
    [batch], score [batch]: the best prefix's merged score, its LM part included)."""
    logp, seqs, plen, last, score, _ = ctc_prefix_start(logits, beam)
    n_batch, n_time, vocab = logp.shape[0], logp.shape[1], logp.shape[2] - 1
    blank_end = torch.ones_like(plen, dtype=torch.bool)  # the start: as after a blank
    lm_logp = None if lm is None else lm.to(torch.float64).expand(n_batch, vocab + 1, vocab) * lm_weight
    for t in range(n_time):
        lm_add = None if lm_logp is None else lm_logp.gather(1, last[:, :, None].expand(-1, -1, vocab))
        n_seqs, n_plen, n_last, n_blank_end, n_score, _, _, _ = ctc_flashlight_frame(
            logp[:, t], lm_add, seqs, plen, last, blank_end, score, beam_size_token, beam_threshold, log_add
        )
        on = (lens > t)[:, None]  # a sequence's frames only
        seqs = torch.where(on[:, :, None], n_seqs, seqs)
        plen, last = torch.where(on, n_plen, plen), torch.where(on, n_last, last)
        blank_end, score = torch.where(on, n_blank_end, blank_end), torch.where(on, n_score, score)
    return ctc_flashlight_end(seqs, plen, score, beam_threshold, log_add)


def ctc_flashlight_search_lm(
    logits: torch.Tensor,
    lens: torch.Tensor,
    beam: int,
    lm_step,
    lm_state: tuple,
    bos: int,
    lm_weight: float,
    beam_size_token: int,
    beam_threshold: float,
    log_add: bool,
):
    """`ctc_flashlight_search` with an LM of state, as `ctc_prefix_beam_search_lm` runs it: each
    slot carries the LM's state after its prefix and its weighted log probabilities of the next
    label; the LM runs once per frame on the new prefixes of all sequences together."""
    logp, seqs, plen, last, score, _ = ctc_prefix_start(logits, beam)
    n_batch, n_time, vocab, dev = logp.shape[0], logp.shape[1], logp.shape[2] - 1, logp.device
    blank_end = torch.ones_like(plen, dtype=torch.bool)
    lm_next, states = ctc_prefix_lm_begin(lm_step, lm_state, bos, lm_weight, n_batch, beam, vocab, dev)
    for t in range(n_time):
        n_seqs, n_plen, n_last, n_blank_end, n_score, k, c, ext = ctc_flashlight_frame(
            logp[:, t], lm_next, seqs, plen, last, blank_end, score, beam_size_token, beam_threshold, log_add
        )
        on = (lens > t)[:, None]
        lm_next, states = ctc_prefix_lm_advance(lm_step, lm_weight, lm_next, states, k, c, ext, on)
        seqs = torch.where(on[:, :, None], n_seqs, seqs)
        plen, last = torch.where(on, n_plen, plen), torch.where(on, n_last, last)
        blank_end, score = torch.where(on, n_blank_end, blank_end), torch.where(on, n_score, score)
    return ctc_flashlight_end(seqs, plen, score, beam_threshold, log_add)
