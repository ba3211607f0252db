"""@plast.jit: whole-step tracing and replay (DESIGN §2.5).

Not built yet: it arrives with "plast-core engine II" (plan cache, liveness planner, fusion). Until then the
decorator refuses loudly instead of pretending to compile.
"""

_tracing = False


def tracing():
    """True while a @plast.jit function is being traced."""
    return _tracing


def note_mutation(node):
    """Called for every in-place kernel run (fused optimizer updates) so a trace can replay it. No-op until
    jit lands."""


def jit(fn=None, **options):
    raise NotImplementedError(
        "plast.jit is not implemented yet: it lands with the 'plast-core engine II' issue (plan cache, "
        "liveness planner, fusion, whole-step replay). Call the function without @plast.jit meanwhile."
    )
