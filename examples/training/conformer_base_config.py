#!rnn.py
# RETURNN training settings for the Conformer examples (examples/conformer_ctc.py,
# examples/conformer_transducer.py, examples/conformer_aed.py, examples/conformer_streaming.py:
# the same inputs, x [time, 16] features and y labels over 10), merged in by netc, for RETURNN on
# TensorFlow (--target returnn) and on PyTorch (--target returnn-torch) alike:
#
#   netc compile examples/conformer_ctc.py --target returnn \
#       --base-config examples/training/conformer_base_config.py -o train.config
#   python -m returnn train.config
#
#   netc compile examples/conformer_ctc.py --target returnn-torch \
#       --base-config examples/training/conformer_base_config.py -o train_torch.config
#   python -m returnn train_torch.config
#
# and the same with conformer_aed.py, or with conformer_transducer.py plus
# `--network conformer_transducer` (the training network, should the file hold others).
# netc appends its dims, `extern_data` and `network` after these settings; the losses are the
# network's (`ctc`, `rnnt` or `ce`). tests/test_conformer_training.py runs these and trains the
# emitted torch modules with a plain Adam loop on the same data.

import os

use_tensorflow = True  # the TensorFlow engine; the returnn-torch config sets `backend = "torch"` after this
task = "train"
device = "cpu"
os.environ.setdefault("DISABLE_CUDA", "1")  # RETURNN's native ops (CTC) compile without CUDA on the CPU
torch_dataloader_opts = {"num_workers": 0}  # PyTorch backend: StaticDataset does not pickle to a worker
# TensorFlow: no grappler graph rewrites; at these dims they take longer than they save (the first
# step of a run took 6 s with them, 2.4 s without). The PyTorch backend ignores this.
tf_session_opts = {"graph_options": {"rewrite_options": {"disable_meta_optimizer": True}}}

NUM_LABELS = 10  # the examples' vocab; label 0 is the AED's EOS (and the transducer's begin label)
FEATURES = 16
SEGMENT = 6  # input frames per label: 3 encoder frames after the front end's 2x pooling


def _make_data(num_seqs, seed):
    """Generated "speech", no download: each label has a prototype feature vector; a sequence of
    2..4 labels (no label twice in a row), then 0 (EOS for the AED, a closing silence for CTC and
    the transducer), is spoken as SEGMENT noisy frames of each label's prototype. So every
    sequence has more encoder frames than labels, as CTC and the transducer need.
    x [frames, 16] float32, y [labels] int32."""
    import numpy

    protos = numpy.random.RandomState(0).normal(size=(NUM_LABELS, FEATURES)).astype("float32")
    rng = numpy.random.RandomState(seed)
    seqs = []
    for _ in range(num_seqs):
        labels = [int(rng.randint(1, NUM_LABELS))]
        while len(labels) < rng.randint(2, 5):
            labels.append(int(rng.choice([c for c in range(1, NUM_LABELS) if c != labels[-1]])))
        labels.append(0)
        x = numpy.concatenate([protos[c] + rng.normal(scale=0.5, size=(SEGMENT, FEATURES)) for c in labels])
        seqs.append({"x": x.astype("float32"), "y": numpy.array(labels, dtype="int32")})
    return seqs


# output_dim gives (dim, ndim) per key, as extern_data has them; RETURNN checks it before training
train = {
    "class": "StaticDataset",
    "data": _make_data(num_seqs=32, seed=1),
    "output_dim": {"x": (FEATURES, 2), "y": (NUM_LABELS, 1)},
    "seq_ordering": "random",  # reshuffled each epoch (seeded by the epoch number)
}

batch_size = 1000  # padded frames per batch
max_seqs = 16
num_epochs = 3
learning_rate = 0.003
optimizer = {"class": "adam"}
model = "net-model/network"  # checkpoint prefix: net-model/network.001.* etc.
learning_rate_file = "net-model/learning_rates"  # per-epoch scores, written after each epoch
log_verbosity = 3  # prints "epoch N score: ..." per epoch
