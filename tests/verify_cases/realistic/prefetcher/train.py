"""ImageNet-style DDP training with NVIDIA's data prefetcher: the next batch is copied to the GPU on a side stream
while the current one trains, and `record_stream` tells the caching allocator the main stream uses it.

    torchrun --nproc-per-node 2 train.py
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class DataPrefetcher:
    def __init__(self, loader: DataLoader) -> None:
        self.loader = iter(loader)
        self.stream = torch.cuda.Stream()
        self.preload()

    def preload(self) -> None:
        try:
            self.next_input, self.next_target = next(self.loader)
        except StopIteration:
            self.next_input = self.next_target = None
            return
        with torch.cuda.stream(self.stream):
            self.next_input = self.next_input.cuda(non_blocking=True)
            self.next_target = self.next_target.cuda(non_blocking=True)

    def next(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        torch.cuda.current_stream().wait_stream(self.stream)
        inputs, targets = self.next_input, self.next_target
        if inputs is not None:
            inputs.record_stream(torch.cuda.current_stream())
            targets.record_stream(torch.cuda.current_stream())
        self.preload()
        return inputs, targets


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl")
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(512, 3, 16, 16), torch.randint(0, 10, (512,)))
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler, pin_memory=True)
    model = DDP(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10)).cuda(),
                device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        prefetcher = DataPrefetcher(loader)
        inputs, targets = prefetcher.next()
        while inputs is not None:
            loss = nn.functional.cross_entropy(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            inputs, targets = prefetcher.next()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")
            torch.save({"epoch": epoch, "model": model.state_dict()}, "checkpoint.pth")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
