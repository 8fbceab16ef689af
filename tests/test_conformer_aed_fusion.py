"""Shallow fusion in the Conformer AED's beam search (examples/conformer_aed.py): the LM
(`conformer_aed_lm`) trains with cross entropy, is saved and loads by module path into
`conformer_aed_fused`, whose AED parameters are `conformer_aed`'s; the fused search's scores are
exactly AM log-prob + LM_SCALE * LM log-prob summed over the labels (torch here; eager = torch =
RETURNN by `netc verify --search`); the LM changes the best hypotheses where the AM nearly ties;
RETURNN loads the LM's checkpoint by `netc module-params`' mapping, and its search with the
mapped trained LM finds torch's hypotheses and scores (1e-5)."""

from __future__ import annotations

import ast
import importlib.util

import pytest
import torch
from conftest import EXAMPLES, run_netc, verify_in_process

MODEL = EXAMPLES / "conformer_aed.py"
LM_SCALE = 0.5
SENTENCE = [3, 5, 0]  # the LM's training sentence, EOS last
MAPPING = ("module-params", MODEL, "--network", "conformer_aed_fused", "--module", "lm")
MAPPING += ("--from-network", "conformer_aed_lm")
assert f"\nLM_SCALE = {LM_SCALE}  #" in MODEL.read_text(encoding="utf-8")


def _module(tmp_path, network: str) -> torch.nn.Module:
    out = tmp_path / f"{network}.py"
    run_netc("compile", MODEL, "--network", network, "--target", "torch", "-o", out, check=True)
    spec = importlib.util.spec_from_file_location(network, out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Model().eval()


def _gather(logp: torch.Tensor, labels: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
    """Per sequence: the sum over its valid steps of the log-probability of its label."""
    picked = logp.gather(2, labels[:, :, None])[:, :, 0]
    valid = torch.arange(labels.shape[1])[None, :] < lens[:, None]
    return torch.where(valid, picked, 0.0).sum(1)


def _hyps(labels: torch.Tensor, lens: torch.Tensor) -> list[list[int]]:
    return [labels[b, : int(lens[b])].tolist() for b in range(len(lens))]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The LM trained on SENTENCE, saved and loaded back into the fused network, whose AED
    parameters are those of a `conformer_aed` (its state dict loads into it, only `lm.*` missing).
    The AED is untrained: its label embedding (tied with the logits) scaled down to 0.3 makes its
    label scores near ties, which the LM decides."""
    tmp_path = tmp_path_factory.mktemp("aed_fusion")
    torch.manual_seed(0)
    lm, fused, aed = (_module(tmp_path, n) for n in ("conformer_aed_lm", "conformer_aed_fused", "conformer_aed"))
    y = torch.tensor([SENTENCE] * 2)
    y_lens = torch.tensor([len(SENTENCE)] * 2)
    opt = torch.optim.Adam(lm.parameters(), lr=0.05)
    lm.train()
    losses = []
    for _ in range(60):
        loss = lm(y, y_lens)["ce"] / y_lens.sum()
        losses.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    lm.eval()
    assert losses[-1] < 0.05 * losses[0]  # it learned the sentence
    torch.save(lm.state_dict(), tmp_path / "lm.pt")
    with torch.no_grad():
        aed.input_embedding.W.mul_(0.3)
    torch.save(aed.state_dict(), tmp_path / "aed.pt")
    missing, unexpected = fused.load_state_dict(torch.load(tmp_path / "aed.pt"), strict=False)
    assert unexpected == [] and missing == [k for k in fused.state_dict() if k.startswith("lm.")]
    loaded = fused.load_module_params("lm", torch.load(tmp_path / "lm.pt"))
    assert sorted(loaded) == ["lm.embed.W", "lm.out.W", "lm.out.b", "lm.rec.W", "lm.rec.b"]
    return lm, fused, aed


def test_lm_searches_its_sentence(trained):
    lm, _, _ = trained
    found = lm.search(2)  # from BOS, no input: a batch size
    assert _hyps(found["output"], found["dec_time_lens"]) == [SENTENCE] * 2


def test_fused_scores_are_am_plus_scaled_lm_and_the_lm_decides(trained):
    """Each best hypothesis' score is the sum of its labels' AM log-probabilities (the fused
    network teacher-forced, no LM there) plus LM_SCALE times their LM log-probabilities (the LM
    network teacher-forced). The AED alone finds other hypotheses; fused, the LM's sentence."""
    lm, fused, aed = trained
    torch.manual_seed(3)
    x, x_lens = torch.randn(3, 9, 16), torch.tensor([9, 6, 7])
    with torch.no_grad():
        found = fused.search(x, x_lens)
        labels, lens = found["output"], found["dec_time_lens"]
        am = fused(x, labels, x_lens, lens)["am"]
        lm_logp = lm(labels, lens)["logp"]
        expected = _gather(am, labels, lens) + LM_SCALE * _gather(lm_logp, labels, lens)
        torch.testing.assert_close(found["scores"], expected, atol=1e-5, rtol=0)
        plain = aed.search(x, x_lens)
    fused_hyps, plain_hyps = _hyps(labels, lens), _hyps(plain["labels"], plain["dec_time_lens"])
    assert fused_hyps == [SENTENCE] * 3
    assert all(p != SENTENCE for p in plain_hyps), plain_hyps
    # on each sequence the AM alone prefers another label at some step of the sentence, by less
    # than 1.5 nats (a near tie), which the LM flips
    gap = am.max(-1).values - am.gather(2, labels[:, :, None])[:, :, 0]  # [batch, dec_time]
    valid = torch.arange(labels.shape[1])[None, :] < lens[:, None]
    flipped = (gap > 0) & valid
    assert bool(flipped.any(1).all()), gap
    assert float(gap[flipped].max()) < 1.5, gap


def _body(name: str) -> list[str]:
    text = MODEL.read_text(encoding="utf-8")
    fn = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(text, fn).splitlines()[1:]


def test_fused_network_is_the_aeds_code():
    """`conformer_aed_fused` runs `conformer_aed`'s encoder and decoder line by line (up to the
    label scores, then the fusion): the same numbers from the same parameters."""
    aed = _body("conformer_aed")
    aed = aed[: aed.index("        scores = output_logits(LayerNorm()(d))") + 1]
    aed.remove("    logits, labels = [], []")  # the fused network keeps `am`, the log-probabilities
    fused = iter(_body("conformer_aed_fused"))
    missing = [line for line in aed if line not in fused]  # in order: a subsequence
    assert missing == []


def test_lm_runs_only_in_search(tmp_path):
    text = (tmp_path / "f.py").as_posix()
    run_netc("compile", MODEL, "--network", "conformer_aed_fused", "--target", "torch", "-o", text, check=True)
    forward, search = (tmp_path / "f.py").read_text(encoding="utf-8").split("    def search(")
    assert "self.lm." not in forward.split("    def forward(")[1] and "self.lm.rec.W" in search


@pytest.mark.parametrize("network", ["conformer_aed_lm", "conformer_aed_fused"])
def test_searches_alike(network):
    proc = verify_in_process(MODEL, "--network", network, "--search", "--seed", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "scores           eager vs returnn" in proc.stdout


def test_returnn_preloads_the_lm_by_the_mapping(trained, tmp_path):
    """The trained LM's TF checkpoint (by `conformer_aed_lm`'s names) loads into the fused
    network's RETURNN variables through `netc module-params`' mapping (`preload_from_files`)."""
    import numpy as np
    from preload import preloaded_search_params

    from netc_runtime.checkpoint import write_tf_checkpoint

    lm, _, _ = trained
    lm_params = {r: lm.get_parameter(t).detach().numpy() for r, t in lm.returnn_param_names.items()}
    write_tf_checkpoint(lm_params, str(tmp_path / "lm-model" / "network.001"))
    mapping = ast.literal_eval(run_netc(*MAPPING, check=True).stdout)
    assert sorted(v.split("/rec/", 1)[1] for v in mapping.values()) == sorted(
        ["lm/embed/W", "lm/rec/W", "lm/rec/b", "lm/out/W", "lm/out/b"]
    )
    config = tmp_path / "fused.config"
    run_netc("compile", MODEL, "--network", "conformer_aed_fused", "-o", config, check=True)
    values = preloaded_search_params(config, tmp_path / "lm-model" / "network.001", mapping)
    assert set(mapping) <= set(values)
    for name, source in mapping.items():
        np.testing.assert_array_equal(values[name], lm_params[source])


def test_returnn_search_with_the_trained_lm_scores_alike(trained, tmp_path):
    """RETURNN's search of the fused network (`netc run --backend returnn --search`), its LM's
    variables given the LM network's trained values by `netc module-params`' mapping and the
    AED's by name, finds torch's best hypotheses with torch's scores."""
    import numpy as np

    lm, fused, _ = trained
    mapping = ast.literal_eval(run_netc(*MAPPING, check=True).stdout)
    lm_params = {r: lm.get_parameter(t).detach().numpy() for r, t in lm.returnn_param_names.items()}
    params = {
        f"param:{r}": lm_params[mapping[r]] if r in mapping else fused.get_parameter(t).detach().numpy()
        for r, t in fused.returnn_param_names.items()
    }
    assert sum(r in mapping for r in fused.returnn_param_names) == 5
    np.savez(tmp_path / "params.npz", **params)
    torch.manual_seed(3)
    x, x_lens = torch.randn(3, 9, 16), torch.tensor([9, 6, 7])
    y = np.zeros((3, 3), np.int32)  # not read by the search
    inputs = {"in:x": x.numpy(), "len:time": x_lens.numpy().astype(np.int32), "in:y": y}
    np.savez(tmp_path / "in.npz", **inputs, **{"len:dec_time": np.full(3, 3, np.int32)})
    args = ("--network", "conformer_aed_fused", "--search", "--backend", "returnn")
    out = tmp_path / "out.npz"
    run_netc(
        "run", MODEL, *args, "--inputs", tmp_path / "in.npz", "--params", tmp_path / "params.npz", "-o", out, check=True
    )
    got = np.load(out)
    with torch.no_grad():
        found = fused.search(x, x_lens)
    lens = got["outlen:output:dec_time"]
    assert lens.tolist() == found["dec_time_lens"].tolist()
    assert _hyps(torch.as_tensor(got["out:output"]), torch.as_tensor(lens)) == [SENTENCE] * 3
    np.testing.assert_allclose(got["out:scores"], found["scores"].numpy(), atol=1e-5, rtol=0)
