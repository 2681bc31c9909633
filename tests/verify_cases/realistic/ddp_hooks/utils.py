"""Helpers of train.py: nothing here knows it runs on several ranks."""

import torch


def save_checkpoint(state: dict, path: str) -> None:
    torch.save(state, path)
