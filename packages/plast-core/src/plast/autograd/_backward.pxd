from .._core._structs cimport Node

cdef check_versions(Node node)
