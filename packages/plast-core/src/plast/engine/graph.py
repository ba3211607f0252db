"""Graph nodes and op recording (DESIGN §2): the compiled core lives in engine/_graph.pyx; this module is its
stable import path for the op layer."""

from ._graph import Node, TensorBase, add_readers, record, recorded_count

__all__ = ["Node", "TensorBase", "add_readers", "record", "recorded_count"]
