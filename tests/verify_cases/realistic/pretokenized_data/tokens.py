"""Batches of pretokenized text, read from the shards a separate step writes (`python tokens.py pretokenize`, not
here): the loader asserts that the shards are there, as llama2.c's tinystories.py does."""

import glob
import os

import numpy as np
import torch

DATA_CACHE_DIR = "data"


class PretokDataset(torch.utils.data.IterableDataset):
    def __init__(self, split: str, max_seq_len: int) -> None:
        super().__init__()
        self.split = split
        self.max_seq_len = max_seq_len

    def __iter__(self):
        bin_dir = os.path.join(DATA_CACHE_DIR, "stories_pretok")
        shard_filenames = sorted(glob.glob(os.path.join(bin_dir, "*.bin")))
        assert len(shard_filenames) > 0, f"No bin files found in {bin_dir}"
        for shard in shard_filenames:
            m = np.memmap(shard, dtype=np.uint16, mode="r")
            for start in range(0, len(m) - self.max_seq_len - 1, self.max_seq_len):
                chunk = torch.from_numpy(m[start:start + self.max_seq_len + 1].astype(np.int64))
                yield chunk[:-1], chunk[1:]
