"""``@plast.jit``: trace a whole step once, then replay its kernels (trace.py; the replay loop is _replay.pyx).

The public face is ``plast.jit`` (the decorator) and ``plast.compiler`` (what modules and optimizers tell a trace).
"""
