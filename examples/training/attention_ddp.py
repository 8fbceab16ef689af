"""Train the emitted torch module of examples/attention.py with torch's DistributedDataParallel:
one process per rank, each on its share of the data, gradients averaged over the ranks.

    netc compile examples/attention.py --target torch -o attention_torch.py
    torchrun --standalone --nproc_per_node=2 examples/training/attention_ddp.py attention_torch.py \
        --epochs 10 --save attention_ddp.pt

On CPU the ranks talk through gloo (on one machine, set GLOO_SOCKET_IFNAME=lo to keep them on
the loopback interface); on GPUs through NCCL, each rank on the GPU `LOCAL_RANK`. The data is
the base config's generated data (examples/training/attention_base_config.py). `--save`
writes rank 0's parameters as a `state_dict` (`Model().load_state_dict(torch.load(path))`); a
`{rank}` in the path makes every rank write its own.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

BASE_CONFIG = Path(__file__).resolve().parent / "attention_base_config.py"


def load_module(path: str):
    spec = importlib.util.spec_from_file_location("attention_torch", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def batches(seqs: list[dict[str, np.ndarray]], size: int):
    """Padded batches as the emitted `forward` takes them: x [B, enc_time, 10], y [B, dec_time],
    and int64 lengths per dynamic dim."""
    for i in range(0, len(seqs), size):
        chunk = seqs[i : i + size]
        enc = torch.tensor([len(s["x"]) for s in chunk])
        dec = torch.tensor([len(s["y"]) for s in chunk])
        x = torch.zeros(len(chunk), int(enc.max()), chunk[0]["x"].shape[1])
        y = torch.zeros(len(chunk), int(dec.max()), dtype=torch.int64)
        for b, s in enumerate(chunk):
            x[b, : enc[b]] = torch.from_numpy(s["x"])
            y[b, : dec[b]] = torch.from_numpy(s["y"])
        yield {"x": x, "y": y, "enc_time_lens": enc, "dec_time_lens": dec}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("module", help="the file `netc compile examples/attention.py --target torch` wrote")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=8, help="sequences per batch and rank")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--save", help="where rank 0 saves the trained state_dict ({rank}: every rank)")
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # rank and world size from torchrun's environment
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', 0)}" if cuda else "cpu")
    torch.manual_seed(0)  # the same start on every rank (DDP also broadcasts rank 0's parameters)
    model = DistributedDataParallel(load_module(args.module).Model().to(device))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    seqs = runpy.run_path(str(BASE_CONFIG))["train"]["data"][rank::world]  # this rank's share
    rng = np.random.default_rng(rank)
    for epoch in range(1, args.epochs + 1):
        model.train()
        total = torch.zeros(2, dtype=torch.float64, device=device)  # summed loss, frames
        with model.join():  # a rank whose share has fewer batches joins the others' last steps
            for batch in batches([seqs[i] for i in rng.permutation(len(seqs))], args.batch):
                batch = {k: v.to(device) for k, v in batch.items()}
                loss = model(**batch)["ce"]  # summed over valid frames
                frames = batch["dec_time_lens"].sum()
                opt.zero_grad()
                (loss / frames).backward()  # per frame; DDP averages the gradients over the ranks
                opt.step()
                total += torch.stack([loss.detach().double(), frames.double()])
        dist.all_reduce(total)  # over all ranks: the epoch's loss per frame
        # one write per line: the ranks share the terminal, and `print` writes the newline apart
        sys.stdout.write(f"rank {rank}: epoch {epoch} loss per frame {float(total[0] / total[1]):.4f}\n")
        sys.stdout.flush()
    if args.save and ("{rank}" in args.save or rank == 0):
        torch.save(model.module.state_dict(), args.save.format(rank=rank))
    # both ranks tear down together: gloo aborted a rank that left while rank 0 still saved
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
