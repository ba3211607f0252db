"""torch's tensor and top-level names that PyTorch programs use (issue 18), each checked against torch."""

import pytest

import plast

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("spec", [".4f", "", "e", "+.2f", ">10.3f"])
def test_format_0d_like_torch(spec):
    for value, tdt, pdt in [(3.14159265, torch.float32, plast.float32), (-2.5, torch.float64, plast.float64)]:
        assert format(plast.tensor(value, dtype=pdt), spec) == format(torch.tensor(value, dtype=tdt), spec)
    assert format(plast.tensor(7), "d") == format(torch.tensor(7), "d")
    assert f"{plast.tensor(True)}" == f"{torch.tensor(True)}"


def test_format_nd_only_with_empty_spec_like_torch():
    with pytest.raises(TypeError):
        format(torch.ones(2), ".2f")
    with pytest.raises(TypeError):
        format(plast.ones(2), ".2f")
    assert format(plast.ones(2), "") == str(plast.ones(2))
