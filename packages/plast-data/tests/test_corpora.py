"""Tests for plast.data.corpora."""

from pydoc_data.topics import topics

from plast.data import corpora, python_docs


def test_python_docs_is_the_sorted_topics():
    text = python_docs()
    assert isinstance(text, str)
    assert text == "\n\n".join(topics[k] for k in sorted(topics))
    assert len(text) > 100_000
    assert text.startswith(topics[min(topics)])
    assert text.endswith(topics[max(topics)])


def test_python_docs_is_stable():
    assert corpora.python_docs() is python_docs()  # cached: one copy per process
    assert 'The "assert" statement' in python_docs() or "assert_stmt" in python_docs()


def test_docstring_examples_run():
    import doctest

    result = doctest.testmod(corpora)
    assert result.attempted > 0 and result.failed == 0
