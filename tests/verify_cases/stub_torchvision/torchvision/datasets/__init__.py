import os
import pickle
import urllib.request

import numpy as np
from PIL import Image
from torch.utils.data import Dataset

from torchvision.datasets.utils import check_integrity

_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"


class CIFAR10(Dataset):
    """torchvision's CIFAR10, its files checked against their MD5 sums and read as it reads them."""

    base_folder = "cifar-10-batches-py"
    train_list = [[f"data_batch_{i}", md5] for i, md5 in enumerate(
        ["c99cafc152244af753f735de768cd75f", "d4bba439e000b95fd0a9bffe97cbabec", "54ebc095f3ab1f0389bbae665268c751",
         "634d18415352ddfa80567beed471001a", "482c414d41f54cd18b22e5b47cb7c3cb"], start=1)]
    test_list = [["test_batch", "40351d587109b95175f43aff81a1287e"]]
    meta = {"filename": "batches.meta", "key": "label_names", "md5": "5ff9c542aee3614f3951f8cda6e48888"}

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        self.root, self.train = os.path.expanduser(root), train
        self.transform, self.target_transform = transform, target_transform
        if download and not self._check_integrity():
            os.makedirs(self.root, exist_ok=True)
            urllib.request.urlretrieve(_URL, os.path.join(self.root, "cifar-10-python.tar.gz"))
        if not self._check_integrity():
            raise RuntimeError("Dataset not found or corrupted. You can use download=True to download it")
        self.data, self.targets = [], []
        for name, _ in self.train_list if train else self.test_list:
            with open(os.path.join(self.root, self.base_folder, name), "rb") as handle:
                entry = pickle.load(handle, encoding="latin1")
            self.data.append(entry["data"])
            self.targets.extend(entry["labels"])
        self.data = np.vstack(self.data).reshape(-1, 3, 32, 32).transpose((0, 2, 3, 1))
        with open(os.path.join(self.root, self.base_folder, self.meta["filename"]), "rb") as handle:
            self.classes = pickle.load(handle, encoding="latin1")[self.meta["key"]]

    def _check_integrity(self):
        return all(check_integrity(os.path.join(self.root, self.base_folder, name), md5)
                   for name, md5 in self.train_list + self.test_list)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        image = Image.fromarray(self.data[index])
        image = self.transform(image) if self.transform is not None else image
        target = self.targets[index]
        return image, self.target_transform(target) if self.target_transform is not None else target
