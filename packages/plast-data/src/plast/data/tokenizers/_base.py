"""What every plast tokenizer shares: special tokens (tiktoken's allowed/disallowed rules), batching, id checks."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Literal

import regex

from plast.data.tokenizers import _format

SpecialSet = AbstractSet[str] | Literal["all"]


def as_id_list(ids) -> list:
    """Accept a list/tuple of ints, a numpy array or a tensor (anything with ``tolist``)."""
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
        if isinstance(ids, int):
            raise TypeError("decode() takes a 1-D sequence of token ids, got a 0-d array; wrap it: [int(x)]")
        return ids
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"decode() takes a sequence of token ids, got {type(ids).__name__}")
    if isinstance(ids, list):
        return ids
    return list(ids)


def check_ids(ids: list, vocab_size: int) -> None:
    """Raise IndexError naming the first id outside [0, vocab_size)."""
    if not ids:
        return
    try:
        lo, hi = min(ids), max(ids)
    except TypeError:
        lo, hi = 0, 0  # mixed types: let the lookup below report the bad element
    if lo < 0 or hi >= vocab_size:
        for pos, i in enumerate(ids):
            if not 0 <= i < vocab_size:
                raise IndexError(
                    f"token id {i} at position {pos} is out of range: this tokenizer has ids 0..{vocab_size - 1} "
                    f"(vocab_size={vocab_size}); were the ids made by another tokenizer or a larger model?"
                )


def bad_id_type(ids: list) -> TypeError:
    for pos, i in enumerate(ids):
        if not isinstance(i, int):
            return TypeError(f"token ids must be integers, got {type(i).__name__} {i!r} at position {pos}")
    return TypeError("token ids must be integers")


def special_regex(tokens: Iterable[str]) -> regex.Pattern:
    """A pattern whose ``split`` yields ordinary text and the special tokens alternately."""
    # NOTE: longest first, so that of two overlapping specials the longer one wins.
    alts = "|".join(regex.escape(s) for s in sorted(tokens, key=lambda s: (-len(s), s)))
    return regex.compile("(" + alts + ")")


class Tokenizer:
    """Base class: subclasses implement ``_encode_ordinary``, ``_decode_checked``, ``_base_size`` and the file
    body; everything about special tokens lives here so that all tokenizers treat them alike."""

    KIND = ""

    def __init__(self, special_tokens: Iterable[str] | None = None):
        self._set_special(special_tokens or ())

    # ----- special tokens -------------------------------------------------------------------------------------
    def _check_special(self, tokens: Iterable[str]) -> list[str]:
        if isinstance(tokens, str):
            raise TypeError(f"special_tokens takes a list of strings, got the string {tokens!r}")
        tokens = list(tokens)
        for s in tokens:
            if not isinstance(s, str) or not s:
                raise ValueError(f"special tokens must be non-empty strings, got {s!r}")
        if len(set(tokens)) != len(tokens):
            raise ValueError(f"special tokens must be distinct, got {tokens!r}")
        return tokens

    def _set_special(self, tokens: Iterable[str]) -> None:
        tokens = self._check_special(tokens)
        base = self._base_size()
        self._special: dict[str, int] = {s: base + i for i, s in enumerate(tokens)}
        self._special_inverse = {i: s for s, i in self._special.items()}
        self._split_cache: dict[frozenset, regex.Pattern] = {}

    def _special_regex(self, tokens: frozenset) -> regex.Pattern:
        pat = self._split_cache.get(tokens)
        if pat is None:
            pat = self._split_cache[tokens] = special_regex(tokens)
        return pat

    @property
    def special_tokens(self) -> dict[str, int]:
        """The special tokens and their ids, e.g. ``{'<|endoftext|>': 1023}``."""
        return dict(self._special)

    @property
    def vocab_size(self) -> int:
        """Number of token ids (ordinary and special): ids are ``0 .. vocab_size - 1``."""
        return self._base_size() + len(self._special)

    def __len__(self) -> int:
        return self.vocab_size

    def _resolve(self, which: SpecialSet, what: str) -> frozenset:
        if which == "all":
            return frozenset(self._special)
        if isinstance(which, str):
            raise TypeError(f"{what} must be 'all' or a set of strings, got the string {which!r}")
        which = frozenset(which)
        unknown = which - self._special.keys()
        if unknown:
            raise ValueError(
                f"{what} names {sorted(unknown)!r}, which are not special tokens of this tokenizer "
                f"(it has {sorted(self._special)!r})"
            )
        return which

    # ----- encode ---------------------------------------------------------------------------------------------
    def encode(
        self, text: str, *, allowed_special: SpecialSet = frozenset(), disallowed_special: SpecialSet = "all"
    ) -> list[int]:
        """Encode ``text`` to token ids.

        Special tokens follow tiktoken's rules: a special token's text is encoded as that special token only if it
        is in ``allowed_special`` (a set, or ``"all"``); if it is in ``disallowed_special`` (by default every special
        token that is not allowed) its appearance raises ``ValueError``; otherwise it is encoded as ordinary text.

        >>> from plast.data.tokenizers import CharTokenizer
        >>> tok = CharTokenizer().train("ab", special_tokens=["<eos>"])
        >>> tok.encode("ab<eos>", allowed_special="all")
        [0, 1, 2]
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        allowed = self._resolve(allowed_special, "allowed_special")
        if disallowed_special == "all":
            disallowed = frozenset(self._special) - allowed
        else:
            disallowed = self._resolve(disallowed_special, "disallowed_special")
        if disallowed:
            m = self._special_regex(disallowed).search(text)
            if m:
                tok = m.group(0)
                raise ValueError(
                    f"text contains the special token {tok!r} at index {m.start()}, which is disallowed. "
                    f"To encode it as the special token pass allowed_special={{{tok!r}}} (or 'all'); to encode it as "
                    f"ordinary text pass disallowed_special=() (or a set without it)."
                )
        if not allowed:
            return self._encode_ordinary(text)
        out: list[int] = []
        special = self._special
        for i, part in enumerate(self._special_regex(allowed).split(text)):
            if i % 2:
                out.append(special[part])
            elif part:
                out.extend(self._encode_ordinary(part))
        return out

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` treating special-token text as ordinary text (never raises for it).

        >>> from plast.data.tokenizers import CharTokenizer
        >>> CharTokenizer("<>e", special_tokens=["<e>"]).encode_ordinary("<e>")
        [0, 2, 1]
        """
        if not isinstance(text, str):
            raise TypeError(f"encode_ordinary() takes a str, got {type(text).__name__}")
        return self._encode_ordinary(text)

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> list[list[int]]:
        """``[encode(t) for t in texts]`` with the same special-token arguments.

        >>> from plast.data.tokenizers import BPETokenizer
        >>> BPETokenizer().encode_batch(["hi", "!"])
        [[104, 105], [33]]
        """
        if isinstance(texts, str):
            raise TypeError("encode_batch() takes a sequence of str; for one text call encode()")
        return [
            self.encode(t, allowed_special=allowed_special, disallowed_special=disallowed_special)
            for t in texts
        ]

    # ----- decode ---------------------------------------------------------------------------------------------
    def decode(self, ids, errors: str = "replace") -> str:
        """Decode token ids to text. ``errors`` is as for ``bytes.decode`` ("strict", "replace", "ignore",
        "backslashreplace", "surrogateescape"); ids outside ``0 .. vocab_size - 1`` raise IndexError.
        Takes a list, a numpy array or anything with ``tolist()``.

        >>> from plast.data.tokenizers import BPETokenizer
        >>> tok = BPETokenizer()
        >>> tok.decode([104, 105, 0xE2])
        'hi\ufffd'
        >>> tok.decode([104, 105, 0xE2], errors="ignore")
        'hi'
        """
        ids = as_id_list(ids)
        check_ids(ids, self.vocab_size)
        try:
            return self._decode_checked(ids, errors)
        except TypeError:
            raise bad_id_type(ids) from None

    def decode_batch(self, batch, errors: str = "replace") -> list[str]:
        """``[decode(ids) for ids in batch]``; a 2-D numpy array is a batch of rows.

        >>> from plast.data.tokenizers import BPETokenizer
        >>> BPETokenizer().decode_batch([[104, 105], [33]])
        ['hi', '!']
        """
        if hasattr(batch, "tolist"):
            batch = batch.tolist()
        return [self.decode(ids, errors=errors) for ids in batch]

    # ----- save / load ----------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Save to ``path`` in plast's versioned text format (see ``plast.data.tokenizers._format``); the write
        is atomic (temp file, fsync, rename), so a crash never leaves a torn file.

        >>> import os, tempfile
        >>> from plast.data.tokenizers import BPETokenizer
        >>> tok = BPETokenizer().train("low lower lowest", 260)
        >>> path = os.path.join(tempfile.mkdtemp(), "tok.txt")
        >>> tok.save(path)
        >>> BPETokenizer.load(path).merges == tok.merges
        True
        """
        lines = [f"{_format.MAGIC} {_format.VERSION}", f"kind {self.KIND}"]
        lines += self._body_lines()
        lines.append(f"special {len(self._special)}")
        lines += [f"{_format.dump_string(s)} {i}" for s, i in self._special.items()]
        lines.append("end")
        _format.atomic_write_text(path, "\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Tokenizer:
        """Load a tokenizer saved by ``save`` (see ``save`` for an example); a damaged, hostile or foreign file
        (a split pattern that is not a known one, sizes past the bounds), or one of another kind than ``cls``,
        raises ValueError naming the file and line; a file that cannot be opened, the OSError of ``open``."""
        reader = _format.Reader(path)
        try:
            kind = reader.header()
            if kind not in _KINDS:
                raise reader.error(f"unknown tokenizer kind {kind!r} (known: {sorted(_KINDS)})")
            target = _KINDS[kind]
            if not issubclass(target, cls):
                raise ValueError(
                    f"{reader.path} holds a {kind!r} tokenizer; load it with {target.__name__}.load "
                    f"or plast.data.tokenizers.load"
                )
            tok = target._read_body(reader)
            specials = reader.specials(tok._base_size())
            try:
                tok._set_special(specials)
            except ValueError as e:
                raise reader.error(str(e)) from None
            reader.end()
        except ValueError as e:
            if reader.path in str(e):
                raise
            raise ValueError(f"{reader.path}: {e}") from None
        except (TypeError, KeyError, IndexError, RecursionError, OverflowError, MemoryError) as e:
            # NOTE: the checks above should leave none of these; if one slips through, it still names the file
            raise ValueError(
                f"{reader.path}: not a readable plast tokenizer file ({type(e).__name__}: {e})"
            ) from None
        return tok

    # ----- for subclasses -------------------------------------------------------------------------------------
    def _base_size(self) -> int:
        raise NotImplementedError

    def _encode_ordinary(self, text: str) -> list[int]:
        raise NotImplementedError

    def _decode_checked(self, ids: list, errors: str) -> str:
        raise NotImplementedError

    def _body_lines(self) -> list[str]:
        raise NotImplementedError

    @classmethod
    def _read_body(cls, reader: _format.Reader) -> Tokenizer:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size}, special_tokens={len(self._special)})"


_KINDS: dict[str, type[Tokenizer]] = {}


def register(cls: type[Tokenizer]) -> type[Tokenizer]:
    _KINDS[cls.KIND] = cls
    return cls


def load(path: str | os.PathLike) -> Tokenizer:
    """Load any plast tokenizer file, whatever its kind (BPE or char).

    >>> import os, tempfile
    >>> from plast.data.tokenizers import CharTokenizer, load
    >>> path = os.path.join(tempfile.mkdtemp(), "chars.txt")
    >>> CharTokenizer().train("abc").save(path)
    >>> load(path)
    CharTokenizer(vocab_size=3, special_tokens=0)
    """
    return Tokenizer.load(path)
