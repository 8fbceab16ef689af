"""Parameters from a RETURNN (TensorFlow) checkpoint, by variable name, for the torch module."""

from __future__ import annotations

import numpy as np


def read_tf_checkpoint(prefix: str) -> dict[str, np.ndarray]:
    """Every model variable of a TF checkpoint (RETURNN's bookkeeping such as global_step left out)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map() if name != "global_step"}
