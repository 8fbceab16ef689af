"""The inputs the corpus runner's match stage gives RETURNN running an original config: as its
data would be (tools/corpus_match.py, docs/import.md "The public corpus")."""

from __future__ import annotations

import numpy as np

RNA_FRAMES = """
from netc import Dim, Embedding, Labels, Linear, Tensor, batch, fit_frames, max_pool, network, reduce_sum

time = Dim("time")
feat = Dim("feat", 3)
down = Dim("down")
align_time = Dim("align_time")
vocab = Dim("vocab", 4)
hid = Dim("hid", 2)


@network
def rna(x: Tensor[batch, time, feat], align: Labels[batch, align_time, vocab]):
    pooled = max_pool(x, axis=time, size=2, out_axis=down)
    fitted = fit_frames(align, axis=align_time, out_axis=down)  # read by nothing: the tie only
    return {"enc": reduce_sum(Linear(hid)(pooled), axis=down), "emb": Embedding(hid)(align)}
"""


def test_an_alignment_fitted_onto_pooled_frames_is_drawn_as_long_as_them_also_where_nothing_reads_the_fit(
    tmp_path,
):
    # an imported RNA alignment (`size_base` onto the pooled encoder) that the decoder takes as its
    # target over its own dim: the `fit_frames` goes with dead code, and its tie with it; a match
    # then fed RETURNN an alignment shorter than the frames it shares its dim tag with (a loss 18% off)
    from netc.compiler import compile_graph
    from netc_runtime.verify import fitted_inputs, random_lengths

    model = tmp_path / "rna.py"
    model.write_text(RNA_FRAMES.lstrip())
    g = compile_graph(str(model))
    assert fitted_inputs(g) == {"align_time": "down"}
    lens = random_lengths(g, 3, 7, np.random.default_rng(0))
    assert [int(n) for n in lens["align_time"]] == [(int(n) + 1) // 2 for n in lens["time"]], lens


def test_an_input_given_by_same_dim_tags_as_keeps_its_time_and_feature_axes():
    # a config's SpecAugment function reads `data.time_dim_axis`: None made `tf.shape(x)[None]` a
    # [1, 3] bound that TensorFlow rejected, and the original of every transducer config did not build
    from returnn.tensor import Dim, Tensor

    from netc.importer._child import input_kwargs

    tag = Dim(None, kind=Dim.Types.Spatial, description="time")
    data = Tensor("data", **input_kwargs("data", {"dim": 40, "same_dim_tags_as": {"t": tag}}))
    assert (data.time_dim_axis, data.feature_dim_axis, data.dims[1]) == (1, 2, tag)
    align = Tensor("align", **input_kwargs("align", {"dim": 5, "sparse": True, "same_dim_tags_as": {"t": tag}}))
    assert (align.time_dim_axis, align.sparse_dim.dimension, align.dims[1]) == (1, 5, tag)
