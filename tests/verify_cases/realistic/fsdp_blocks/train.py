"""FSDP (FullyShardedDataParallel) over transformer blocks, as a best-practices example writes it.

    torchrun --standalone --nproc_per_node=2 train.py
"""

import os
from functools import partial

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FullStateDictConfig, MixedPrecision, ShardingStrategy, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Block(nn.Module):
    def __init__(self, d_model=32, nhead=4):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, nhead, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d_model, d_model * 4), nn.GELU(), nn.Linear(d_model * 4, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x):
        attn_out, _ = self.attn(x, x, x)
        x = self.norm1(x + attn_out)
        return self.norm2(x + self.ff(x))


class TinyLM(nn.Module):
    def __init__(self, vocab=100, d=32, layers=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([Block(d) for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, ids, labels):
        x = self.embedding(ids)
        for layer in self.layers:
            x = layer(x)
        logits = self.head(x)
        return nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))


class Tokens(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        ids = torch.randint(0, 100, (16,))
        return {"input_ids": ids, "labels": ids.clone()}


def train():
    rank = int(os.environ.get("RANK", 0))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    dist.init_process_group(backend="nccl")
    device = torch.device(f"cuda:{local_rank}")
    torch.cuda.set_device(device)

    mp_policy = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)
    wrap_policy = partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    model = FSDP(TinyLM(), auto_wrap_policy=wrap_policy, mixed_precision=mp_policy,
                 sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=local_rank, use_orig_params=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    dataset = Tokens()
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, drop_last=True)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for batch in loader:
            optimizer.zero_grad()
            loss = model(batch["input_ids"].to(device), batch["labels"].to(device))
            loss.backward()
            model.clip_grad_norm_(max_norm=1.0)
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")

    if rank == 0:
        config = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, config):
            state = model.state_dict()
        torch.save(state, "checkpoint.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    train()
