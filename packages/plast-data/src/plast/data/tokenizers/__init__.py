"""Tokenizers: byte-level BPE (``BPETokenizer``), character-level (``CharTokenizer``) and BERT's WordPiece
(``WordPieceTokenizer``, which reads Hugging Face's ``tokenizer.json`` / ``vocab.txt``).

>>> from plast.data.tokenizers import BPETokenizer
>>> tok = BPETokenizer().train("the cat sat on the mat " * 20, vocab_size=270)
>>> tok.decode(tok.encode("the bat")) == "the bat"
True

Model files are versioned ASCII text; see ``plast.data.tokenizers._format`` for the layout. A file is untrusted
input: its BPE split pattern must be a known one (``gpt2``, ``gpt4``, or one registered in code with
``register_split_pattern``), so loading a file never compiles a regex it brings, and its sizes are bounded.
"""

from plast.data.tokenizers._base import Tokenizer, load
from plast.data.tokenizers.bpe import (
    GPT2_SPLIT_PATTERN,
    GPT4_SPLIT_PATTERN,
    BPETokenizer,
    known_split_patterns,
    register_split_pattern,
)
from plast.data.tokenizers.char import CharTokenizer
from plast.data.tokenizers.wordpiece import WordPieceTokenizer

__all__ = [
    "BPETokenizer",
    "CharTokenizer",
    "GPT2_SPLIT_PATTERN",
    "GPT4_SPLIT_PATTERN",
    "Tokenizer",
    "WordPieceTokenizer",
    "known_split_patterns",
    "load",
    "register_split_pattern",
]
