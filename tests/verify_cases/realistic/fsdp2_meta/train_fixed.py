"""FSDP2 as PyTorch's example writes it: the model built on the meta device, each block sharded with fully_shard,
then materialised on the rank's GPU.

    torchrun --nproc_per_node=2 train.py --mixed-precision
"""

import argparse
import os

import torch
import torch.nn as nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.mlp(self.norm(x))

    def reset_parameters(self):
        self.norm.reset_parameters()
        for layer in (self.mlp[0], self.mlp[2]):
            layer.reset_parameters()


class Transformer(nn.Module):
    def __init__(self, vocab_size=128, dim=32, n_layers=3):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList(Block(dim) for _ in range(n_layers))
        self.output = nn.Linear(dim, vocab_size)

    def forward(self, tokens):
        x = self.embedding(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.output(x)

    def reset_parameters(self):
        self.embedding.reset_parameters()
        for layer in self.layers:
            layer.reset_parameters()
        self.output.reset_parameters()


def main(args):
    if not (torch.accelerator.is_available() and torch.accelerator.device_count() >= 2):
        print("Unable to locate sufficient 2 gpus to run this example. Exiting.")
        exit()
    rank = int(os.environ["LOCAL_RANK"])
    device = torch.device(f"{torch.accelerator.current_accelerator()}:{rank}")
    torch.accelerator.set_device_index(rank)
    torch.distributed.init_process_group(backend=torch.distributed.get_default_backend_for_device(device))

    with torch.device("meta"):
        model = Transformer()
    fsdp_kwargs = {}
    if args.mixed_precision:
        fsdp_kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, **fsdp_kwargs)
    fully_shard(model, **fsdp_kwargs)
    model.to_empty(device=device)
    model.reset_parameters()

    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(5):
        x = torch.randint(0, 128, (8, 16), device=device)
        loss = model(x).sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optim.step()
        optim.zero_grad()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="FSDP2 on a meta-initialised transformer")
    parser.add_argument("--mixed-precision", action="store_true", default=False)
    main(parser.parse_args())
