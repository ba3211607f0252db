"""Tests for plast.data.corpora."""

from pydoc_data.topics import topics

import numpy as np
import pytest

import plast
from plast.data import DataLoader, RandomSampler, TokenWindows, corpora, python_docs, train_val_split


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


# ---- TokenWindows and train_val_split ------------------------------------------------------------------------


def test_windows_are_next_token_pairs():
    ids = np.arange(100, dtype=np.int64) * 3
    ds = TokenWindows(ids, block_size=8, stride=5)
    assert len(ds) == (100 - 8 - 1) // 5 + 1
    for i in (0, 7, len(ds) - 1, -1):
        x, y = ds[i]
        s = (i % len(ds)) * 5
        assert x.dtype == np.int64 and x.shape == (8,)
        np.testing.assert_array_equal(x, ids[s : s + 8])
        np.testing.assert_array_equal(y, ids[s + 1 : s + 9])
    with pytest.raises(IndexError):
        ds[len(ds)]


def test_default_stride_does_not_overlap_and_last_window_fits():
    ds = TokenWindows(list(range(17)), block_size=4)
    assert len(ds) == 4  # starts 0, 4, 8, 12; the last target is id 16
    assert ds[3][1].tolist() == [13, 14, 15, 16]
    assert len(TokenWindows(list(range(5)), block_size=4)) == 1


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="too short"):
        TokenWindows([1, 2, 3], block_size=3)
    with pytest.raises(ValueError, match="block_size"):
        TokenWindows([1, 2, 3], block_size=0)
    with pytest.raises(ValueError, match="stride"):
        TokenWindows(list(range(10)), block_size=2, stride=0)
    with pytest.raises(ValueError, match="1-D"):
        TokenWindows(np.zeros((3, 3), dtype=np.int64), block_size=2)
    with pytest.raises(TypeError, match="integers"):
        TokenWindows(np.zeros(10), block_size=2)


def test_batch_equals_rows():
    ds = TokenWindows(plast.arange(50), block_size=6, stride=1)
    idx = [3, 0, 43, 3]
    x, y = ds.batch(idx)
    assert x.shape == y.shape == (4, 6)
    for r, i in enumerate(idx):
        np.testing.assert_array_equal(x[r], ds[i][0])
        np.testing.assert_array_equal(y[r], ds[i][1])


def test_loader_batches_are_deterministic_and_resume_mid_epoch():
    ids = np.arange(400, dtype=np.int64) % 37
    ds = TokenWindows(ids, block_size=8, stride=3)

    def loader():
        return DataLoader(
            ds, batch_size=4, shuffle=True, drop_last=True, generator=plast.Generator().manual_seed(5)
        )

    full = [x.numpy().copy() for x, _ in loader()]
    again = [x.numpy().copy() for x, _ in loader()]
    assert all(np.array_equal(a, b) for a, b in zip(full, again))
    first = loader()
    it = iter(first)
    for _ in range(7):
        next(it)
    state = first.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)
    rest = [x.numpy().copy() for x, _ in resumed]
    assert len(rest) == len(full) - 7
    assert all(np.array_equal(a, b) for a, b in zip(rest, full[7:]))
    x, y = next(iter(loader()))
    assert x.shape == (4, 8) and x.dtype == plast.int64
    np.testing.assert_array_equal(x.numpy()[:, 1:], y.numpy()[:, :-1])


def test_random_offsets_like_get_batch():
    ds = TokenWindows(np.arange(1000), block_size=16, stride=1)
    sampler = RandomSampler(ds, replacement=True, num_samples=64, generator=plast.Generator().manual_seed(0))
    starts = [int(x[0, 0]) for x, _ in DataLoader(ds, batch_size=1, sampler=sampler)]
    assert len(starts) == 64 and len(set(starts)) > 50
    assert all(0 <= s <= 1000 - 17 for s in starts)


def test_train_val_split_by_position():
    ids = np.arange(1000)
    train, val = train_val_split(ids, val_fraction=0.1)
    assert len(train) == 900 and len(val) == 100
    np.testing.assert_array_equal(np.concatenate([train, val]), ids)
    train, val = train_val_split(list(range(5)), val_fraction=0.0)
    assert len(train) == 5 and len(val) == 0
    with pytest.raises(ValueError, match="val_fraction"):
        train_val_split(ids, val_fraction=1.0)
