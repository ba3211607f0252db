"""plast.data: datasets, data loaders, tokenizers and text corpora."""

from plast.data import corpora, tokenizers
from plast.data.corpora import python_docs
from plast.data.tokenizers import BPETokenizer, CharTokenizer

__all__ = ["BPETokenizer", "CharTokenizer", "corpora", "python_docs", "tokenizers"]
