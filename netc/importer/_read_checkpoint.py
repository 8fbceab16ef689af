"""Run in a subprocess by `netc.importer.checkpoint`: read a TensorFlow checkpoint (RETURNN's
`network.NNN` prefix) with TensorFlow's own reader and write its variables to an npz file.

The request (JSON on stdin): `{"prefix": ..., "out": ...}`. On stdout after the mark: the
variables' names in the npz's order (`arr_0`, `arr_1`, ...), or `{"error": message}`. TensorFlow
is imported here only, in the interpreter RETURNN runs in, never in netc's compiler."""

from __future__ import annotations

import json
import sys


def main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        import numpy as np
        import tensorflow as tf

        reader = tf.train.load_checkpoint(request["prefix"])
        names = sorted(reader.get_variable_to_shape_map())
        np.savez(request["out"], *[reader.get_tensor(n) for n in names])
        result = {"names": names}
    except Exception as e:  # noqa: BLE001 - TensorFlow's errors on a missing or damaged checkpoint
        text = str(e).strip().splitlines()
        result = {"error": f"{type(e).__name__}: {text[0] if text else ''}"}
    sys.stdout.write("\n@@netc-checkpoint@@\n" + json.dumps(result))


if __name__ == "__main__":
    from netc import tf_quiet

    tf_quiet.quiet()
    main()
