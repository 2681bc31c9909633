import numpy as np
import torch


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, image):
        for transform in self.transforms:
            image = transform(image)
        return image


class ToTensor:
    def __call__(self, image):
        array = np.asarray(image, dtype=np.uint8)
        array = array[:, :, None] if array.ndim == 2 else array
        return torch.from_numpy(array.copy()).permute(2, 0, 1).float().div(255)


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = torch.tensor(mean)[:, None, None], torch.tensor(std)[:, None, None]

    def __call__(self, tensor):
        return (tensor - self.mean) / self.std


class RandomHorizontalFlip:
    def __call__(self, tensor):
        return tensor.flip(-1) if torch.rand(()) < 0.5 else tensor
