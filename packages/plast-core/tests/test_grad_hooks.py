"""Post-accumulate-grad hooks (torch's ``Tensor.register_post_accumulate_grad_hook``) and the end-of-backward
callback queue (``plast.autograd.queue_callback``), on the ordinary backward path and on its replays."""

import numpy as np
import pytest
import torch

import plast


def test_hooks_see_the_accumulated_grad_and_callbacks_run_last_on_every_backward():
    w = plast.randn(3, requires_grad=True)
    b = plast.randn(3, requires_grad=True)
    seen = []

    def on_w(t):
        seen.append(("w", t.grad.tolist()))

    def on_b(t):
        seen.append("b")
        plast.autograd.queue_callback(lambda: seen.append("end"))

    hw = w.register_post_accumulate_grad_hook(on_w)
    b.register_post_accumulate_grad_hook(on_b)
    for _ in range(4):  # the third and fourth backward are replays (autograd/backward_replay.py)
        w.grad = b.grad = None
        (w * 2 + b).sum().backward()
    assert seen == ["b", ("w", [2.0] * 3), "end"] * 4
    # accumulation: the hook sees the sum, as torch's does
    seen.clear()
    (w * 2 + b).sum().backward()
    assert seen[1] == ("w", [4.0] * 3)
    hw.remove()
    seen.clear()
    plast.autograd.backward([(w * 2 + b).sum()])
    assert seen == ["b", "end"]


def test_matches_torch_call_count_and_rules():
    wt = torch.ones(2, requires_grad=True)
    wp = plast.ones(2, requires_grad=True)
    counts = {"t": 0, "p": 0}
    wt.register_post_accumulate_grad_hook(lambda t: counts.__setitem__("t", counts["t"] + 1))
    wp.register_post_accumulate_grad_hook(lambda t: counts.__setitem__("p", counts["p"] + 1))
    for _ in range(3):
        (wt * 3).sum().backward()
        (wp * 3).sum().backward()
    assert counts["t"] == counts["p"] == 3
    np.testing.assert_allclose(wp.grad.numpy(), wt.grad.numpy())
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        plast.ones(2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (wp * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="from a hook"):
        plast.autograd.queue_callback(lambda: None)
