"""`transducer_search` against plain-Python references of its four algorithms (greedy with several
symbols per frame, icefall's modified beam search, time-synchronous beam search, torchaudio's
RNNTBeamSearch; docs/language.md
"Transducers"), written out here as plainly as possible on tests/models/transducer_search.py's
prediction and joint networks: eager and torch find the reference's labels with its score (<=1e-4),
on frames of unequal lengths with a sequence of none, on ties, and with beam 1 as greedy."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT

from netc.compiler import compile_graph
from netc_runtime.backends import load_torch_module, run_backend
from netc_runtime.verify import random_inputs, random_lengths, random_params

MODEL = ROOT / "tests" / "models" / "transducer_search.py"
BLANK, BOS, CLASSES = 4, 0, 5


def _model(directory, method: str, beam: int, max_sym: int):
    text = MODEL.read_text(encoding="utf-8")
    for old, new in (
        ('METHOD = "modified"', f"METHOD = {method!r}"),
        ("BEAM = 3", f"BEAM = {beam}"),
        ("MAX_SYM = 2", f"MAX_SYM = {max_sym}"),
    ):
        assert f"\n{old}\n" in text
        text = text.replace(f"\n{old}\n", f"\n{new}\n")
    path = directory / f"transducer_{method}_{beam}_{max_sym}.py"
    path.write_text(text, encoding="utf-8")
    return path


class Net:
    """The model's networks in numpy (float64): `start()` the prediction network's state after
    the start label, `predict(label, state)` after a label, `log_probs(enc_frame, state)` the
    joint's log-probabilities of the classes (`classes`, the blank `blank`)."""

    blank, classes = BLANK, CLASSES

    def __init__(self, p: dict[str, np.ndarray]):
        self.p = {k: v.astype(np.float64) for k, v in p.items()}

    def start(self) -> np.ndarray:
        return self.predict(BOS, np.zeros(5))

    def encode(self, x: np.ndarray) -> np.ndarray:
        return np.tanh(x @ self.p["enc/W"] + self.p["enc/b"])

    def predict(self, label: int, s: np.ndarray) -> np.ndarray:
        p = self.p
        return np.tanh(
            np.concatenate([p["prediction/embed/W"][label], s]) @ p["prediction/step/W"] + p["prediction/step/b"]
        )

    def log_probs(self, e: np.ndarray, s: np.ndarray) -> list[float]:
        p = self.p
        z = (
            np.tanh(e @ p["joint/enc/W"] + p["joint/enc/b"] + s @ p["joint/pred/W"]) @ p["joint/out/W"]
            + p["joint/out/b"]
        )
        z = z - z.max()
        return list(z - np.log(np.exp(z).sum()))


def greedy(net: Net, enc: np.ndarray, max_sym: int) -> tuple[list[int], float]:
    s, labels, score = net.start(), [], 0.0
    for e in enc:
        for _ in range(max_sym):
            lp = net.log_probs(e, s)
            k = max(range(net.classes), key=lambda c: (lp[c], -c))  # the best class, the first of equals
            score += lp[k]
            if k == net.blank:
                break
            labels.append(k)
            s = net.predict(k, s)
    return labels, score


def modified_beam_search(net: Net, enc: np.ndarray, beam: int) -> tuple[list[int], float]:
    hyps = {(): (0.0, net.start())}  # label sequence -> (score, prediction)
    for e in enc:
        pairs = []  # every (hypothesis, class), in order
        for labels, (score, s) in hyps.items():
            lp = net.log_probs(e, s)
            pairs += [(score + lp[k], labels, s, k) for k in range(net.classes)]
        new: dict[tuple, tuple] = {}
        for score, labels, s, k in sorted(pairs, key=lambda pair: -pair[0])[:beam]:  # stable
            key = labels if k == net.blank else (*labels, k)
            if key in new:
                new[key] = (np.logaddexp(new[key][0], score), new[key][1])
            else:
                new[key] = (score, s if k == net.blank else net.predict(k, s))
        hyps = new
    best = max(hyps, key=lambda labels: hyps[labels][0])  # the first of the best
    return list(best), hyps[best][0]


def time_sync_beam_search(net: Net, enc: np.ndarray, beam: int, max_sym: int) -> tuple[list[int], float]:
    hyps = [((), 0.0, net.start())]
    for e in enc:
        ended: dict[tuple, tuple] = {}  # label sequence -> (score, prediction): the frame's results
        level = hyps
        for v in range(max_sym + 1):
            grown = []
            for labels, score, s in level:
                lp = net.log_probs(e, s)
                with_blank = score + lp[net.blank]
                if labels in ended:
                    ended[labels] = (np.logaddexp(ended[labels][0], with_blank), ended[labels][1])
                else:
                    ended[labels] = (with_blank, s)
                best_labels = sorted([k for k in range(net.classes) if k != net.blank], key=lambda k: -lp[k])[:beam]
                grown += [(score + lp[k], labels, s, k) for k in best_labels]
            if v == max_sym:
                break
            level = [
                ((*labels, k), score, net.predict(k, s))
                for score, labels, s, k in sorted(grown, key=lambda g: -g[0])[:beam]
            ]
        hyps = [(labels, score, s) for labels, (score, s) in sorted(ended.items(), key=lambda kv: -kv[1][0])[:beam]]
    labels, score, _ = max(hyps, key=lambda h: h[1])
    return list(labels), score


def graves_beam_search(
    net: Net, enc: np.ndarray, beam: int, max_sym: int, merged: list | None = None
) -> tuple[list[int], float]:
    """torchaudio's RNNTBeamSearch (hypotheses ranked by score): per frame the results B and the
    expanding set A; `merged` collects the label sequences that reached B twice in a frame."""
    hyps = [((), 0.0, net.start())]
    for e in enc:
        ended: dict[tuple, tuple] = {}  # B: label sequence -> (score, prediction), in order of arrival
        level = hyps  # A
        for v in range(max_sym + 1):
            grown = []
            for labels, score, s in level:
                lp = net.log_probs(e, s)
                with_blank = score + lp[net.blank]
                if labels in ended:  # merged, and it arrives again (last)
                    with_blank = np.logaddexp(ended.pop(labels)[0], with_blank)
                    if merged is not None:
                        merged.append(labels)
                ended[labels] = (with_blank, s)
                grown += [(score + lp[k], labels, s, k) for k in range(net.classes) if k != net.blank]
            if v == max_sym:
                break
            scores = sorted((score for score, _ in ended.values()), reverse=True)
            bar = scores[beam - 1] if len(scores) >= beam else -np.inf
            level = [
                ((*labels, k), score, net.predict(k, s))
                for score, labels, s, k in sorted(grown, key=lambda g: -g[0])[:beam]
                if score > bar
            ]
            if not level:
                break
        hyps = [(labels, score, s) for labels, (score, s) in sorted(ended.items(), key=lambda kv: -kv[1][0])[:beam]]
    labels, score, _ = max(hyps, key=lambda h: h[1])
    return list(labels), score


def _reference(method: str, net: Net, enc: np.ndarray, beam: int, max_sym: int):
    if method == "graves":
        return graves_beam_search(net, enc, beam, max_sym)
    if method == "greedy":
        return greedy(net, enc, max_sym)
    if method == "modified":
        return modified_beam_search(net, enc, beam)
    return time_sync_beam_search(net, enc, beam, max_sym)


def _run(path, seed: int, tweak=None):
    g = compile_graph(str(path))
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, 4, 7, rng)
    lens["time"][1] = 0  # a sequence without frames: no labels, score 0
    inputs = random_inputs(g, lens, rng)
    # standard normal weights (glorot's keep one class ahead everywhere), the blank's bias 1 up:
    # frames of 0 to 3 labels, of different labels
    params = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in random_params(g, rng).items()}
    params["joint/out/b"][BLANK] += 1.0
    if tweak:
        tweak(params)
    res = {b: run_backend(b, str(path), inputs, lens, params, g) for b in ("eager", "torch")}
    return inputs["x"], lens["time"], Net(params), res


def _check(method, beam, max_sym, x, frames, net, res):
    found = []
    for b, n in enumerate(frames):
        want, score = _reference(method, net, net.encode(x[b, :n]), beam, max_sym)
        found.append(want)
        for backend, r in res.items():
            got = r.outputs["labels"][b, : r.lens["labels"]["dec_time"][b]].tolist()
            assert got == want, (backend, b)
            assert abs(r.outputs["scores"][b] - score) <= 1e-4, (backend, b)
    return found


@pytest.mark.parametrize(
    ("method", "beam", "max_sym"),
    [
        ("greedy", 1, 1),
        ("greedy", 1, 3),
        ("modified", 3, 1),
        ("modified", 8, 1),
        ("time_sync", 3, 2),
        ("time_sync", 2, 3),
        ("graves", 3, 2),
        ("graves", 2, 3),
        ("graves", 4, 1),
    ],
)
def test_search_is_the_reference(tmp_path, method, beam, max_sym):
    x, frames, net, res = _run(_model(tmp_path, method, beam, max_sym), seed=7)
    found = _check(method, beam, max_sym, x, frames, net, res)
    assert found[1] == [] and any(found)
    if method == "greedy" and max_sym == 3:  # frames of several labels and of fewer than 3
        assert any(n < len(f) < 3 * n for f, n in zip(found, frames))


def test_ties_go_to_the_first_hypothesis_and_class(tmp_path):
    """Labels 1 and 2 are one (the same joint scores, the same embedding): every choice between
    them, and between hypotheses that differ only in them, is a tie, which goes to label 1 (the
    lower class, the hypothesis first in order) as in the reference."""

    def twins(params):
        params["joint/out/W"][:, 2] = params["joint/out/W"][:, 1]
        params["joint/out/b"][1] += 2.0  # and likely
        params["joint/out/b"][2] = params["joint/out/b"][1]
        params["prediction/embed/W"][2] = params["prediction/embed/W"][1]

    for method, beam, max_sym in (("greedy", 1, 2), ("modified", 3, 1), ("time_sync", 3, 2), ("graves", 3, 2)):
        x, frames, net, res = _run(_model(tmp_path, method, beam, max_sym), seed=7, tweak=twins)
        found = _check(method, beam, max_sym, x, frames, net, res)
        labels = {k for f in found for k in f}
        assert 1 in labels and 2 not in labels, (method, found)


def test_modified_beam_1_is_greedy_with_one_symbol_per_frame(tmp_path):
    _, _, _, greedy_res = _run(_model(tmp_path, "greedy", 1, 1), seed=7)
    _, _, _, beam_res = _run(_model(tmp_path, "modified", 1, 1), seed=7)
    for backend in ("eager", "torch"):
        a, b = greedy_res[backend], beam_res[backend]
        assert a.outputs["labels"].tolist() == b.outputs["labels"].tolist()
        assert np.abs(a.outputs["scores"] - b.outputs["scores"]).max() <= 1e-6


def test_a_wider_beam_scores_at_least_as_well(tmp_path):
    """Modified beam search's best merges paths; with a wider beam its score is no lower here."""
    _, _, _, narrow = _run(_model(tmp_path, "modified", 1, 1), seed=7)
    _, _, _, wide = _run(_model(tmp_path, "modified", 6, 1), seed=7)
    assert (wide["torch"].outputs["scores"] >= narrow["torch"].outputs["scores"] - 1e-5).all()
    assert (wide["torch"].outputs["scores"] > narrow["torch"].outputs["scores"] + 1e-3).any()


EXAMPLE = ROOT / "examples" / "conformer_transducer.py"


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class ExampleNet:
    """examples/conformer_transducer.py's prediction network (an LSTM step written out, from BOS)
    and joint network in numpy; the state is the LSTM's (h, c), h the prediction's output."""

    blank, classes = 10, 11

    def __init__(self, p: dict[str, np.ndarray]):
        self.p = {k: v.astype(np.float64) for k, v in p.items()}

    def start(self) -> tuple[np.ndarray, np.ndarray]:
        return self.predict(0, (np.zeros(16), np.zeros(16)))

    def predict(self, label: int, state: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        p, (h, c) = self.p, state
        z = (
            p["prediction/embedding/W"][label] @ p["prediction/lstm/ff_linear/W"]
            + p["prediction/lstm/ff_linear/b"]
            + h @ p["prediction/lstm/rec_linear/W"]
        )
        x_in, g_in, g_forget, g_out = np.split(z, 4)
        c = c * _sigmoid(g_forget) + np.tanh(x_in) * _sigmoid(g_in)
        return np.tanh(c) * _sigmoid(g_out), c

    def log_probs(self, e: np.ndarray, state: tuple[np.ndarray, np.ndarray]) -> list[float]:
        p = self.p
        z = np.tanh(e @ p["joint/enc_proj/W"] + p["joint/enc_proj/b"] + state[0] @ p["joint/pred_proj/W"])
        z = z @ p["joint/out/W"] + p["joint/out/b"]
        z = z - z.max()
        return list(z - np.log(np.exp(z).sum()))


def test_conformer_transducer_searches_with_its_training_networks_parameters():
    """examples/conformer_transducer.py's `transducer_search` decoders take the training network's
    parameters (the same modules: paths, roles, shapes) and find, on eager and torch, what the
    references find from the training network's encoder with a beam of 4: modified beam search,
    and time-synchronous and torchaudio's beam search with up to 3 labels per frame."""
    train = compile_graph(str(EXAMPLE), network="conformer_transducer")
    rng = np.random.default_rng(19)
    params = random_params(train, rng)  # a checkpoint of the training network
    params["logits/rec/joint/pred_proj/W"] *= 8.0  # the prediction network weighs
    lens = random_lengths(train, 3, 9, rng)
    inputs = random_inputs(train, lens, rng)
    enc = run_backend("eager", str(EXAMPLE), inputs, lens, params, train).outputs["encoder"]
    frames = [(n + 1) // 2 for n in lens["time"]]  # the encoder's
    net = ExampleNet({k.removeprefix("logits/rec/"): v for k, v in params.items()})
    own = {(p.path, p.role, p.dims) for p in train.params}
    train_state = {k: v.shape for k, v in load_torch_module(train).Model().state_dict().items()}
    for network, method, max_sym in (
        ("conformer_transducer_modified", "modified", 1),
        ("conformer_transducer_time_sync", "time_sync", 3),
        ("conformer_transducer_graves", "graves", 3),
    ):
        g = compile_graph(str(EXAMPLE), network=network)
        assert {(p.path, p.role, p.dims) for p in g.params} == own
        decoder_state = load_torch_module(g).Model().state_dict()
        assert {k: v.shape for k, v in decoder_state.items()} == train_state  # training's state_dict loads
        dec_params = {
            p.name: params[next(q.name for q in train.params if (q.path, q.role) == (p.path, p.role))] for p in g.params
        }
        want = [_reference(method, net, enc[b, :n], 4, max_sym) for b, n in enumerate(frames)]
        assert any(labels for labels, _ in want)
        for backend in ("eager", "torch"):
            r = run_backend(backend, str(EXAMPLE), {"x": inputs["x"]}, {"time": lens["time"]}, dec_params, g)
            for b, (labels, score) in enumerate(want):
                assert r.outputs["output"][b, : r.lens["output"]["dec_time"][b]].tolist() == labels, (network, backend)
                assert abs(r.outputs["scores"][b] - score) <= 1e-4, (network, backend)


def test_helper_functions_that_construct_their_modules_search_alike():
    """Regression (tests/diffgen): eager mode gave modules constructed in a helper function the
    search calls fresh parameters (their call path ran through the search's own code)."""
    path = ROOT / "tests" / "models" / "transducer_search_functions.py"
    g = compile_graph(str(path))
    rng = np.random.default_rng(3)
    lens = random_lengths(g, 4, 7, rng)
    inputs = random_inputs(g, lens, rng)
    params = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in random_params(g, rng).items()}
    eager, torch_res = (run_backend(b, str(path), inputs, lens, params, g) for b in ("eager", "torch"))
    assert list(eager.lens["labels"]["dec_time"]) == list(torch_res.lens["labels"]["dec_time"])
    assert any(eager.lens["labels"]["dec_time"])
    for b, n in enumerate(eager.lens["labels"]["dec_time"]):
        assert eager.outputs["labels"][b, :n].tolist() == torch_res.outputs["labels"][b, :n].tolist()
    assert np.abs(eager.outputs["scores"] - torch_res.outputs["scores"]).max() <= 1e-4


def test_graves_merges_hypotheses_as_the_reference(tmp_path):
    """The merge case: a label sequence reaches a frame's results twice (from a hypothesis that
    ended the last frame and from a shorter one's expansion), its scores log-added; netc finds
    the reference's labels and scores where that happens, with more symbols per frame than
    the test above."""
    x, frames, net, res = _run(_model(tmp_path, "graves", 4, 4), seed=11)
    _check("graves", 4, 4, x, frames, net, res)
    merged: list = []
    for b, n in enumerate(frames):
        graves_beam_search(net, net.encode(x[b, :n]), 4, 4, merged)
    assert merged
