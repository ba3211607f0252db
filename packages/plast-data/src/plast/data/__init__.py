"""plast.data: datasets, data loaders and samplers, tokenizers and text corpora.

>>> import plast
>>> from plast.data import DataLoader, TensorDataset
>>> ds = TensorDataset(plast.ones(6, 2), plast.arange(6))
>>> [tuple(x.shape) for x, _ in DataLoader(ds, batch_size=4)]
[(4, 2), (2, 2)]
"""

from plast.data import corpora, tokenizers
from plast.data._worker import WorkerInfo, get_worker_info
from plast.data.collate import default_collate, default_convert
from plast.data.corpora import TokenWindows, python_docs, train_val_split
from plast.data.dataloader import DataLoader
from plast.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from plast.data.sampler import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
)
from plast.data.tokenizers import BPETokenizer, CharTokenizer, WordPieceTokenizer

__all__ = [
    "BPETokenizer",
    "BatchSampler",
    "ChainDataset",
    "CharTokenizer",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "TokenWindows",
    "WordPieceTokenizer",
    "WorkerInfo",
    "corpora",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "python_docs",
    "random_split",
    "tokenizers",
    "train_val_split",
]
