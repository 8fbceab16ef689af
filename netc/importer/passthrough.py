"""Layers whose forward value is their input or a parameter, and what RETURNN does besides: `hdf_dump`
and `print` (their input, which RETURNN also writes to a file or the log), `accumulate_mean` (a
parameter: RETURNN's running mean, updated in training only), and the layers of RASR's alignments
through Sprint, which netc cannot run (refused, saying so)."""

from __future__ import annotations

import libcst as cst

from netc.importer.dims import BATCH
from netc.importer.syntax import call, name, tuple_
from netc.importer.values import Refused, Val, sources
from netc.importer.writer import ModuleRef

KNOWN = {
    "hdf_dump": {"filename", "extra", "dump_whole_batches", "labels", "extend_existing_file", "dump_per_run"},
    "print": {"summarize", "extra_print_args"},
    "accumulate_mean": {"exp_average", "axes", "initial_value", "is_prob_distribution"},
}
NOT_NETC = {
    "fast_bw": "RASR's full-sum Baum-Welch alignment through Sprint (netc cannot run RASR)",
    "forced_align": "a Viterbi forced alignment (its labels are not a function netc has)",
}


class PassthroughLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _l_hdf_dump(self, layer, d, scope, var, full) -> Val:
        return self._passthrough(layer, d, scope, var, full, f"RETURNN also writes it to {d.get('filename')!r}")

    def _l_print(self, layer, d, scope, var, full) -> Val:
        return self._passthrough(layer, d, scope, var, full, "RETURNN also prints it to its log")

    def _passthrough(self, layer, d, scope, var, full, also: str) -> Val:
        srcs = sources(d)
        if not srcs:
            raise Refused(full, d["class"], "it has no input (`from: []`)")
        val = self.get(srcs[0], scope)  # RETURNN's output: its first source
        self.notes.append(f"layer `{full}` ({d['class']}) imported as its input: {also}")
        self._emit(scope, var, val.expr, layer)
        return Val(name(var), val.dims, val.sparse, val.is_list and isinstance(val.expr, cst.Name))

    def _l_accumulate_mean(self, layer, d, scope, var, full) -> Val:
        """The running mean RETURNN keeps (its variable `mean`): a parameter of the model; RETURNN's
        update of it in training (an exponential average of the input's mean) is left out."""
        src = self._source(d, scope, full)
        axes = d.get("axes", "bt")
        if str(axes).lower() not in ("bt", "tb") or src.sparse is not None:
            raise Refused(full, "accumulate_mean", f"axes {axes!r} (batch and time, RETURNN's default)")
        kept = [x for x in src.dims if self.dims.is_static(x)]
        if len(kept) != len(src.dims) - 2:
            raise Refused(full, "accumulate_mean", "an input of [batch, time, static dims] is supported")
        self.notes.append(
            f"layer `{full}` (accumulate_mean): RETURNN's running mean of its input is a parameter of the model "
            "(its value from the checkpoint); its update in training (an exponential average) is left out"
        )
        # RETURNN's `tf.Variable(name="mean")` in a scope whose reduction has taken `mean`: `mean_1`
        return self._parameter(layer, d, scope, var, kept, "mean_1")

    def _parameter(self, layer, d, scope, var, keys: list[str], tf_name: str, batch: bool = False) -> Val:
        """`Bias(dims)(zeros(dims))`: a parameter over `keys`, RETURNN's `<layer scope>/<tf_name>`
        (`batch`: the same for each sequence, `zeros(batch, dims)`)."""
        self.imports |= {"Bias", "zeros"}
        dims = tuple_(*(self.dim(k) for k in keys)) if len(keys) > 1 else self.dim(keys[0])
        shape = [BATCH, *keys] if batch else keys
        value = call(call("Bias", dims), call("zeros", *(self.dim(k) for k in shape)))
        self._emit(scope, var, value, layer, ModuleRef("bias", self._tf_prefix(layer, d, scope), {"b": tf_name}))
        return Val(name(var), tuple(shape))
