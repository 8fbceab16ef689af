#!rnn.py
# RETURNN training settings for examples/attention.py, merged in by netc, for RETURNN on TensorFlow
# (--target returnn) and on PyTorch (--target returnn-torch) alike:
#
#   netc compile examples/attention.py --target returnn \
#       --base-config examples/training/attention_base_config.py -o train.config
#   python -m returnn train.config
#
#   netc compile examples/attention.py --target returnn-torch \
#       --base-config examples/training/attention_base_config.py -o train_torch.config
#   python -m returnn train_torch.config
#   python -m returnn train_torch.config ++task forward ++load_epoch 5   # outputs of forward_data: forward.npz
#
# netc appends its dims, `extern_data` and `network` after these settings. Paths are relative
# to the directory RETURNN runs in; any setting can be overridden on the command line, e.g.
# `python -m returnn train.config ++num_epochs 20 ++model /some/dir/net` (then also set
# `++learning_rate_file`, which stays under net-model/ otherwise).

use_tensorflow = True  # the TensorFlow engine; the returnn-torch config sets `backend = "torch"` after this
task = "train"
device = "cpu"
# RETURNN's PyTorch backend loads data in a worker process by default, which must pickle the dataset;
# StaticDataset does not pickle (RETURNN 1.20261022), so the data is loaded in the training process
# (the TensorFlow engine warns that this setting has no effect there)
torch_dataloader_opts = {"num_workers": 0}


def _make_data(num_seqs, seed):
    """Generated data, no download: a counting task the attention decoder can learn.

    Each sequence has a start class c in 0..11. The encoder input `x` [enc_time, 10] is noise
    plus a bump on feature c % 10 (features 0 and 1 get another one for c >= 10); the labels
    `y` [dec_time] count up from c: c, c+1, c+2, ... (mod 12). The first label needs the
    attention over x, each later one follows from the previous label (fed back by teacher
    forcing).
    """
    import numpy

    rng = numpy.random.RandomState(seed)
    seqs = []
    for _ in range(num_seqs):
        c = int(rng.randint(12))
        enc_len, dec_len = int(rng.randint(3, 9)), int(rng.randint(2, 7))
        x = rng.normal(scale=0.3, size=(enc_len, 10)).astype("float32")
        x[:, c % 10] += 1.0
        if c >= 10:
            x[:, :2] += 1.0
        y = ((c + numpy.arange(dec_len)) % 12).astype("int32")
        seqs.append({"x": x, "y": y})
    return seqs


# Data keys match netc's extern_data: x float32 [time, 10], y int32 labels [time] over 12 classes.
# output_dim gives (dim, ndim) per key. RETURNN checks it against extern_data before training;
# without it StaticDataset infers y as (0, 1) and fails with "key 'y' dim mismatch".
train = {
    "class": "StaticDataset",
    "data": _make_data(num_seqs=64, seed=1),
    "output_dim": {"x": (10, 2), "y": (12, 1)},
    "seq_ordering": "random",  # reshuffled each epoch (seeded by the epoch number)
}
# `++task forward` on RETURNN's PyTorch backend: the same kind of data, its outputs into forward.npz
forward_data = {
    "class": "StaticDataset",
    "data": _make_data(num_seqs=8, seed=2),
    "output_dim": {"x": (10, 2), "y": (12, 1)},
}

batch_size = 200  # padded frames per batch (longest seq x seqs), checked for each data key
max_seqs = 16
num_epochs = 5
learning_rate = 0.01
optimizer = {"class": "adam"}
model = "net-model/network"  # checkpoint prefix: net-model/network.001.* etc.
learning_rate_file = "net-model/learning_rates"  # per-epoch scores, written after each epoch
log_verbosity = 3  # stdout; >= 1 prints "epoch 1 score: 2.50... error: None elapsed: ..." per epoch
