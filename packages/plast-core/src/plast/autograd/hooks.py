"""Hooks that run after a backward pass has written ``.grad`` (torch's ``register_post_accumulate_grad_hook`` and
the engine's end-of-backward callback queue); plast.nn.parallel.DistributedDataParallel starts its gradient
allreduces from them.

NOTE: plast computes a backward pass's gradients lazily and realizes them all in one call at its end (DESIGN §2),
so every post-accumulate hook of a pass runs after that realize (last registered first), and then the queued
callbacks run. A hook therefore never overlaps the kernels of the
pass that fired it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

# id(tensor) -> (weakref to the tensor, its hooks): the tensor's C struct has no slot for them, and a dict keyed by
# id keeps the check in backward() to one truth test while nobody registered a hook
post_accumulate_hooks = {}
_callbacks = None  # the callbacks queued during the backward pass now firing hooks, or None outside one


class RemovableHandle:
    """``handle.remove()`` unregisters the hook (torch's torch.utils.hooks.RemovableHandle)."""

    def __init__(self, key, hook):
        self._key, self._hook = key, hook

    def remove(self):
        entry = post_accumulate_hooks.get(self._key)
        if entry is None:
            return
        hooks = entry[1]
        if self._hook in hooks:
            hooks.remove(self._hook)
        if not hooks:
            del post_accumulate_hooks[self._key]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class TensorHookHandle:
    """The handle ``Tensor.register_hook`` returns: ``remove()`` unregisters the hook (torch's RemovableHandle)."""

    def __init__(self, t, hook):
        self._ref, self._hook = weakref.ref(t), hook

    def remove(self):
        t = self._ref()
        hooks = t._hooks if t is not None else None
        if not hooks:
            return
        for i, h in enumerate(hooks):
            if h is self._hook:
                del hooks[i]
                break
        if not hooks:
            t._hooks = None  # no hooks: backward replays apply to t again (autograd/_backward_replay.pyx)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_hook(t, hook):
    """Call ``hook(grad)`` on each gradient computed for `t` (a leaf: before it is accumulated into ``.grad``); a
    returned tensor replaces the gradient. A graph with a hooked tensor is never replayed over (the scan of
    autograd/_backward_replay.pyx refuses it), so the hook runs on every backward."""
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if t._hooks is None:
        t._hooks = []
    t._hooks.append(hook)
    return TensorHookHandle(t, hook)


def register_post_accumulate_grad_hook(t, hook):
    """Call ``hook(t)`` after each backward pass that accumulated a gradient into ``t.grad`` (a leaf)."""
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if not t.is_leaf:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    key = id(t)
    entry = post_accumulate_hooks.get(key)
    if entry is None or entry[0]() is not t:
        # a dead tensor's id may have been reused: its entry goes with it
        entry = post_accumulate_hooks[key] = (weakref.ref(t, lambda _ref, key=key: _drop(key, _ref)), [])
    entry[1].append(hook)
    return RemovableHandle(key, hook)


def _drop(key, ref):
    entry = post_accumulate_hooks.get(key)
    if entry is not None and entry[0] is ref:
        del post_accumulate_hooks[key]


def queue_callback(fn: Callable[[], object]) -> None:
    """Run ``fn()`` once when the backward pass now running its hooks has run all of them (torch's
    ``Variable._execution_engine.queue_callback``). Only callable from a hook."""
    if _callbacks is None:
        raise RuntimeError("queue_callback can only be called from a hook while backward runs")
    _callbacks.append(fn)


def grads_before():
    """What fire() compares against: each hooked tensor's ``.grad`` before a backward pass (None when no tensor has
    a post-accumulate hook, the common case)."""
    if not post_accumulate_hooks:
        return None
    return [
        (ref, ref().grad if ref() is not None else None) for ref, _ in list(post_accumulate_hooks.values())
    ]


def fire(before):
    """Run the post-accumulate hooks of the tensors whose ``.grad`` the pass replaced (each pass writes a new
    ``.grad`` tensor, accumulated or not), then the callbacks they queued. Hooks run in the reverse order of
    registration: a model's parameters, registered first to last, are reached by backward last to first (a
    replayed backward does not say which order it reached them in, so both paths use this one)."""
    global _callbacks
    if before is None:
        return
    changed = []
    for ref, g in before:
        t = ref()
        if t is not None and t.grad is not g:
            changed.append(t)
    if not changed:
        return
    changed.reverse()
    outer, _callbacks = _callbacks, []
    try:
        for t in changed:
            entry = post_accumulate_hooks.get(id(t))
            if entry is not None:
                for h in list(entry[1]):
                    h(t)
        for fn in _callbacks:
            fn()
    finally:
        _callbacks = outer
