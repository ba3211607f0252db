"""The op layer: argument checks, shape and dtype rules, and recording of nodes (DESIGN §2, §4).

Each module here is one family of ops and lists its public functions in ``__all__``; plast/__init__.py imports
them by name (``plast.add``, ``plast.softmax``, ...) and Tensor's op methods in _tensor.py are the same
functions. The op table itself is registry.py.
"""
