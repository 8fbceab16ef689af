#!rnn.py
# RETURNN settings for examples/beam_search.py, merged in by netc. Train, then decode with the
# beam (the same config: RETURNN's `choice` takes the reference label in training):
#
#   netc compile examples/beam_search.py --target returnn \
#       --base-config examples/training/beam_search_base_config.py -o beam.config
#   python -m returnn beam.config                                   # trains 20 epochs
#   python -m returnn beam.config ++task search ++load_epoch 20 ++log_verbosity 5
#
# On RETURNN's PyTorch backend, the search is the forward task (forward_step searches):
#
#   netc compile examples/beam_search.py --target returnn-torch \
#       --base-config examples/training/beam_search_base_config.py -o beam_torch.config
#   python -m returnn beam_torch.config
#   python -m returnn beam_torch.config ++task forward ++load_epoch 20   # best labels in forward.npz
#
# The search prints each sequence's best labels ("seq_idx: 0, ..., output 'output': array([3, 4, 0])").
# (RETURNN writes them to a `search_output_file` only with a vocabulary for the label dim.)

use_tensorflow = True
task = "train"
device = "cpu"
torch_dataloader_opts = {"num_workers": 0}  # PyTorch backend: StaticDataset does not pickle to a worker


def _make_data(num_seqs, seed):
    """Generated data, no download: the labels count up from a start class c the encoder input
    shows, c % 3 + 1 of them, and end with the end label 0 (x [enc_time, 6] float32, y
    [dec_time] int32 over 7)."""
    import numpy

    rng = numpy.random.RandomState(seed)
    seqs = []
    for _ in range(num_seqs):
        c = int(rng.randint(6))
        enc_len, dec_len = int(rng.randint(3, 8)), c % 3 + 1
        x = rng.normal(scale=0.3, size=(enc_len, 6)).astype("float32")
        x[:, c] += 1.0
        y = numpy.append((c + numpy.arange(dec_len)) % 6 + 1, 0).astype("int32")
        seqs.append({"x": x, "y": y})
    return seqs


train = {
    "class": "StaticDataset",
    "data": _make_data(num_seqs=64, seed=1),
    "output_dim": {"x": (6, 2), "y": (7, 1)},
    "seq_ordering": "random",
}
# decoding: the same kind of data; RETURNN searches it for the best labels per sequence
search_data = {
    "class": "StaticDataset",
    "data": _make_data(num_seqs=8, seed=2),
    "output_dim": {"x": (6, 2), "y": (7, 1)},
}
forward_data = search_data  # PyTorch backend: `++task forward` searches

batch_size = 200
max_seqs = 16
num_epochs = 20
learning_rate = 0.03
optimizer = {"class": "adam"}
model = "net-model/network"
learning_rate_file = "net-model/learning_rates"
log_verbosity = 3
