"""The tokenizer model file: a small, versioned, line-oriented ASCII text format.

Every plast tokenizer saves to the same layout (version 1)::

    plast-tokenizer 1                  magic and format version
    kind bpe                           "bpe" or "char"
    pattern "<JSON string>"            bpe only: the regex pre-split pattern
    chars <n>                          char only: then n lines, one JSON string each (token id = line order)
    merges <n>                         bpe only: then n lines "<id0> <id1>"; line i creates token 256 + i
    special <n>                        then n lines '<JSON string> <id>'
    end

Strings are JSON with ``ensure_ascii`` (so the file is pure ASCII and a string can never hold a raw newline).
Loading checks everything and raises ``ValueError`` naming the file and line: wrong magic or version, an
unknown kind, a malformed or missing line, a count that does not match, a merge that references a token not
yet defined, special-token ids that are not the next free ids, and anything after ``end`` (which also catches a
file cut short, together with the declared counts). CRLF line ends are read like LF. Writes are atomic: temp file, fsync, ``os.replace``.

A file is untrusted input: the BPE pattern must be one of the known split patterns (by its text; see
``bpe.register_split_pattern``), never a regex compiled from the file; sizes are bounded (the file at
``MAX_FILE_BYTES``, numbers at 18 digits, the vocabulary's bytes at ``bpe.MAX_VOCAB_BYTES``); only a regular
file is read (a FIFO or a device would block or never end). A file that cannot be opened raises the ``OSError``
of ``open`` (which names it); every other failure is a ``ValueError`` naming the file.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile

MAGIC = "plast-tokenizer"
VERSION = 1
MAX_FILE_BYTES = 1 << 30  # a GPT-4-sized vocabulary is about 2 MB in this format
_MAX_DIGITS = 18  # counts and ids: int() of more digits is slow, and no vocabulary needs them


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (ASCII) to ``path`` so that readers see the old file or the new one, never a torn one."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".tok", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="ascii", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    # NOTE: fsync the directory too, so the rename itself survives a crash (not possible on every OS).
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _read_regular_file(path: str) -> bytes:
    # NOTE: O_NONBLOCK, so that opening a FIFO returns at once (and is then refused) instead of blocking
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(
                f"{path}: not a plast tokenizer file (not a regular file: a FIFO, device or directory?)"
            )
        if st.st_size > MAX_FILE_BYTES:
            raise ValueError(
                f"{path}: not a plast tokenizer file ({st.st_size:,} bytes; tokenizer files are at most "
                f"{MAX_FILE_BYTES >> 20} MiB)"
            )
        chunks = []
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                break
            chunks.append(block)
            if sum(map(len, chunks)) > MAX_FILE_BYTES:
                raise ValueError(f"{path}: not a plast tokenizer file (more than {MAX_FILE_BYTES >> 20} MiB)")
        return b"".join(chunks)
    finally:
        os.close(fd)


def dump_string(s: str) -> str:
    """A str as one line of ASCII (JSON, ``ensure_ascii``).

    >>> print(dump_string("a\\n\\u00e9"))
    "a\\n\\u00e9"
    """
    return json.dumps(s, ensure_ascii=True)


class Reader:
    """Walks the lines of a model file, raising ``ValueError`` with the file name and line number."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        raw = _read_regular_file(self.path)
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{self.path}: not a plast tokenizer file (byte {e.start} is not ASCII; "
                f"the format is ASCII text, see plast.data.tokenizers._format)"
            ) from None
        # NOTE: CRLF is accepted (a checkout may convert line endings); strings never hold a raw CR or LF.
        self.lines = text.replace("\r\n", "\n").split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        self.pos = 0

    def error(self, msg: str, lineno: int | None = None) -> ValueError:
        n = self.pos if lineno is None else lineno
        return ValueError(f"{self.path} line {n}: {msg}")

    def next(self, what: str) -> str:
        if self.pos >= len(self.lines):
            raise ValueError(
                f"{self.path}: file ends early (expected {what} at line {self.pos + 1}); truncated?"
            )
        line = self.lines[self.pos]
        self.pos += 1
        return line

    def header(self) -> str:
        """Check magic and version; return the kind."""
        first = self.next("the header 'plast-tokenizer 1'")
        parts = first.split(" ")
        if len(parts) != 2 or parts[0] != MAGIC:
            raise self.error(f"not a plast tokenizer file (expected '{MAGIC} {VERSION}', got {first[:60]!r})")
        if parts[1] != str(VERSION):
            raise self.error(
                f"unsupported tokenizer file version {parts[1]!r}: this plast reads version {VERSION}; "
                f"save the tokenizer again with a matching plast, or upgrade plast-data"
            )
        return self.keyword("kind")

    def keyword(self, key: str) -> str:
        """Read a line '<key> <value>' and return value."""
        line = self.next(f"'{key} ...'")
        k, sep, value = line.partition(" ")
        if k != key or not sep:
            raise self.error(f"expected '{key} <value>', got {line[:60]!r}")
        return value

    def count(self, key: str) -> int:
        value = self.keyword(key)
        if not value.isdigit() or len(value) > _MAX_DIGITS:
            raise self.error(f"expected '{key} <non-negative integer>', got {value[:60]!r}")
        return int(value)

    def string(self, text: str) -> str:
        try:
            s = json.loads(text)
        except json.JSONDecodeError as e:
            raise self.error(f"malformed JSON string {text[:60]!r} ({e.msg})") from None
        except RecursionError:
            raise self.error(f"expected a JSON string, got nested JSON {text[:60]!r}") from None
        if not isinstance(s, str):
            raise self.error(f"expected a JSON string, got {text[:60]!r}")
        return s

    def specials(self, first_id: int) -> dict[str, int]:
        """Read the special-token section; ids must be first_id, first_id + 1, ..."""
        n = self.count("special")
        out: dict[str, int] = {}
        for i in range(n):
            line = self.next(f"special token {i + 1} of {n}")
            text, sep, tid = line.rpartition(" ")
            if not sep or not tid.isdigit() or len(tid) > _MAX_DIGITS:
                raise self.error(f"expected '<JSON string> <id>', got {line[:60]!r}")
            s = self.string(text)
            if s == "":
                raise self.error("special token is the empty string")
            if s in out:
                raise self.error(f"special token {s!r} appears twice")
            if int(tid) != first_id + i:
                raise self.error(
                    f"special token {s!r} has id {tid}, expected {first_id + i} (the next free id)"
                )
            out[s] = int(tid)
        return out

    def end(self) -> None:
        line = self.next("'end'")
        if line != "end":
            raise self.error(f"expected 'end', got {line[:60]!r} (a count above does not match the lines?)")
        if self.pos != len(self.lines):
            raise self.error("unexpected text after 'end'", self.pos + 1)
