"""Layer options of older RETURNN versions that the installed RETURNN rejects, with the meaning they
had then (docs/import.md, "Options of older RETURNN versions"): an option at its old default is no
difference, a training-only one is dropped with a note; any other value, and an option of a
setup's own fork of RETURNN (no release had it: its meaning is unknown), is a located refusal.
`strip_old` takes the same options out of a net dict, so that the installed RETURNN builds the
original for a comparison with the import (tools/corpus_match.py)."""

from __future__ import annotations

import ast

from netc.importer.defaults import rejected_by_returnn

# (layer class, option) -> (its default then, what it meant): RETURNN's Theano backend's
# `RecurrentUnitLayer(sampling=1)` (NetworkRecurrentLayer.py: "scan every nth frame only")
OLD_DEFAULTS: dict[tuple[str, str], tuple[object, str]] = {
    ("rec", "sampling"): (1, "the Theano backend's frame subsampling of the rec layer: every n-th frame scanned"),
}
_SEQ_LOSS = "the Theano backend's sequence-training loss"
# (layer class, option) -> what it changes in training: the Theano backend's output layers
# (NetworkOutputLayer.py: `OutputLayer`, `SequenceOutputLayer`); none changes the layer's output
OLD_TRAINING: dict[tuple[str, str], str] = {
    ("softmax", "ce_smoothing"): f"the weight of a cross-entropy term mixed into {_SEQ_LOSS} (`sprint`, `fast_bw`)",
    ("softmax", "ce_target_layer_align"): f"the layer whose alignment that cross-entropy term of {_SEQ_LOSS} uses",
    ("softmax", "loss_like_ce"): f"{_SEQ_LOSS} reported like a cross entropy",
    ("softmax", "sprint_opts"): f"how RASR is run (through Sprint) for {_SEQ_LOSS}",
    ("softmax", "fast_bw_opts"): f"options of {_SEQ_LOSS} `fast_bw`",
    ("softmax", "am_scale"): f"the acoustic-model scale in {_SEQ_LOSS}",
    ("softmax", "gamma"): f"the scale of the alignment's scores in {_SEQ_LOSS}",
    ("softmax", "bw_norm_class_avg"): f"a normalisation of {_SEQ_LOSS} `fast_bw`'s alignment",
    ("softmax", "prior_scale"): f"the scale of the label priors subtracted in {_SEQ_LOSS}",
    ("softmax", "compute_priors"): "label priors accumulated from the layer's output in training (a non-trained "
    "parameter that the sequence loss and RASR's recognition read)",
    ("softmax", "compute_priors_exp_average"): "how those label priors are averaged over the batches",
    ("softmax", "compute_priors_accumulate_batches"): "how many batches those label priors are accumulated over",
    ("softmax", "use_label_priors"): "label priors counted from the targets in the first epochs",
}
# options no release of RETURNN had (rwth-i6/returnn's history): a setup's own fork's
FORK_OPTIONS: dict[tuple[str, str], str] = {
    ("batch_norm", "axes"): "statistics over the axes it names",
    ("batch_norm", "fused"): "a fused batch-norm kernel",
    ("batch_norm", "fused_bn"): "a fused batch-norm kernel",
    ("subnetwork", "load_from"): "`load_on_init` of its `network` (RETURNN's `subnetwork`)",
}

# RETURNN's Theano backend: an output layer's classes are its target's, `classes` by default; the
# installed RETURNN's RASR losses take no target, and a softmax of one without `n_out` is rejected
RASR_LOSSES = ("sprint", "fast_bw", "via_layer")  # netc.importer.losses.RASR_LOSSES's
THEANO_OUTPUT_DIM = (
    "the classes of {{}} (a softmax with a RASR loss and no `n_out`) are those of `{target}`, as in an older "
    "RETURNN (its Theano backend's output layer: the target's classes); the installed one rejects it without `n_out`"
)


def _shown(value: object) -> str:
    return value.__name__ if isinstance(value, type) else type(value).__name__ if callable(value) else repr(value)


def _old_option(cls: str, opt: str) -> bool:
    """`opt` of `cls` is an option of an older RETURNN (or a fork) that the installed one rejects
    (where the installed RETURNN has it, its own meaning holds)."""
    key = (cls, opt)
    return (key in OLD_DEFAULTS or key in OLD_TRAINING or key in FORK_OPTIONS) and rejected_by_returnn(cls, opt)


def _at_old_default(key: tuple[str, str], value: object) -> bool:
    """`value` is the old option's default (a bool is never the number it equals)."""
    return value == OLD_DEFAULTS[key][0] and not isinstance(value, bool)


def take_old(cls: str, d: dict, full: str, notes: dict[str, list[str]]) -> str | None:
    """Pop `d`'s options of older RETURNN versions (those the installed RETURNN rejects) and add
    each one's note (note -> the layers it is about) to `notes`; the reason to refuse the layer
    where one is not at its old default or is a fork's, else None."""
    for opt in sorted(d):
        key = (cls, opt)
        if not _old_option(cls, opt):
            continue
        value = d[opt]
        if key in FORK_OPTIONS:
            return (
                f"option {opt} is not an option of RETURNN's `{cls}` layer in any of its releases (RETURNN "
                f"rejects the layer too; a setup's own fork's, perhaps {FORK_OPTIONS[key]}: its meaning is "
                "not known to netc)"
            )
        if key in OLD_DEFAULTS:
            default, meaning = OLD_DEFAULTS[key]
            if not _at_old_default(key, value):
                return (
                    f"option {opt}: {_shown(value)} of an older RETURNN ({meaning}; the installed RETURNN "
                    f"rejects it) is not supported: only its default {default!r}"
                )
            note = (
                f"`{opt}: {default!r}` taken out of {{}}: an option of an older RETURNN that the installed "
                f"one rejects ({meaning}), at its default then (no difference)"
            )
        else:
            note = (
                f"`{opt}` dropped on {{}}: an option of an older RETURNN that the installed one rejects: "
                f"{OLD_TRAINING[key]} (the forward numbers are the same)"
            )
        notes.setdefault(note, []).append(full)
        del d[opt]
    return None


def strip_old(net: dict, classes: int | None = None) -> list[str]:
    """Take the options `take_old` accepts out of the net dict `net` (in rec units and
    subnetworks too), in place, give a softmax with a RASR loss and no `n_out` the number of the
    default target's `classes`, as an older RETURNN did, and take the RASR losses out (Sprint is not
    here; the import leaves them out too): what was changed, once each."""
    taken: dict[str, None] = {}
    for d in net.values():
        if not isinstance(d, dict):
            continue
        cls = d.get("class")
        if (
            cls == "softmax"
            and classes
            and d.get("loss") in RASR_LOSSES
            and not {"n_out", "out_dim", "target"} & set(d)
        ):
            d["n_out"] = classes
            taken[f"`n_out: {classes}` given (the target's classes, as an older RETURNN's output layer took)"] = None
        if d.get("loss") in RASR_LOSSES:  # run by RASR, which is not here; the import leaves it out too
            taken[f"`loss: {d['loss']!r}` (RASR's, left out of the import too)"] = None
            for opt in ("loss", "loss_opts", "loss_scale"):  # a `target` still gives the classes
                d.pop(opt, None)
        for opt in [o for o in d if (cls, o) not in FORK_OPTIONS and _old_option(cls, o)]:
            if (cls, opt) in OLD_DEFAULTS:
                if not _at_old_default((cls, opt), d[opt]):
                    continue
                taken[f"`{opt}: {d[opt]!r}` (an option of an older RETURNN at its default)"] = None
            else:
                taken[f"`{opt}` (an option of an older RETURNN, training-only)"] = None
            del d[opt]
        for sub in ("unit", "subnetwork"):
            if isinstance(d.get(sub), dict):
                taken.update(dict.fromkeys(strip_old(d[sub], classes)))
    return list(taken)


# RETURNN before 2019-08 (rwth-i6/returnn 326e8970b, "EvalLayer copy_compatible_to, use
# self.output"): an `eval`'s `source(i)` converted its input to the sources' common layout, which
# for sources of the same dims is each one as it is; later RETURNN converts to `out_type`'s layout
OLD_EVAL_NOTE = (
    "`source(i)` of {} read as it is, as RETURNN before 2019-08 did (its sources' common layout); the "
    "installed RETURNN converts it to `out_type`'s layout and rejects the layer"
)


def as_is_sources(code: str) -> str:
    """`code` with each `source(i)` that converts (`auto_convert`, its default) made
    `source(i, auto_convert=False)`."""
    tree = ast.parse(code.strip(), mode="eval")
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "source" and len(n.args) == 1:
            if not any(k.arg == "auto_convert" for k in n.keywords):
                n.keywords.append(ast.keyword("auto_convert", ast.Constant(False)))
    return ast.unparse(tree)


def old_evals(net: dict) -> list[str]:
    """Each `eval` layer of `net` (in rec units and subnetworks too) with one source (or the same
    one repeated) read as RETURNN before 2019-08 read it (`as_is_sources`), in place: its names."""
    done = []
    for name, d in net.items():
        if not isinstance(d, dict):
            continue
        src = d.get("from")
        srcs = [src] if isinstance(src, str) else list(src or [])
        if d.get("class") == "eval" and isinstance(d.get("eval"), str) and len(set(srcs)) == 1:
            new = as_is_sources(d["eval"])
            if new != _normal(d["eval"]):
                d["eval"] = new
                done.append(name)
        for sub in ("unit", "subnetwork"):
            if isinstance(d.get(sub), dict):
                done += [f"{name}/{x}" for x in old_evals(d[sub])]
    return done


def _normal(code: str) -> str:
    return ast.unparse(ast.parse(code.strip(), mode="eval"))
