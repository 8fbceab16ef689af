#!rnn.py
# RETURNN training settings for examples/librispeech_2018.py, merged in by netc:
#
#   netc compile examples/librispeech_2018.py --target returnn \
#       --base-config examples/training/librispeech_base_config.py -o train.config
#   python -m returnn train.config
#
# netc appends its dims, `extern_data` and `network` after these settings. The losses are the
# network's: `output_prob` (cross entropy with label smoothing) and `ctc` (on the encoder).

import os

use_tensorflow = True
task = "train"
device = "cpu"
# on the CPU, RETURNN's native ops (nativelstm2, CTC) must compile without CUDA even where a
# CUDA compiler is installed
os.environ.setdefault("DISABLE_CUDA", "1")

NUM_LABELS = 24  # the example's vocab; label 0 is EOS
SEGMENT = 16  # frames per label: 2 frames after the encoder's 8x pooling


def _make_data(num_seqs, seed):
    """Generated "speech", no download: each label has a prototype feature vector; a sequence of
    2..5 labels (no label twice in a row), then EOS, is spoken as SEGMENT noisy frames of each
    label's prototype (EOS too, as a closing silence). x [frames, 40] float32, y [labels] int32."""
    import numpy

    protos = numpy.random.RandomState(0).normal(size=(NUM_LABELS, 40)).astype("float32")
    rng = numpy.random.RandomState(seed)
    seqs = []
    for _ in range(num_seqs):
        labels = [int(rng.randint(1, NUM_LABELS))]
        while len(labels) < rng.randint(2, 6):
            labels.append(int(rng.choice([c for c in range(1, NUM_LABELS) if c != labels[-1]])))
        labels.append(0)
        x = numpy.concatenate([protos[c] + rng.normal(scale=0.5, size=(SEGMENT, 40)) for c in labels])
        seqs.append({"x": x.astype("float32"), "y": numpy.array(labels, dtype="int32")})
    return seqs


train = {
    "class": "StaticDataset",
    "data": _make_data(num_seqs=64, seed=1),
    "output_dim": {"x": (40, 2), "y": (NUM_LABELS, 1)},  # (dim, ndim) per key, as extern_data has them
    "seq_ordering": "random",
}

batch_size = 2000  # padded frames per batch
max_seqs = 16
num_epochs = 5
learning_rate = 0.003
optimizer = {"class": "adam"}
model = "net-model/network"  # checkpoint prefix: net-model/network.001.* etc.
learning_rate_file = "net-model/learning_rates"
log_verbosity = 3  # prints "epoch N score: ..." per epoch
