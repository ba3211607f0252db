"""A small stand-in for torchvision (test scaffolding for bench/torch_programs): ``datasets.MNIST`` gives synthetic
28x28 digits drawn from seven-segment strokes, and ``transforms`` has Compose, ToTensor and Normalize. It imports
``torch`` only when used, so it runs on the real torch and under ``python -m plast.torch`` alike."""

from . import datasets, transforms

__version__ = "0.0.0+stub"
