"""A language model alone and fused into a decoder's beam search (examples/lm_fusion.py): the LM
trains with cross entropy, is saved, and loads by module path into the fused network, whose search
scores are exactly AM log-prob + LM_SCALE * LM log-prob summed over the labels; fusing changes
the best hypothesis; RETURNN's names of the module map between the two networks' checkpoints."""

from __future__ import annotations

import ast
import importlib.util
import re

import pytest
import torch
from conftest import EXAMPLES, ROOT, run_netc, verify_in_process

MODEL = EXAMPLES / "lm_fusion.py"
LM_SCALE = 0.5
# the LM's parameters in the fused network (`lm`) from those of the LM alone (`model_lm`)
FUSED, ALONE = ("--network", "fused", "--module", "lm"), ("--from-network", "lm", "--from-module", "model_lm")
MAPPING = ("module-params", MODEL, *FUSED, *ALONE)
assert f"\nLM_SCALE = {LM_SCALE}\n" in MODEL.read_text(encoding="utf-8")


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


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The LM trained on one sentence (3 3 5 EOS), saved and loaded back; the fused and plain
    AED with the same AED parameters, the fused one with the LM's loaded by module path."""
    tmp_path = tmp_path_factory.mktemp("fusion")
    torch.manual_seed(0)
    lm, fused, aed = (_module(tmp_path, n) for n in ("lm", "fused", "aed"))
    y = torch.tensor([[3, 3, 5, 0]] * 2)
    y_lens = torch.tensor([4, 4])
    opt = torch.optim.Adam(lm.parameters(), lr=0.05)
    first = None
    lm.train()
    for _ in range(60):
        loss = lm(y, y_lens)["ce"] / 8
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    lm.eval()
    assert float(loss.detach()) < 0.2 * first  # it learned the sentence
    torch.save(lm.state_dict(), tmp_path / "lm.pt")
    saved = torch.load(tmp_path / "lm.pt")
    loaded = fused.load_module_params("lm", saved, source="model_lm")
    assert sorted(loaded) == ["lm.embed.W", "lm.out.W", "lm.out.b", "lm.rec.W", "lm.rec.b"]
    aed_params = {k: v for k, v in fused.state_dict().items() if not k.startswith("lm.")}
    aed.load_state_dict(aed_params)  # the same AED (same module paths), no LM
    return lm, fused, aed


def test_lm_trained_searches_its_sentence(trained):
    lm, _, _ = trained
    found = lm.search(2)  # from BOS, no input: a batch size
    assert found["output"][0, : int(found["dec_time_lens"][0])].tolist() == [3, 3, 5, 0]
    assert float(found["scores"][0].detach()) > -0.5  # log-probability per label, near 0


def test_load_module_params_checks(trained, tmp_path):
    _, fused, _ = trained
    with pytest.raises(KeyError, match="no parameters under module path"):
        fused.load_module_params("nothing", {})
    with pytest.raises(KeyError, match="not in the state dict"):
        fused.load_module_params("lm", {"lm.embed.W": torch.zeros(7, 5)})
    wrong = {f"lm.{k}": v for k, v in dict(fused.lm.named_parameters()).items()}
    wrong["lm.embed.W"] = torch.zeros(7, 4)
    with pytest.raises(ValueError, match="lm.embed.W is \\(7, 4\\)"):
        fused.load_module_params("lm", wrong)


def test_fused_scores_are_am_plus_scaled_lm(trained):
    """The score of each best hypothesis is the sum of its labels' AM log-probabilities plus
    LM_SCALE times their LM log-probabilities, each from its own network teacher-forced on it."""
    lm, fused, aed = trained
    torch.manual_seed(3)
    x, x_lens = torch.randn(3, 6, 6), torch.tensor([6, 4, 5])
    with torch.no_grad():
        found = fused.search(x, x_lens)
        labels, lens = found["output"], found["dec_time_lens"]
        am = fused(x, labels, x_lens, lens)["am"]
        lm_logp = lm(labels, lens)["logp"]
        expected = _gather(am, labels, lens) + LM_SCALE * _gather(lm_logp, labels, lens)
        torch.testing.assert_close(found["scores"], expected, atol=1e-5, rtol=0)
        plain = aed.search(x, x_lens)  # the AED alone: its own log-probabilities only
        am_plain = aed(x, plain["output"], x_lens, plain["dec_time_lens"])["am"]
        torch.testing.assert_close(
            plain["scores"], _gather(am_plain, plain["output"], plain["dec_time_lens"]), atol=1e-5, rtol=0
        )
    # the LM, which knows 3 3 5, changes the best hypothesis
    hyps = [labels[b, : int(lens[b])].tolist() for b in range(3)]
    plain_hyps = [plain["output"][b, : int(plain["dec_time_lens"][b])].tolist() for b in range(3)]
    assert hyps != plain_hyps
    with torch.no_grad():  # for the LM, the fused search's hypotheses are the likelier ones
        lm_plain = lm(plain["output"], plain["dec_time_lens"])["logp"]
        lm_fused = _gather(lm_logp, labels, lens)
        lm_plain = _gather(lm_plain, plain["output"], plain["dec_time_lens"])
    assert float(lm_fused.sum()) > float(lm_plain.sum())


def test_lm_runs_only_in_search(tmp_path):
    """Training's network (torch forward, RETURNN's train network) has no LM; the search has."""
    torch_file = tmp_path / "fused.py"
    run_netc("compile", MODEL, "--network", "fused", "--target", "torch", "-o", torch_file, check=True)
    text = torch_file.read_text(encoding="utf-8")
    forward, search = text.split("    def search(")
    forward = forward.split("    def forward(")[1]
    assert "self.lm." not in forward and "self.lm.rec.W" in search
    config = tmp_path / "fused.config"
    run_netc("compile", MODEL, "--network", "fused", "-o", config, check=True)
    tree = ast.parse(config.read_text(encoding="utf-8"))
    nets = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert "lm/" not in ast.unparse(nets["network"]) and "lm/rec" in ast.unparse(nets["search_network"])


def test_returnn_names_of_the_module_map(tmp_path):
    proc = run_netc(*MAPPING)
    assert proc.returncode == 0, proc.stderr
    mapping = ast.literal_eval(proc.stdout)
    roles = ["embed/W", "rec/W", "rec/b", "out/W", "out/b"]
    explain = run_netc("explain", MODEL, "--network", "fused", check=True).stdout
    loop = re.search(r"param (\w+)/rec/lm/embed/W", explain).group(1)
    explain_lm = run_netc("explain", MODEL, "--network", "lm", check=True).stdout
    lm_loop = re.search(r"param (\w+)/rec/model_lm/embed/W", explain_lm).group(1)
    assert loop != lm_loop  # why a mapping is needed
    assert mapping == {f"{loop}/rec/lm/{r}": f"{lm_loop}/rec/model_lm/{r}" for r in roles}
    proc = run_netc("module-params", MODEL, "--network", "fused", "--module", "lm", "--from-network", "lm")
    assert proc.returncode == 1 and proc.stderr.startswith("error: lm.embed.W (for ")


@pytest.mark.parametrize("network", ["lm", "fused"])
def test_searches_alike(network):
    proc = verify_in_process(MODEL, "--network", network, "--search", "--seed", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "scores           eager vs returnn" in proc.stdout


def test_sampling_draws_alike_in_eager_mode_and_torch(tmp_path):
    """`choice(..., sample=True)` (tests/models/lm_sample.py): eager mode, which runs one sequence
    at a time, and the torch module draw the same labels with the same scores; the draws differ
    across sequences and hypotheses, depend on the seed, and each sequence's result is its
    likeliest sample (its score the mean log-probability of its labels)."""
    src = ROOT / "tests" / "models" / "lm_sample.py"
    out = tmp_path / "lm_sample_torch.py"
    run_netc("compile", src, "--target", "torch", "-o", out, check=True)
    spec = importlib.util.spec_from_file_location("lm_sample_torch", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(1)
    model = mod.Model().eval()
    spec = importlib.util.spec_from_file_location("lm_sample", src)
    user = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(user)
    net = user.lm_sample
    net.load_returnn_params({r: model.get_parameter(t).detach() for r, t in model.returnn_param_names.items()})
    with torch.no_grad():
        found = model.search(6)
        eager = net(search=True, batch_size=6)
    lens = found["dec_time_lens"]
    assert lens.tolist() == eager["dec_time_lens"].tolist()
    for b in range(6):
        assert found["output"][b, : lens[b]].tolist() == eager["output"][b, : lens[b]].tolist()
    torch.testing.assert_close(found["scores"], eager["scores"], atol=1e-5, rtol=0)
    hyps = {tuple(found["output"][b, : lens[b]].tolist()) for b in range(6)}
    assert len(hyps) > 1 and len(set(lens.tolist())) > 1  # different draws per sequence
    # the score: the mean log-probability of its labels (length normalisation), teacher-forced
    with torch.no_grad():
        logp = torch.log_softmax(model(found["output"], lens)["logits"], -1)
    torch.testing.assert_close(found["scores"], _gather(logp, found["output"], lens) / lens, atol=1e-5, rtol=0)
    # another seed, other draws
    other = tmp_path / "lm_sample_seed.py"
    other.write_text(src.read_text(encoding="utf-8").replace("seed=7", "seed=8"), encoding="utf-8")
    out2 = tmp_path / "lm_sample_seed_torch.py"
    run_netc("compile", other, "--target", "torch", "-o", out2, check=True)
    spec = importlib.util.spec_from_file_location("lm_sample_seed_torch", out2)
    mod2 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod2)
    model2 = mod2.Model().eval()
    model2.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert model2.search(6)["output"].tolist() != found["output"].tolist()


def test_sampling_refused_on_returnn(tmp_path):
    proc = run_netc("compile", ROOT / "tests" / "models" / "lm_sample.py", "-o", tmp_path / "c.config")
    assert proc.returncode == 1
    assert "error: RETURNN target: `choice(..., sample=True)` is not expressible" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_returnn_preloads_the_module_by_the_mapping(trained, tmp_path):
    """The trained LM's TF checkpoint (by the LM network's names) loads into the fused network's
    RETURNN variables through `netc module-params`' mapping, as `preload_from_files` does it."""
    import numpy as np
    from preload import preloaded_search_params

    from netc_runtime.checkpoint import write_tf_checkpoint

    lm, _, _ = trained
    lm_params = {r: lm.get_parameter(t).detach().numpy() for r, t in lm.returnn_param_names.items()}
    write_tf_checkpoint(lm_params, str(tmp_path / "lm-model" / "network.001"))
    proc = run_netc(*MAPPING)
    mapping = ast.literal_eval(proc.stdout)
    config = tmp_path / "fused.config"
    run_netc("compile", MODEL, "--network", "fused", "-o", config, check=True)
    values = preloaded_search_params(config, tmp_path / "lm-model" / "network.001", mapping)
    assert set(mapping) <= set(values)
    for name, source in mapping.items():
        np.testing.assert_array_equal(values[name], lm_params[source])
