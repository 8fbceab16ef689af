"""The TensorFlow functions the `eval` language understands (`netc.importer.evals`), as written
after `tf.`, and the netc function or operator each is."""

from __future__ import annotations

# TF function (as written after `tf.`) -> netc function of one tensor
UNARY = {
    "tanh": "tanh",
    "nn.tanh": "tanh",
    "math.tanh": "tanh",
    "sigmoid": "sigmoid",
    "nn.sigmoid": "sigmoid",
    "math.sigmoid": "sigmoid",
    "exp": "exp",
    "math.exp": "exp",
    "log": "log",
    "math.log": "log",
    "sqrt": "sqrt",
    "math.sqrt": "sqrt",
    "abs": "abs",
    "math.abs": "abs",
    "sin": "sin",
    "math.sin": "sin",
    "cos": "cos",
    "math.cos": "cos",
    "nn.relu": "relu",
    "nn.silu": "silu",
    "nn.swish": "silu",
    "stop_gradient": "stop_gradient",
}
BINARY = {"maximum": "maximum", "math.maximum": "maximum", "minimum": "minimum", "math.minimum": "minimum"}
SOFTMAX = {"nn.softmax": "softmax", "nn.log_softmax": "log_softmax"}  # over the feature dim (TF's last axis)
CASTS = {"to_float": 1, "cast": 2, "dtypes.cast": 2}  # to float32: the number of arguments
# TF functions over an axis -> netc's (squeeze: the one value of a size-1 axis)
AXIS_FUNCTIONS = {
    "squeeze": "squeeze",
    "argmax": "argmax",
    "math.argmax": "argmax",
    "reduce_sum": "reduce_sum",
    "math.reduce_sum": "reduce_sum",
    "reduce_mean": "reduce_mean",
    "math.reduce_mean": "reduce_mean",
    "reduce_max": "reduce_max",
    "math.reduce_max": "reduce_max",
    "reduce_logsumexp": "logsumexp",
    "math.reduce_logsumexp": "logsumexp",
    "cumsum": "cumsum",
    "math.cumsum": "cumsum",
    "argmin": "argmin",
    "math.argmin": "argmin",
}
_INTEGER = {"floordiv", "math.floordiv", "floormod", "math.floormod", "mod", "math.mod", "truncatediv", "truncatemod"}
# TF's logical functions of bools -> (netc's form, the number of arguments)
LOGICAL = {
    "logical_and": ("and", 2),
    "math.logical_and": ("and", 2),
    "logical_or": ("or", 2),
    "math.logical_or": ("or", 2),
    "logical_not": ("not", 1),
    "math.logical_not": ("not", 1),
}
# TF's comparisons -> netc's operator (a bool tensor)
COMPARISONS = {
    "greater": ">",
    "greater_equal": ">=",
    "less": "<",
    "less_equal": "<=",
    "equal": "==",
    "not_equal": "!=",
}
