"""Compose, ToTensor and Normalize, as torchvision.transforms has them, for numpy images (no PIL)."""

import numpy as np


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ToTensor:
    """HxW or HxWxC uint8 array -> CxHxW float32 tensor in [0, 1]."""

    def __call__(self, img):
        import torch

        a = np.asarray(img)
        if a.ndim == 2:
            a = a[:, :, None]
        a = np.ascontiguousarray(a.transpose(2, 0, 1))
        return torch.from_numpy(a.astype(np.float32) / 255.0 if a.dtype == np.uint8 else a.astype(np.float32))


class Normalize:
    """(x - mean) / std per channel."""

    def __init__(self, mean, std, inplace=False):
        self.mean, self.std = tuple(mean), tuple(std)

    def __call__(self, tensor):
        import torch

        mean = torch.tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        return (tensor - mean) / std
