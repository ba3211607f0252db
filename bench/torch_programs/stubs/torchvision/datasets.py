"""``MNIST``: synthetic handwritten-looking digits, no download. Each image is the digit's seven-segment strokes,
drawn at a random offset, scale and stroke width, blurred, with noise; labels are balanced. Sizes come from the
environment (``STUB_MNIST_TRAIN``, default 1024; ``STUB_MNIST_TEST``, default 256); the same split always gives the
same images."""

import os

import numpy as np

# segments a..g as (row0, col0, row1, col1) in a 0..2 x 0..1 unit box: a top, b top right, c bottom right,
# d bottom, e bottom left, f top left, g middle
_SEGMENTS = {
    "a": (0, 0, 0, 1),
    "b": (0, 1, 1, 1),
    "c": (1, 1, 2, 1),
    "d": (2, 0, 2, 1),
    "e": (1, 0, 2, 0),
    "f": (0, 0, 1, 0),
    "g": (1, 0, 1, 1),
}
_DIGITS = ["abcdef", "bc", "abged", "abgcd", "fgbc", "afgcd", "afgedc", "abc", "abcdefg", "abfgcd"]


def _draw(digit, rng):
    img = np.zeros((28, 28), np.float32)
    h = rng.uniform(7, 9.5)  # half the digit's height
    w = rng.uniform(5, 8)
    top, left = rng.uniform(3, 25 - 2 * h), rng.uniform(5, 23 - w)
    slant = rng.uniform(-0.25, 0.25)
    width = rng.uniform(1.0, 1.8)
    rows, cols = np.mgrid[0:28, 0:28].astype(np.float32)
    for s in _DIGITS[digit]:
        r0, c0, r1, c1 = _SEGMENTS[s]
        for t in np.linspace(0, 1, 12):
            r = top + (r0 + (r1 - r0) * t) * h
            c = left + (c0 + (c1 - c0) * t) * w + slant * (top + 2 * h - r)
            img = np.maximum(img, np.exp(-((rows - r) ** 2 + (cols - c) ** 2) / (2 * width**2)))
    img += rng.normal(0, 0.05, img.shape).astype(np.float32)
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)


class MNIST:
    classes = [
        f"{i} - {name}" for i, name in enumerate("zero one two three four five six seven eight nine".split())
    ]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        self.root, self.train = root, train
        self.transform, self.target_transform = transform, target_transform
        n = int(os.environ.get("STUB_MNIST_TRAIN" if train else "STUB_MNIST_TEST", 1024 if train else 256))
        rng = np.random.default_rng(0 if train else 1)
        self._targets = np.arange(n) % 10
        rng.shuffle(self._targets)
        self._images = (
            np.stack([_draw(int(d), rng) for d in self._targets]) if n else np.zeros((0, 28, 28), np.uint8)
        )

    @property
    def data(self):
        import torch

        return torch.from_numpy(self._images)

    @property
    def targets(self):
        import torch

        return torch.from_numpy(self._targets.astype(np.int64))

    def __len__(self):
        return len(self._targets)

    def __getitem__(self, index):
        img, target = self._images[index], int(self._targets[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target
