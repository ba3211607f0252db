"""A character-level tokenizer for tiny demos: one id per distinct character of the training text."""

from __future__ import annotations

from collections.abc import Iterable

from plast.data.tokenizers import _format
from plast.data.tokenizers._base import Tokenizer, register, special_regex


@register
class CharTokenizer(Tokenizer):
    """One token per character; ids follow the characters' code points (sorted), special tokens come after.

    Works on str, not bytes, so any str round-trips (lone surrogates included); a character outside the
    vocabulary raises ValueError. ``decode`` accepts ``errors`` only for API parity with BPETokenizer.

    >>> from plast.data.tokenizers import CharTokenizer
    >>> tok = CharTokenizer().train("hello")
    >>> tok.encode("hell"), tok.vocab_size
    ([1, 0, 2, 2], 4)
    >>> tok.decode([1, 3])
    'ho'
    """

    KIND = "char"

    def __init__(self, chars: Iterable[str] = (), special_tokens: Iterable[str] = ()):
        self._set_chars(chars)
        super().__init__(special_tokens)

    def _set_chars(self, chars: Iterable[str]) -> None:
        chars = list(chars)
        for c in chars:
            if not isinstance(c, str) or len(c) != 1:
                raise ValueError(f"CharTokenizer's vocabulary holds single characters, got {c!r}")
        if len(set(chars)) != len(chars):
            raise ValueError("CharTokenizer's vocabulary repeats a character")
        self._chars = chars
        self._index = {c: i for i, c in enumerate(chars)}

    def train(self, text: str, special_tokens: Iterable[str] | None = None) -> CharTokenizer:
        """Take the vocabulary from the distinct characters of ``text`` (special-token text cut out first);
        returns ``self``. ``special_tokens`` defaults to the tokenizer's own."""
        if not isinstance(text, str):
            raise TypeError(f"train() takes a str, got {type(text).__name__}")
        special_tokens = self._check_special(self._special if special_tokens is None else special_tokens)
        if special_tokens:
            text = "".join(special_regex(special_tokens).split(text)[::2])
        self._set_chars(sorted(set(text)))
        self._set_special(special_tokens)
        return self

    @property
    def chars(self) -> list[str]:
        """The vocabulary's characters; id ``i`` is ``chars[i]``."""
        return list(self._chars)

    def _base_size(self) -> int:
        return len(self._chars)

    def _encode_ordinary(self, text: str) -> list[int]:
        index = self._index
        try:
            return [index[c] for c in text]
        except KeyError:
            for pos, c in enumerate(text):
                if c not in index:
                    raise ValueError(
                        f"character {c!r} (U+{ord(c):04X}) at index {pos} is not in this CharTokenizer's "
                        f"vocabulary of {len(self._chars)} characters; train it on text that contains it"
                    ) from None
            raise

    def _decode_checked(self, ids: list, errors: str) -> str:
        n = len(self._chars)
        chars, inverse = self._chars, self._special_inverse
        return "".join([chars[i] if i < n else inverse[i] for i in ids])

    def _body_lines(self) -> list[str]:
        return [f"chars {len(self._chars)}"] + [_format.dump_string(c) for c in self._chars]

    @classmethod
    def _read_body(cls, reader: _format.Reader) -> CharTokenizer:
        n = reader.count("chars")
        chars = []
        for i in range(n):
            line = reader.next(f"character {i + 1} of {n}")
            c = reader.string(line)
            if len(c) != 1:
                raise reader.error(f"expected one character, got {c!r}")
            chars.append(c)
        try:
            return cls(chars)
        except ValueError as e:
            raise reader.error(str(e)) from None
