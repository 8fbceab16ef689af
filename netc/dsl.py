"""The model language as Python objects, so a model file also runs eagerly.

The compiler never executes these; it reads model files as source. When a model runs
eagerly, ops dispatch to the eager runtime (`netc_runtime.eager`), which imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from netc.ops import BY_FN_NAME, ITERABLES, IterableDef


class Dim:
    """A named axis: `Dim("time")` is dynamic, `Dim("feat", 40)` is static."""

    def __init__(self, name: str, size: int | None = None, *, _kind: str | None = None):
        self.name = name
        self.size = size
        self.kind = _kind or ("dynamic" if size is None else "static")

    def __mul__(self, n: int) -> Dim:
        if not isinstance(n, int) or self.size is None:
            return NotImplemented
        return self if n == 1 else Dim(f"{n}*{self.name}", n * self.size)

    __rmul__ = __mul__

    def __add__(self, other: Dim) -> Dim:
        """`a + b`: the static dim `a+b` (the one `concat` makes)."""
        if not isinstance(other, Dim) or self.size is None or other.size is None:
            return NotImplemented
        return Dim(f"{self.name}+{other.name}", self.size + other.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dim) and (self.name, self.size) == (other.name, other.size)

    def __hash__(self) -> int:
        return hash((self.name, self.size))

    def __repr__(self) -> str:
        return f"Dim({self.name!r}{'' if self.size is None else f', {self.size}'})"


batch = Dim("batch", _kind="batch")


class _InputType:
    def __init__(self, kind: str):
        self.kind = kind

    def __class_getitem__(cls, item):  # pragma: no cover - only used as Tensor[...]
        raise TypeError

    def __getitem__(self, dims) -> tuple[str, tuple[Dim, ...]]:
        return (self.kind, dims if isinstance(dims, tuple) else (dims,))


Tensor = _InputType("Tensor")
Labels = _InputType("Labels")


def _eager():
    from netc_runtime import eager

    return eager


class Module:
    """Base class of user modules: `__init__` builds sub-modules, `__call__`/`forward` runs a step."""

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} defines neither __call__ nor forward")


def network(fn: Callable) -> Any:
    """Marks the model function. Calling the result runs the model eagerly on torch tensors."""
    from netc_runtime.eager_network import Network

    return Network(fn)


def unstack(x, axis: Dim):
    return _eager().unstack(x, axis)


def stack(ys):
    """A list appended to in a loop as the stacked tensor (compiled, it already is one)."""
    return _eager().stack_list(ys) if isinstance(ys, list) else ys


def mark_as_loss(value, name: str) -> None:
    """A loss: RETURNN `loss: as_is`; summed over valid frames; the torch module returns it by name."""
    _eager().mark_as_loss(value, name)


def end(cond) -> bool:
    """`if end(cond): break`: this sequence ends at this step."""
    return _eager().end(cond)


def choice(
    logits,
    target,
    beam: int,
    length_normalization: bool = True,
    input_type: str = "logits",
    sample: bool = False,
    seed: int = 0,
):
    """The label a decoder step takes: `target`'s at this step in training, a beam search's
    choice when searching. Put it in a loop that ends with `if end(...): break`. `input_type`
    says what the scores are (RETURNN's): "logits" (a search takes their `log_softmax`),
    "log_prob" (used as they are) or "prob". `sample=True`: searching draws `beam` label
    sequences from the scores' softmax (seeded by `seed`) instead."""
    return _eager().choice(logits, target, beam, length_normalization, input_type, sample, seed)


def transducer_search(
    enc,
    *,
    axis: Dim,
    predict: Callable,
    joint: Callable,
    state,
    label_dim: Dim,
    start: int,
    out_axis: Dim,
    blank: int = -1,
    beam: int = 4,
    method: str = "modified",
    max_sym_per_frame: int = 1,
):
    """A transducer's search over `enc`'s frames along `axis` (docs/language.md, Transducers):
    `predict(label, state) -> (out, state)`, `joint(enc_frame, out) -> scores` over `label_dim`
    plus the blank; each sequence's best labels (along `out_axis`) and their score."""
    from netc_runtime.eager_transducer import transducer_search as run

    return run(enc, axis, predict, joint, state, label_dim, start, out_axis, blank, beam, method, max_sym_per_frame)


def _op_function(name: str) -> Callable:
    def fn(*args, **kwargs):
        return _eager().call_op(name, args, kwargs)

    fn.__name__ = fn.__qualname__ = name
    return fn


def _op_module(name: str) -> type:
    def __init__(self, *args, **kwargs):
        self._impl = _eager().OpModule(name, args, kwargs)

    def __call__(self, *args, **kwargs):
        return self._impl(*args, **kwargs)

    def __getattr__(self, attr):  # `emb.weight`: a parameter to pass as another module's `weight=`
        role = BY_FN_NAME[name].weights.get(attr)
        if role is None or attr.startswith("_"):
            raise AttributeError(f"`{name}` has no attribute `{attr}`")
        return _eager().ParamRef(self._impl, role)

    return type(
        name, (), {"__init__": __init__, "__call__": __call__, "__getattr__": __getattr__, "__module__": __name__}
    )


def _iterable_function(d: IterableDef) -> Callable:
    """A loop iterable's DSL function (`netc.ops.iterables`): eagerly, its kind's own code."""

    def fn(*args, **kwargs):
        from netc_runtime.eager_iterables import iterate

        return iterate(d, args, kwargs)

    fn.__name__ = fn.__qualname__ = d.fn_name
    fn.__doc__ = d.__doc__
    fn.__signature__ = d.signature()
    return fn


# `for x in <fn>(...)`: the loop kinds' iterables, exported with the ops
ITERABLE_FUNCTIONS: dict[str, Callable] = {name: _iterable_function(d) for name, d in ITERABLES.items()}


OPS: dict[str, Any] = {
    fn_name: (_op_module(fn_name) if op.module else _op_function(fn_name)) for fn_name, op in BY_FN_NAME.items()
}


def _ctc_prefix_search(
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
    *,
    lm_state=None,
    bos=None,
):
    """CTC prefix beam search (docs/language.md, CTC decoding): `lm` None, a bigram table, or an
    LM function `lm(label, state) -> (log_probs, state)` run from `lm_state` after `bos`;
    `method="flashlight"` (with its options) runs flashlight-text's search."""
    options = {"method": method, "beam_size_token": beam_size_token, "beam_threshold": beam_threshold}
    options["log_add"] = log_add
    if callable(lm):
        from netc_runtime.eager_ctc import ctc_prefix_search_lm

        return ctc_prefix_search_lm(logits, axis, beam, out_axis, lm, lm_weight, lm_state, bos, options)
    if lm_state is not None or bos is not None:
        raise TypeError("`lm_state` and `bos` go with an LM function (`lm=step`)")
    kwargs = {"axis": axis, "beam": beam, "out_axis": out_axis, "lm": lm, "lm_weight": lm_weight, **options}
    return _eager().call_op("ctc_prefix_search", (logits,), kwargs)


_ctc_prefix_search.__name__ = _ctc_prefix_search.__qualname__ = "ctc_prefix_search"
OPS["ctc_prefix_search"] = _ctc_prefix_search
