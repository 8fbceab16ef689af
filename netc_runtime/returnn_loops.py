"""What RETURNN itself does with an emitted config's loops when it builds the network.

RETURNN moves layers out of a `rec` unit by itself at construction (`optimize_move_layers_out`,
on by default): those that depend on no state run before the loop over the whole sequence
(`input_layers_moved_out`), those that only feed stacked outputs after it
(`output_layers_moved_out`). netc does that work in its own passes; `moved_out` shows what
RETURNN still found to move, per rec layer, so tests can check that nothing is left.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass

from netc_runtime.scratch import CurrentStdout, prepare_returnn, scratch_file


@dataclass(frozen=True)
class Moved:
    inputs: list[str]  # moved before the loop, without the `rec_unstack` layers (frames of inputs)
    outputs: list[str]  # moved after the loop


def moved_out(config_text: str, train: bool = True) -> dict[str, Moved]:
    """Each rec layer (`rec`, `outer/inner` for a loop in a loop) of the config's network as RETURNN
    builds it (for training by default) and what it moved out of that layer's unit."""
    return _construct(config_text, train)[0]


def construction_seconds(config_text: str, train: bool = True) -> float:
    """Wall time RETURNN takes to build the config's network (in a fresh TF graph)."""
    return _construct(config_text, train)[1]


def _construct(config_text: str, train: bool) -> tuple[dict[str, Moved], float]:
    import tensorflow as tf
    from returnn.config import Config
    from returnn.log import log
    from returnn.tf.layers.rec import RecLayer
    from returnn.tf.native_op import OpMaker
    from returnn.tf.network import TFNetwork

    prepare_returnn()
    tf.compat.v1.disable_eager_execution()
    log.initialize(verbosity=[0])
    tf.get_logger().setLevel("CRITICAL")
    OpMaker.with_cuda = False
    OpMaker.log_stream = CurrentStdout()  # its compiler lines go where stdout is redirected
    path = scratch_file("netc.config.py", config_text)
    try:
        cfg = Config()
        cfg.load_file(path)
        with tf.Graph().as_default(), contextlib.redirect_stdout(sys.stderr):
            start = time.perf_counter()
            net = TFNetwork(config=cfg, train_flag=train, eval_flag=True)
            net.construct_from_dict(cfg.typed_value("network"))
            seconds = time.perf_counter() - start
            found: dict[str, Moved] = {}

            def walk(layers, prefix: str) -> None:
                for name, layer in layers.items():
                    cell = getattr(layer, "cell", None) if isinstance(layer, RecLayer) else None
                    if cell is None or not hasattr(cell, "input_layers_moved_out"):
                        continue  # a native cell (`nativelstm2`): nothing of netc's inside
                    unit = cell.net.layers
                    inputs = [n for n in cell.input_layers_moved_out if _class(cell, n) != "rec_unstack"]
                    found[f"{prefix}{name}"] = Moved(inputs, list(cell.output_layers_moved_out))
                    for net_ in cell.get_all_nets() if hasattr(cell, "get_all_nets") else [cell.net]:
                        walk(net_.layers, f"{prefix}{name}/")
                    del unit

            walk(net.layers, "")
    finally:
        os.unlink(path)
    return found, seconds


def _class(cell, name: str) -> str | None:
    layer = cell.net_dict.get(name)
    return layer.get("class") if isinstance(layer, dict) else None
