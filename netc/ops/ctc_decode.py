"""CTC decoding: `ctc_greedy(logits, axis=vocab + blank, out_axis=label_time)` (best path) and
`ctc_prefix_search(logits, axis=vocab + blank, beam=K, out_axis=label_time, lm=None,
lm_weight=0.0)` (prefix beam search, optionally with a bigram LM table, or with an LM function:
`lm=step, lm_state=..., bos=...`, which the parser traces into the op's region, netc/parser/ctc.py;
`method="flashlight"` with `beam_size_token`, `beam_threshold`, `log_add`: flashlight-text's search),
on logits [batch, time, vocab + blank] as `ctc_loss` takes them (blank last). Both make
`out_axis`, a dynamic dim whose lengths are each sequence's number of decoded labels.

Eager mode and the torch module run the functions of `netc.ops.ctc_search` (the module gets their
source). RETURNN: `eval` layers running the same algorithms in TensorFlow (`ctc_tf.py`), a
`range_from_length` layer giving `out_axis` its lengths. TF's own `ctc_beam_search_decoder` is not
used: it gives other scores in some cases (1 in 200 random small cases differed by 0.03). The LM
function has no RETURNN form (a located refusal): its modules would have to run inside the
search's `tf.while_loop` in one `eval` layer; nor has `method="flashlight"` (only the standard
search is written in TensorFlow).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from netc.errors import CompileError
from netc.ir.dims import DimError
from netc.naming import Code
from netc.ops.base import OpDef, OutType, register
from netc.ops.ctc_tf import GREEDY_TF, SEARCH_TF, TF_HELPERS
from netc.ops.nn import _float, _one_dim


def helper_source(name: str) -> Callable[[str], str]:
    """A torch module helper: the function `name` of netc.ops.ctc_search, renamed, after the
    functions of that file it calls (`ctc_prefix_frame`), renamed `<its new name>_frame` (the
    source read from the file: importing it would import torch)."""
    text = (Path(__file__).parent / "ctc_search.py").read_text(encoding="utf-8")
    fns = {
        n.name: ast.get_source_segment(text, n) or "" for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)
    }
    src = fns[name]
    called = [f for f in fns if f != name and f"{f}(" in src]

    def make(new: str) -> str:
        out = src.replace(f"def {name}(", f"def {new}(", 1)
        parts = []
        for f in called:
            renamed = f"{new}_{f.removeprefix('ctc_prefix_').removeprefix('ctc_flashlight_')}"
            out = out.replace(f"{f}(", f"{renamed}(")
            parts.append(fns[f].replace(f"def {f}(", f"def {renamed}(", 1))
        return "\n\n\n".join([*parts, out])

    return make


def _check(op: str, dt, args, attrs) -> tuple[str, str]:
    """(time, the labels' class dim) of a CTC decoding; makes `out_axis`'s lengths."""
    logits = args[0]
    _float(op, logits)
    axis = _one_dim(dt, logits, attrs["axis"], op)
    time = [d for d in logits.dims if d not in ("batch", axis)]
    if "batch" not in logits.dims or len(time) != 1 or dt[time[0]].kind != "dynamic" or dt[axis].kind != "static":
        raise DimError(f"`{op}` needs logits [batch, time, {axis}], got [{', '.join(logits.dims)}]")
    vocab, _, blank = axis.rpartition("+")
    if not vocab or vocab not in dt.dims or blank not in dt.dims or dt[blank].size != 1:
        raise DimError(
            f"`{op}` needs `axis` to be the labels' class dim plus the blank: `vocab + blank`, blank = Dim('blank', 1)"
        )
    out = attrs["out_axis"]
    if not isinstance(out, str) or out not in dt.dims:
        raise DimError(f"`{op}` needs `out_axis` to be a dim (declared as Dim(name))")
    dt.make_lengths(out, op, may_be_empty=True)  # a sequence of blanks decodes to no label
    return time[0], vocab


def _labels_layers(ctx, op, locals_: dict, sources: list[str], fn: str) -> dict:
    """RETURNN: a subnetwork finding the labels' lengths (`lengths`), giving them to `out_axis`
    (`range_from_length`) and the labels over it."""
    out = op.attrs["out_axis"]
    data = [f"data:{i}" for i in range(len(sources))]
    sub = {
        "lengths": {
            "class": "eval",
            "from": data,
            "eval": Code(fn),
            "eval_locals": {**locals_, "part": "lengths"},
            "out_type": {"dim_tags": [Code("batch_dim")], "dtype": "int32", "sparse": False},
        },
        "positions": {"class": "range_from_length", "from": "lengths", "out_spatial_dim": ctx.dim(out)},
        "output": {
            "class": "eval",
            "from": [*data, "positions"],
            "eval": Code(fn),
            "eval_locals": {**locals_, "part": "labels"},
            "out_type": {
                "dim_tags": [Code("batch_dim"), ctx.dim(out)],
                "dtype": "int32",
                "sparse_dim": ctx.dim(op.outs[0].sparse_dim),
            },
        },
    }
    return {"class": "subnetwork", "from": sources, "concat_sources": False, "subnetwork": sub}


_FLASHLIGHT_OPTIONS = ("beam_size_token", "beam_threshold", "log_add")


def _flashlight(attrs: dict) -> bool:
    return attrs.get("method", "prefix") == "flashlight"


def flashlight_options(attrs: dict) -> tuple[int, float, bool]:
    """`method="flashlight"`'s options as its search functions take them: beam_size_token (0:
    every class), beam_threshold (inf: none), log_add."""
    size, threshold = attrs.get("beam_size_token"), attrs.get("beam_threshold")
    return size or 0, float("inf") if threshold is None else float(threshold), bool(attrs.get("log_add", True))


def _flashlight_args(attrs: dict) -> str:
    """The torch module's arguments after `lm_weight` for `method="flashlight"`."""
    if not _flashlight(attrs):
        return ""
    size, threshold, log_add = flashlight_options(attrs)
    thr = 'float("inf")' if threshold == float("inf") else repr(threshold)
    return f", {size}, {thr}, {log_add}"


def _check_method(attrs: dict) -> None:
    method = attrs.get("method", "prefix")
    if method not in ("prefix", "flashlight"):
        raise DimError(f'`ctc_prefix_search` has `method` "prefix" or "flashlight", got {method!r}')
    if method == "prefix":
        given = [o for o, default in zip(_FLASHLIGHT_OPTIONS, (None, None, True)) if attrs.get(o, default) != default]
        if given:
            raise DimError(f'`ctc_prefix_search`: `{given[0]}` goes with `method="flashlight"`')
        return
    size, threshold, log_add = (attrs.get(o) for o in _FLASHLIGHT_OPTIONS)
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise DimError(f"`ctc_prefix_search` needs `beam_size_token` None or >= 1, got {size!r}")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not threshold >= 0
    ):
        raise DimError(f"`ctc_prefix_search` needs `beam_threshold` None or a number >= 0, got {threshold!r}")
    if not isinstance(log_add, bool):
        raise DimError(f"`ctc_prefix_search` needs `log_add` True or False, got {log_add!r}")


@register
class CtcGreedy(OpDef):
    """`ctc_greedy(logits, axis=vocab + blank, out_axis=label_time)`: the argmax class per frame,
    repeats collapsed, blanks dropped: int32 labels [batch, out_axis] over `vocab`."""

    name = fn_name = "ctc_greedy"
    tensors = ("logits",)

    def api(self, logits, axis, out_axis):
        pass

    def makes_dims(self, attrs):
        return [attrs["out_axis"]]

    def infer(self, dt, args, attrs):
        _, vocab = _check("ctc_greedy", dt, args, attrs)
        return [OutType(dt.canonical(["batch", attrs["out_axis"]]), "int32", vocab)]

    def returnn_helpers(self, op):
        return {GREEDY_TF: TF_HELPERS[GREEDY_TF]}

    def returnn(self, ctx, op):
        time = next(d for d in ctx.in_dims(0) if d not in ("batch", op.attrs["axis"]))
        locals_ = {"time_dim": ctx.dim(time), "class_dim": ctx.dim(op.attrs["axis"])}
        return _labels_layers(ctx, op, locals_, [ctx.src(0)], GREEDY_TF)

    def torch_helpers(self, op):
        return {"ctc_greedy": helper_source("ctc_greedy_decode")}

    def torch_first(self, ctx, op):
        time = next(d for d in ctx.in_dims(0) if ctx.is_dynamic(d))
        logits = ctx.aligned(0, ("batch", time, op.attrs["axis"]))
        return "ctc_greedy", f"{ctx.helper('ctc_greedy')}({logits}, {ctx.seq_lens(time)})"

    def torch_made_dims(self, ctx, op):
        return {op.attrs["out_axis"]: (f"{ctx.first}[1]", f"{ctx.first}[0].shape[1]")}

    def torch(self, ctx, op):
        return f"{ctx.first}[0]"

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0]
        time = next(d for d in x.dims if d not in ("batch", attrs["axis"]))
        logits = x.data.permute([x.dims.index(d) for d in ("batch", time, attrs["axis"])])
        from netc.ops.ctc_search import ctc_greedy_decode

        return ctc_greedy_decode(logits, torch.tensor([logits.shape[1]]))[0]


@register
class CtcPrefixSearch(OpDef):
    """`labels, score = ctc_prefix_search(logits, axis=vocab + blank, beam=K, out_axis=label_time,
    lm=None, lm_weight=0.0)`: CTC prefix beam search keeping K prefixes: the best prefix, int32
    [batch, out_axis] over `vocab`, and its score [batch], log p(labels | frames) summed over the
    alignments plus `lm_weight` times its LM log probability. `lm`: None, or log probabilities of
    the next label given the previous one, [lm_context, vocab] (also with batch), `lm_context`
    being `vocab` plus one (its last row: at the start). With an LM function (`Op.regions[0]`,
    `lm(label, *state) -> (log_probs, *state)`; attrs `bos`): args[1:] are its state before
    `bos`; each prefix carries the LM's state (torch and eager; RETURNN refuses it).
    `method="flashlight"` (attrs `beam_size_token`, `beam_threshold`, `log_add`): flashlight's
    search, hypotheses by (prefix, ending), torch and eager only."""

    name = fn_name = "ctc_prefix_search"
    tensors = ("logits", "lm")

    def api(
        self,
        logits,
        axis,
        beam,
        out_axis,
        lm=None,
        lm_weight=0.0,
        method="prefix",
        beam_size_token=None,
        beam_threshold=None,
        log_add=True,
    ):
        pass

    def bind(self, args, kwargs):
        tensors, attrs = super().bind(args, kwargs)
        return [t for t in tensors if t is not None], attrs

    def makes_dims(self, attrs):
        return [attrs["out_axis"]]

    def infer(self, dt, args, attrs):
        _, vocab = _check("ctc_prefix_search", dt, args, attrs)
        beam, weight = attrs["beam"], attrs["lm_weight"]
        if isinstance(beam, bool) or not isinstance(beam, int) or beam < 1:
            raise DimError(f"`ctc_prefix_search` needs a `beam` >= 1, got {beam!r}")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight != weight:
            raise DimError(f"`lm_weight` is a number, got {weight!r}")
        if "bos" in attrs:  # an LM function (the op's region): args[1:] its state before `bos`
            bos = attrs["bos"]
            if isinstance(bos, bool) or not isinstance(bos, int) or not 0 <= bos < dt[vocab].size:
                raise DimError(
                    f"`ctc_prefix_search` needs `bos` to be a label of `{vocab}` (0 to {dt[vocab].size - 1}), got {bos!r}"
                )
            for s in args[1:]:
                if "batch" not in s.dims or dt.dynamic(s.dims):
                    raise DimError(
                        f"`ctc_prefix_search`'s `lm_state` must be [batch, static dims...], got [{', '.join(s.dims)}]"
                    )
        elif len(args) > 1:
            lm = args[1]
            _float("ctc_prefix_search", lm)
            ctx = [d for d in lm.dims if d not in ("batch", vocab)]
            if vocab not in lm.dims or len(ctx) != 1 or dt[ctx[0]].size != dt[vocab].size + 1:
                raise DimError(
                    f"`ctc_prefix_search` needs `lm` [lm_context, {vocab}] (or with batch), lm_context of "
                    f"size |{vocab}| + 1 (the last row: the start), got [{', '.join(lm.dims)}]"
                )
        _check_method(attrs)
        out = OutType(dt.canonical(["batch", attrs["out_axis"]]), "int32", vocab)
        return [out, OutType(("batch",))]

    def _lm_dims(self, op, dims: tuple[str, ...]) -> tuple[str, ...]:
        vocab = op.outs[0].sparse_dim
        ctx = next(d for d in dims if d not in ("batch", vocab))
        return ("batch", ctx, vocab) if "batch" in dims else (ctx, vocab)

    def returnn_helpers(self, op):
        return {} if op.regions or _flashlight(op.attrs) else {SEARCH_TF: TF_HELPERS[SEARCH_TF]}

    def _returnn_locals(self, ctx, op) -> dict:
        a = op.attrs
        time = next(d for d in ctx.in_dims(0) if d not in ("batch", a["axis"]))
        loc = {"time_dim": ctx.dim(time), "class_dim": ctx.dim(a["axis"]), "beam": a["beam"]}
        loc["lm_weight"] = float(a["lm_weight"])
        if len(op.args) > 1:
            lm_dims = self._lm_dims(op, ctx.in_dims(1))
            loc["lm_dims"] = [Code("batch_dim") if d == "batch" else ctx.dim(d) for d in lm_dims]
        return loc

    def returnn(self, ctx, op):
        if _flashlight(op.attrs):
            raise CompileError(
                op.span,
                'RETURNN target: `ctc_prefix_search(..., method="flashlight")` has no RETURNN form (only the prefix '
                "search is written in TensorFlow); compile it with `--target torch`, or search with the default "
                '`method="prefix"` (docs/language.md, CTC decoding)',
            )
        if op.regions:
            raise CompileError(
                op.span,
                "RETURNN target: `ctc_prefix_search` with an LM function has no RETURNN equivalent (each prefix "
                "runs the LM's modules in the search's own loop, inside one layer); compile it with `--target "
                "torch`, or give the LM as a bigram table `lm=[lm_context, vocab]` (docs/language.md, CTC decoding)",
            )
        sources = [ctx.src(i) for i in range(len(op.args))]
        return _labels_layers(ctx, op, self._returnn_locals(ctx, op), sources, SEARCH_TF)

    def returnn_outs(self, layer, op):
        return [layer, f"{layer}_score"]

    def returnn_extra(self, ctx, layer, own, op, fresh):
        score = {
            "class": "eval",
            "from": [ctx.src(i) for i in range(len(op.args))],
            "eval": Code(SEARCH_TF),
            "eval_locals": {**self._returnn_locals(ctx, op), "part": "score"},
            "out_type": {"dim_tags": [Code("batch_dim")], "dtype": "float32", "sparse": False},
        }
        return {1: (f"{layer}_score", score)}

    def torch_helpers(self, op):
        if _flashlight(op.attrs):
            name = "ctc_flashlight_search" + ("_lm" if op.regions else "")
            return {name: helper_source(name)}
        if op.regions:
            return {"ctc_prefix_search_lm": helper_source("ctc_prefix_beam_search_lm")}
        return {"ctc_prefix_search": helper_source("ctc_prefix_beam_search")}

    def torch_first(self, ctx, op):
        a = op.attrs
        time = next(d for d in ctx.in_dims(0) if ctx.is_dynamic(d))
        logits = ctx.aligned(0, ("batch", time, a["axis"]))
        if op.regions:  # the LM function: a local function of the label and the state
            state = "".join(f"{ctx.arg(i)}, " for i in range(1, len(op.args)))
            name = "ctc_flashlight_search_lm" if _flashlight(a) else "ctc_prefix_search_lm"
            call = (
                f"{ctx.helper(name)}({logits}, {ctx.seq_lens(time)}, {a['beam']}, "
                f"{ctx.region(0)}, ({state}), {a['bos']}, {float(a['lm_weight'])!r}{_flashlight_args(a)})"
            )
            return "ctc_search", call
        lm = "None"
        if len(op.args) > 1:
            dims = self._lm_dims(op, ctx.in_dims(1))
            lm = ctx.aligned(1, dims) if "batch" in dims else f"{ctx.aligned(1, dims)}[None]"
        name = "ctc_flashlight_search" if _flashlight(a) else "ctc_prefix_search"
        call = (
            f"{ctx.helper(name)}({logits}, {ctx.seq_lens(time)}, {a['beam']}, {lm}, "
            f"{float(a['lm_weight'])!r}{_flashlight_args(a)})"
        )
        return "ctc_search", call

    def torch_made_dims(self, ctx, op):
        return {op.attrs["out_axis"]: (f"{ctx.first}[1]", f"{ctx.first}[0].shape[1]")}

    def torch(self, ctx, op):
        return f"{ctx.first}[0], {ctx.first}[2].to({ctx.float_dtype})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0]
        time = next(d for d in x.dims if d not in ("batch", attrs["axis"]))
        logits = x.data.permute([x.dims.index(d) for d in ("batch", time, attrs["axis"])])
        lm = None
        if len(args) > 1:
            dims = [d for d in args[1].dims]
            vocab = outs[0].sparse_dim
            order = [
                dims.index(d) for d in ("batch", *(d for d in dims if d not in ("batch", vocab)), vocab) if d in dims
            ]
            lm = args[1].data.permute(order)
            lm = lm if "batch" in dims else lm[None]
        from netc.ops.ctc_search import ctc_flashlight_search, ctc_prefix_beam_search

        lens, beam, weight = torch.tensor([logits.shape[1]]), attrs["beam"], float(attrs["lm_weight"])
        if _flashlight(attrs):
            labels, _, score = ctc_flashlight_search(logits, lens, beam, lm, weight, *flashlight_options(attrs))
        else:
            labels, _, score = ctc_prefix_beam_search(logits, lens, beam, lm, weight)
        return labels, score.to(torch.float32)
