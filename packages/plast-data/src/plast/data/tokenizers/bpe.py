"""Byte-level BPE with a regex pre-split, trained with incremental pair counts.

Token ids 0..255 are the raw bytes; merge ``i`` (0-based) joins two existing ids into id ``256 + i``; special
tokens take the ids after the merges. Text is split into chunks by the pattern, each chunk is UTF-8 encoded and
merged on its own, so no token ever spans two chunks.

Training (``BPETokenizer.train``):
  * the text is split once; identical chunks are counted and each unique chunk is trained on once, weighted by
    its count;
  * pair counts are built once; a merge then visits only the chunks that hold the merged pair (an index from
    pair to chunks) and updates only the counts of the pairs around each occurrence, (x, a) -> (x, new) and
    (b, y) -> (new, y); a heap with lazy deletion finds the next most frequent pair;
  * ties: among pairs with the highest count the smallest ``(id0, id1)`` wins, so the same text and vocab size
    give the same merges on every run and every machine.

Encoding (``BPETokenizer.encode``) repeatedly merges the pair with the lowest merge id present in a chunk (which
reproduces training's segmentation exactly) and caches the ids of every chunk it has seen.
"""

from __future__ import annotations

import codecs
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from heapq import heapify, heappop, heappush
from itertools import repeat

import regex

from plast.data.tokenizers import _format
from plast.data.tokenizers._base import Tokenizer, as_id_list, bad_id_type, check_ids, register, special_regex

# GPT-2's pre-split: contractions, optionally space-led runs of letters / digits / other, whitespace.
GPT2_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# GPT-4's (cl100k) pre-split: case-insensitive contractions, digits in groups of at most 3, newlines kept apart.
GPT4_SPLIT_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""

# Split patterns a tokenizer *file* may use, by name. A file's pattern is matched against these texts: a file
# never brings a regex of its own, since a hostile one ("(a|aa)+$") makes encode() backtrack for ever. Code that
# trusts a pattern registers it (register_split_pattern); patterns passed in code (BPETokenizer(pattern=...),
# train(pattern=...)) are the caller's own and always accepted.
_KNOWN_PATTERNS: dict[str, str] = {"gpt2": GPT2_SPLIT_PATTERN, "gpt4": GPT4_SPLIT_PATTERN}

# NOTE: bounds on what loading a file may build: merges can double a token's length each time, so 45 merges
# would ask for 2**45 bytes; a real vocabulary's bytes are a few MB.
MAX_VOCAB_BYTES = 1 << 28  # all tokens' bytes together (256 MiB)

_BIG = 1 << 62
_CACHE_LIMIT = 1 << 16  # chunk -> ids entries kept before the cache is cleared
_STREAM_CHARS = 1 << 23  # longer texts are split lazily, chunk by chunk
_SURROGATE = regex.compile(r"[\ud800-\udfff]")


def register_split_pattern(name: str, pattern: str) -> None:
    """Let tokenizer files use `pattern` (found by its text; `name` is for messages). Only patterns you trust:
    a regex with catastrophic backtracking makes ``encode`` run for ever.

    >>> register_split_pattern("words-and-spaces", r"\\S+|\\s+")
    >>> "words-and-spaces" in known_split_patterns()
    True
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_split_pattern: name must be a non-empty str, got {name!r}")
    compile_pattern(pattern)
    if _KNOWN_PATTERNS.get(name, pattern) != pattern:
        raise ValueError(f"register_split_pattern: {name!r} is already registered with another pattern")
    _KNOWN_PATTERNS[name] = pattern


def known_split_patterns() -> dict[str, str]:
    """The split patterns tokenizer files may use, by name (``gpt2``, ``gpt4`` and any registered)."""
    return dict(_KNOWN_PATTERNS)


def _check_known_pattern(pattern: str) -> None:
    if pattern in _KNOWN_PATTERNS.values():
        return
    raise ValueError(
        f"split pattern {pattern[:80]!r} is not a known pattern (known: {', '.join(sorted(_KNOWN_PATTERNS))}): a "
        "tokenizer file may only use a known pattern, because a hostile regex can make encode() run for ever. If "
        "you trust this file, register its pattern first: "
        "plast.data.tokenizers.register_split_pattern(name, pattern)"
    )


def compile_pattern(pattern: str) -> regex.Pattern:
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
    try:
        return regex.compile(pattern)
    except regex.error as e:
        raise ValueError(f"invalid split pattern {pattern!r}: {e}") from None


def split_text(text: str, pattern: regex.Pattern) -> Iterable[str]:
    """Split ``text`` into chunks with ``pattern``. Text the pattern does not match becomes chunks of its own,
    so the chunks always join back to ``text`` (a pattern may leave gaps; the GPT patterns never do).

    >>> list(split_text("it's 2025!", regex.compile(GPT4_SPLIT_PATTERN)))
    ['it', "'s", ' ', '202', '5', '!']
    """
    if not pattern.groups and len(text) <= _STREAM_CHARS:
        chunks = pattern.findall(text)
        if sum(map(len, chunks)) == len(text):
            return chunks
    return _iter_chunks(text, pattern)


def _iter_chunks(text: str, pattern: regex.Pattern) -> Iterable[str]:
    # NOTE: a generator, so that a huge text never holds all its chunks at once (findall is faster but does)
    pos = 0
    for m in pattern.finditer(text):
        s, e = m.span()
        if s > pos:
            yield text[pos:s]
        if e > s:
            yield text[s:e]
        pos = e
    if pos < len(text):
        yield text[pos:]


def _surrogate_error(text: str) -> UnicodeEncodeError:
    m = _SURROGATE.search(text)
    start = m.start() if m else 0
    return UnicodeEncodeError(
        "utf-8",
        text,
        start,
        start + 1,
        "lone surrogate: BPETokenizer encodes text as UTF-8, which cannot hold surrogates; clean the text first, "
        "e.g. text.encode('utf-8', 'replace').decode('utf-8')",
    )


def train_merges(words: list[list[int]], weights: Sequence[int], num_merges: int, first_id: int = 256):
    """Learn up to ``num_merges`` merges on ``words`` (lists of ids, modified in place) weighted by ``weights``.

    Returns the merges as a list of ``(id0, id1)``; merge ``i`` creates id ``first_id + i``. Fewer come back when
    no pair is left. Ties between equally frequent pairs go to the smallest ``(id0, id1)``.

    >>> train_merges([[97, 97, 97, 98, 100, 97, 97, 97, 98, 97, 99]], [1], 3)
    [(97, 97), (97, 98), (256, 257)]
    """
    counts: defaultdict[tuple[int, int], int] = defaultdict(int)
    where: defaultdict[tuple[int, int], list[int]] = defaultdict(list)  # pair -> chunks that may hold it
    for wi, w in enumerate(words):
        c = weights[wi]
        for p in zip(w, w[1:]):
            counts[p] += c
            where[p].append(wi)
    heap = [(-c, p[0], p[1]) for p, c in counts.items()]
    heapify(heap)

    merges: list[tuple[int, int]] = []
    while len(merges) < num_merges:
        # lazy deletion: an entry is current only if it still matches the pair's count
        while heap:
            negc, a, b = heappop(heap)
            if counts.get((a, b)) == -negc:
                break
        else:
            break
        pair = (a, b)
        n = first_id + len(merges)
        merges.append(pair)
        delta: defaultdict[tuple[int, int], int] = defaultdict(int)
        for wi in set(where.pop(pair)):
            w = words[wi]
            c = weights[wi]
            last = len(w) - 1
            out: list[int] = []
            i = 0
            found = False
            while True:
                try:
                    j = w.index(a, i)
                except ValueError:
                    break
                if j < last and w[j + 1] == b:
                    found = True
                    out += w[i:j]
                    # the state is out + [a, b] + w[j+2:]; it becomes out + [n] + w[j+2:]
                    if out:
                        x = out[-1]
                        delta[x, a] -= c
                        delta[x, n] += c
                        where[x, n].append(wi)
                    if j + 1 < last:
                        y = w[j + 2]
                        delta[b, y] -= c
                        delta[n, y] += c
                        where[n, y].append(wi)
                    out.append(n)
                    i = j + 2
                else:
                    out += w[i : j + 1]
                    i = j + 1
            if found:
                out += w[i:]
                words[wi] = out
        del counts[pair]
        delta.pop(pair, None)
        for p, d in delta.items():
            if d:
                c = counts[p] + d
                if c:
                    counts[p] = c
                    heappush(heap, (-c, p[0], p[1]))
                else:
                    del counts[p]
    return merges


def _merge_all(ids: list[int], a: int, b: int, n: int) -> list[int]:
    """Replace every non-overlapping (a, b), left to right, by n."""
    out: list[int] = []
    i = 0
    last = len(ids) - 1
    while True:
        try:
            j = ids.index(a, i)
        except ValueError:
            break
        if j < last and ids[j + 1] == b:
            out += ids[i:j]
            out.append(n)
            i = j + 2
        else:
            out += ids[i : j + 1]
            i = j + 1
    out += ids[i:]
    return out


def bpe_scan(
    ids: list[int], ranks: dict[tuple[int, int], int], merges: list[tuple[int, int]], max_steps: int = _BIG
) -> tuple[list[int], bool]:
    """Apply merges to one chunk by scans: while some pair has a merge, merge every occurrence of the pair with
    the lowest merge id. Stops after ``max_steps`` scans; returns (ids, finished). O(len) per scan, in C for
    the most part: the fast way through long runs that few merges apply to (a line of 10**6 spaces)."""
    get = ranks.get
    for _ in range(max_steps):
        if len(ids) < 2:
            return ids, True
        n = min(map(get, zip(ids, ids[1:]), repeat(_BIG)))
        if n == _BIG:
            return ids, True
        a, b = merges[n - 256]
        ids = _merge_all(ids, a, b, n)
    return ids, False


def bpe_heap(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    """Same result as ``bpe_scan`` in O(len log len): a heap of (merge id, position) over a linked list.

    Popping in (merge id, position) order applies each merge to all its occurrences left to right before any
    later merge (a merge's new pairs always have higher ids), exactly as ``bpe_scan`` does."""
    n = len(ids)
    if n < 2:
        return ids
    ids = list(ids)
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    get = ranks.get
    heap = [(r, i) for i, r in enumerate(map(get, zip(ids, ids[1:]))) if r is not None]
    heapify(heap)
    while heap:
        r, i = heappop(heap)
        j = nxt[i]
        # stale entries: node i was merged away, or the pair starting at i changed since the push
        if ids[i] < 0 or j >= n or get((ids[i], ids[j])) != r:
            continue
        ids[i] = r
        ids[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k < n:
            prv[k] = i
            rk = get((r, ids[k]))
            if rk is not None:
                heappush(heap, (rk, i))
        p = prv[i]
        if p >= 0:
            rp = get((ids[p], r))
            if rp is not None:
                heappush(heap, (rp, p))
    return [t for t in ids if t >= 0]


_LONG_CHUNK = 256  # bytes; longer chunks try a few scans before the heap


@register
class BPETokenizer(Tokenizer):
    """Byte-level BPE tokenizer with a regex pre-split (GPT-4 style by default).

    ``decode(encode(s)) == s`` for every str that UTF-8 can encode; a str holding a lone surrogate (which UTF-8
    cannot encode) raises ``UnicodeEncodeError`` (a ValueError) naming its index.

    >>> from plast.data.tokenizers import BPETokenizer
    >>> tok = BPETokenizer().train("hug pug pun bun hugs " * 10, vocab_size=262)
    >>> tok.encode("hug bun")
    [258, 261, 259]
    >>> tok.decode(tok.encode("hug bun"))
    'hug bun'
    """

    KIND = "bpe"

    def __init__(
        self,
        pattern: str = GPT4_SPLIT_PATTERN,
        merges: Iterable[tuple[int, int]] = (),
        special_tokens: Iterable[str] = (),
    ):
        self._set_merges(pattern, merges)
        super().__init__(special_tokens)

    def _set_merges(self, pattern: str, merges: Iterable[tuple[int, int]]) -> None:
        compiled = compile_pattern(pattern)
        merges = [tuple(m) for m in merges]
        ranks: dict[tuple[int, int], int] = {}
        lengths = [1] * 256
        total = 256
        for i, m in enumerate(merges):
            n = 256 + i
            if len(m) != 2 or not all(isinstance(t, int) and 0 <= t < n for t in m):
                raise ValueError(f"merge {i} is {m!r}; a merge is two ids of existing tokens (0 <= id < {n})")
            if m in ranks:
                raise ValueError(f"merge {i} {m!r} repeats merge {ranks[m] - 256}")
            ranks[m] = n
            lengths.append(lengths[m[0]] + lengths[m[1]])
            total += lengths[-1]
            if total > MAX_VOCAB_BYTES:  # checked on lengths, before any bytes are joined
                raise ValueError(
                    f"merge {i} {m!r} makes a token of {lengths[-1]:,} bytes, and the tokens would take more than "
                    f"{MAX_VOCAB_BYTES >> 20} MiB together (plast.data.tokenizers.bpe.MAX_VOCAB_BYTES); real "
                    "vocabularies take a few MB: a damaged or hostile merge list?"
                )
        table = [bytes([i]) for i in range(256)]
        for a, b in merges:
            table.append(table[a] + table[b])
        self._pattern = pattern
        self._compiled = compiled
        self._merges = merges
        self._ranks = ranks
        self._table = table
        self._cache: dict[str, list[int]] = {}

    def _check_special(self, tokens) -> list[str]:
        tokens = super()._check_special(tokens)
        for s in tokens:
            if _SURROGATE.search(s):
                raise ValueError(f"special token {s!r} holds a lone surrogate, which UTF-8 cannot encode")
        return tokens

    def _set_special(self, tokens) -> None:
        super()._set_special(tokens)
        self._decode_table = self._table + [s.encode("utf-8") for s in self._special]

    def _base_size(self) -> int:
        return 256 + len(self._merges)

    # ----- training -------------------------------------------------------------------------------------------
    def train(
        self,
        text: str,
        vocab_size: int,
        pattern: str | None = None,
        special_tokens: Iterable[str] | None = None,
    ) -> BPETokenizer:
        """Learn merges from ``text`` until the vocabulary has ``vocab_size`` ids (256 bytes + merges + special
        tokens); replaces any previous merges and returns ``self``. ``pattern`` and ``special_tokens`` default
        to the tokenizer's own (for ``BPETokenizer()``: ``GPT4_SPLIT_PATTERN`` and none).

        Special-token text found in ``text`` is cut out before training, so no merge spans or learns it. If the
        text runs out of pairs first, training stops early and ``vocab_size`` is smaller than asked.

        >>> from plast.data.tokenizers import BPETokenizer
        >>> tok = BPETokenizer().train("aaabdaaabac", vocab_size=259, pattern=r"[\\s\\S]+")
        >>> tok.merges
        [(97, 97), (97, 98), (256, 257)]
        """
        if not isinstance(text, str):
            raise TypeError(f"train() takes a str, got {type(text).__name__}")
        pattern = self._pattern if pattern is None else pattern
        special_tokens = self._check_special(self._special if special_tokens is None else special_tokens)
        if not isinstance(vocab_size, int) or vocab_size < 256 + len(special_tokens):
            raise ValueError(
                f"vocab_size must be an int >= 256 + number of special tokens ({256 + len(special_tokens)}), "
                f"got {vocab_size!r}"
            )
        compiled = compile_pattern(pattern)
        if special_tokens:
            pieces = special_regex(special_tokens).split(text)[::2]
        else:
            pieces = [text]
        chunk_counts: Counter[str] = Counter()
        for piece in pieces:
            chunk_counts.update(split_text(piece, compiled))
        try:
            words = [list(chunk.encode("utf-8")) for chunk in chunk_counts]
        except UnicodeEncodeError:
            raise _surrogate_error(text) from None
        weights = list(chunk_counts.values())
        merges = train_merges(words, weights, vocab_size - 256 - len(special_tokens))
        self._set_merges(pattern, merges)
        self._set_special(special_tokens)
        return self

    # ----- encode / decode ------------------------------------------------------------------------------------
    def _encode_chunk(self, chunk: str) -> list[int]:
        ids = list(chunk.encode("utf-8"))
        if len(ids) > _LONG_CHUNK:
            ids, finished = bpe_scan(ids, self._ranks, self._merges, max_steps=8)
            if finished:
                return ids
        return bpe_heap(ids, self._ranks)

    def _encode_ordinary(self, text: str) -> list[int]:
        cache = self._cache
        out: list[int] = []
        try:
            for chunk in split_text(text, self._compiled):
                ids = cache.get(chunk)
                if ids is None:
                    ids = self._encode_chunk(chunk)
                    if len(chunk) <= _LONG_CHUNK:  # long chunks rarely repeat; keep memory bounded
                        if len(cache) >= _CACHE_LIMIT:
                            cache.clear()
                        cache[chunk] = ids
                out += ids
        except UnicodeEncodeError:
            raise _surrogate_error(text) from None
        return out

    def decode_bytes(self, ids) -> bytes:
        """The raw bytes of ``ids`` (no UTF-8 decoding); ids out of range raise IndexError."""
        ids = as_id_list(ids)
        check_ids(ids, self.vocab_size)
        table = self._decode_table
        try:
            return b"".join([table[i] for i in ids])
        except TypeError:
            raise bad_id_type(ids) from None

    def _decode_checked(self, ids: list, errors: str) -> str:
        codecs.lookup_error(errors)  # an unknown handler fails now, not only when bad bytes show up
        table = self._decode_table
        return b"".join([table[i] for i in ids]).decode("utf-8", errors)

    # ----- introspection --------------------------------------------------------------------------------------
    @property
    def pattern(self) -> str:
        """The regex pre-split pattern."""
        return self._pattern

    @property
    def merges(self) -> list[tuple[int, int]]:
        """The merges in order: merge ``i`` made id ``256 + i`` from the pair ``merges[i]``."""
        return list(self._merges)

    @property
    def vocab(self) -> dict[int, bytes]:
        """Every id's bytes (special tokens as their UTF-8 text)."""
        return dict(enumerate(self._decode_table))

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token id."""
        if not 0 <= token_id < self.vocab_size:
            raise IndexError(f"token id {token_id} is out of range 0..{self.vocab_size - 1}")
        return self._decode_table[token_id]

    # ----- file -----------------------------------------------------------------------------------------------
    def _body_lines(self) -> list[str]:
        lines = [f"pattern {_format.dump_string(self._pattern)}", f"merges {len(self._merges)}"]
        lines += [f"{a} {b}" for a, b in self._merges]
        return lines

    @classmethod
    def _read_body(cls, reader: _format.Reader) -> BPETokenizer:
        pattern = reader.string(reader.keyword("pattern"))
        try:
            _check_known_pattern(pattern)
        except ValueError as e:
            raise reader.error(str(e)) from None
        n = reader.count("merges")
        merges = []
        for i in range(n):
            line = reader.next(f"merge {i + 1} of {n}")
            parts = line.split(" ")
            if len(parts) != 2 or not all(p.isdigit() and len(p) <= 18 for p in parts):
                raise reader.error(f"expected '<id0> <id1>' (two non-negative integers), got {line[:60]!r}")
            a, b = int(parts[0]), int(parts[1])
            if a >= 256 + i or b >= 256 + i:
                raise reader.error(
                    f"merge {i} ({a}, {b}) references an unknown id: only ids 0..{255 + i} exist before it"
                )
            merges.append((a, b))
        try:
            return cls(pattern=pattern, merges=merges)
        except ValueError as e:
            raise reader.error(str(e)) from None
