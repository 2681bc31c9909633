"""Command-line options shared by the training and evaluation scripts."""

import argparse


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="train a small classifier on one or more GPUs")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--local_rank", type=int, default=-1, help="set by torch.distributed.launch")
    return parser.parse_args()
