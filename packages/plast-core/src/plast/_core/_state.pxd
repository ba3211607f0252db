# Reads of the engine's mode flags (autograd_state.grad_enabled, jit._tape, ...) straight from their modules'
# dicts: `module.attr` from compiled code is a generic attribute lookup on the module (~280 instructions), and
# the recorder and the replays read these flags on every op call. A module keeps `cdef dict _AG =
# autograd_state.__dict__` (and so on) and passes it here; assignments to the module attribute land in that
# dict, so the read sees them.

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject_IsTrue
from cpython.ref cimport PyObject

cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident() nogil


cdef inline bint flag(dict ns, str name) except -1:
    """bool(ns[name]) (False when absent)."""
    cdef PyObject *v = PyDict_GetItem(ns, name)
    if v == NULL:
        return False
    if <object>v is True:
        return True
    if <object>v is False:
        return False
    return PyObject_IsTrue(<object>v)


cdef inline bint is_set(dict ns, str name) noexcept:
    """ns[name] exists and is not None."""
    cdef PyObject *v = PyDict_GetItem(ns, name)
    return v != NULL and <object>v is not None


cdef inline bint grad_on(dict ns, unsigned long owner) except -1:
    """The calling thread's grad mode (_core/grad_mode.py, whose __dict__ is `ns` and whose `_owner` is `owner`):
    the module attribute on the owner thread, which is one pthread_self() compare away; any other thread asks
    is_grad_enabled() (its threading.local)."""
    if PyThread_get_thread_ident() == owner:
        return flag(ns, "grad_enabled")
    return PyObject_IsTrue((<object>PyDict_GetItem(ns, "is_grad_enabled"))())
