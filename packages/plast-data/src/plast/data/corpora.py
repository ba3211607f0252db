"""Text corpora that need no download.

``python_docs()`` is the text of the standard library's ``pydoc_data.topics``: the help pages of the language
reference, present in every CPython install (about 450 KB; its exact text follows the Python version).
"""

from __future__ import annotations

import functools


@functools.cache
def python_docs() -> str:
    """The values of ``pydoc_data.topics.topics`` joined in sorted key order with a blank line between them.

    >>> from plast.data.corpora import python_docs
    >>> text = python_docs()
    >>> len(text) > 100_000
    True
    """
    try:
        from pydoc_data.topics import topics
    except ImportError as e:  # some distributions strip it
        raise RuntimeError(
            "this Python has no pydoc_data.topics (the standard library's help texts were removed by its "
            "packager); install the full standard library, or use your own text"
        ) from e
    return "\n\n".join(topics[key] for key in sorted(topics))
