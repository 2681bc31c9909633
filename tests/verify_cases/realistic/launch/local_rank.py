"""Reads its rank from --local_rank, as scripts written for torch.distributed.launch do."""

import argparse

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, required=True)
    args = parser.parse_args()
    torch.cuda.set_device(args.local_rank)
    dist.init_process_group("nccl")
    tensor = torch.ones(1, device=f"cuda:{args.local_rank}")
    dist.all_reduce(tensor)
    print(f"local rank {args.local_rank}: {tensor.item()} on {tensor.device}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
