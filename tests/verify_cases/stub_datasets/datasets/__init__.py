"""A minimal Hugging Face `datasets` for the verify tests, put on the path only where the real package is not
installed: `load_dataset` answers as the real one does offline (verify sets HF_HUB_OFFLINE), or downloads."""

import os
import urllib.request

import torch


class Dataset(torch.utils.data.Dataset):
    def __init__(self, columns):
        self._columns = columns

    @classmethod
    def from_dict(cls, mapping):
        return cls(dict(mapping))

    @property
    def column_names(self):
        return list(self._columns)

    def __len__(self):
        return len(next(iter(self._columns.values())))

    def __getitem__(self, index):
        return {name: values[index] for name, values in self._columns.items()}


class DatasetDict(dict):
    pass


def load_dataset(path, name=None, split=None, **kwargs):
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (OfflineModeIsEnabled)")
    urllib.request.urlopen(f"https://huggingface.co/api/datasets/{path}")
    raise NotImplementedError("the stub downloads nothing")
