"""The op registry: importing this package registers every op (and every loop iterable,
`netc.ops.iterables`)."""

from netc.ops import bias as _bias  # noqa: F401  (Bias)
from netc.ops import cells as _cells  # noqa: F401  (registers the recurrent cells)
from netc.ops import chunk as _chunk  # noqa: F401  (the ops of chunked loops)
from netc.ops import chunk_cache as _chunk_cache  # noqa: F401  (join_chunk, slice_static, to_chunk)
from netc.ops import chunk_mask as _chunk_mask  # noqa: F401  (chunk_mask)
from netc.ops import compact_frames as _compact_frames  # noqa: F401  (compact_frames)
from netc.ops import conv as _conv  # noqa: F401  (silu, glu, Conv1d, BatchNorm)
from netc.ops import conv2d as _conv2d  # noqa: F401  (Conv2d)
from netc.ops import ctc_decode as _ctc_decode  # noqa: F401  (ctc_greedy, ctc_prefix_search)
from netc.ops import defs as _defs  # noqa: F401  (elementwise, creation, Linear, structure)
from netc.ops import elementwise as _elementwise  # noqa: F401  (maximum, minimum, clip, abs, pow)
from netc.ops import fit_frames as _fit_frames  # noqa: F401  (fit_frames)
from netc.ops import frames as _frames  # noqa: F401  (slice_frames, pad_frames, shift_right, replace_dim)
from netc.ops import fused as _fused  # noqa: F401  (the loops fuse_cells makes native)
from netc.ops import grow as _grow  # noqa: F401  (empty, cum_concat)
from netc.ops import losses as _losses  # noqa: F401  (cross_entropy, ctc_loss)
from netc.ops import math_ops as _math_ops  # noqa: F401  (sin, cos, logsumexp, one_hot)
from netc.ops import modes as _modes  # noqa: F401  (training)
from netc.ops import nn as _nn  # noqa: F401  (registers the nn ops)
from netc.ops import positions as _positions  # noqa: F401  (range_over)
from netc.ops import reductions as _reductions  # noqa: F401  (reduce_*, dot, softmax, seq_lens)
from netc.ops import relpos as _relpos  # noqa: F401  (rel_positions, rel_shift)
from netc.ops import search as _search  # noqa: F401  (registers choice)
from netc.ops import sequence as _sequence  # noqa: F401  (registers the ops passes make over sequences)
from netc.ops import shape as _shape  # noqa: F401  (split_dims, merge_dims)
from netc.ops import speech as _speech  # noqa: F401  (max_pool)
from netc.ops import transducer as _transducer  # noqa: F401  (rnnt_loss)
from netc.ops import transducer_search as _transducer_search  # noqa: F401  (transducer_search)
from netc.ops import transposed_conv as _transposed_conv  # noqa: F401  (ConvTranspose1d)
from netc.ops.base import BY_FN_NAME, REGISTRY, OpDef
from netc.ops.iterables import ITERABLES, IterableDef

__all__ = ["BY_FN_NAME", "ITERABLES", "REGISTRY", "IterableDef", "OpDef"]
