from ..graph._graph cimport Node

cdef check_versions(Node node)
