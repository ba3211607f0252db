cdef class Arena:
    cdef readonly str name
    cdef readonly bint transient
    cdef readonly bint grow
    cdef readonly Py_ssize_t capacity      # bytes the arena may hold in chunks (0: unlimited when grow)
    cdef readonly Py_ssize_t reserved      # bytes held in chunks
    cdef readonly Py_ssize_t in_use        # bytes handed out and not yet returned
    cdef readonly Py_ssize_t peak_in_use
    cdef readonly Py_ssize_t generation
    cdef readonly Py_ssize_t n_chunk_allocs
    cdef list _chunks                      # [address, size, bump offset]
    cdef dict _free                        # size class -> list of addresses
    cdef Py_ssize_t _chunk_bytes
    cdef Py_ssize_t _prev_bump              # bytes bumped out of chunks in the previous generation
    cdef readonly Py_ssize_t n_chunk_frees

    cdef _new_chunk(self, Py_ssize_t size)
    cdef Storage alloc(self, Py_ssize_t nbytes)
    cdef void _release(self, Storage s) noexcept


cdef class Storage:
    cdef char *ptr
    cdef readonly Py_ssize_t nbytes
    cdef readonly Py_ssize_t block_bytes
    cdef readonly Arena arena
    cdef readonly Py_ssize_t generation
    cdef readonly object owner             # an object whose memory this storage borrows (from_numpy), or None
    cdef public list readers               # weakrefs to recorded, not yet computed nodes that read this memory
    cdef public Py_ssize_t version         # bumped by every in-place write; autograd checks saved inputs against it
    cdef Py_ssize_t _exports
    # Nonzero while numpy shares this memory with the user: arrays from .numpy()/__array__ are alive (each
    # export's base object counts itself here while any array or view of it lives: _tensor._NumpyExport). numpy writes are invisible to the graph, so ops recorded on such memory
    # are computed at once (graph/_graph.record), reading the values the user sees at that moment, as in torch.
    cdef public Py_ssize_t numpy_refs
    # from_numpy borrowed an array (`owner`): numpy shares the memory while anyone but this storage holds that
    # array or a view of it (its reference count says so), so a batch collated into a fresh array and handed
    # over stays lazy and fusible (graph/_graph._numpy_shared)
    cdef public bint numpy_owner
    # scratch of a backward replay's scan: the scan that last met this memory, the index of the first graph
    # input in it and that input's offset (autograd/_backward_replay.scan)
    cdef unsigned long long _mark
    cdef Py_ssize_t _first, _first_off
    cdef object __weakref__                # a backward replay's recorder tells a live block from a reused id
    cdef inline bint stale(self):
        if self.arena is None:
            # a slice of a planned block (view_of) is as stale as its block
            return isinstance(self.owner, Storage) and (<Storage>self.owner).stale()
        return self.arena.transient and self.generation != self.arena.generation


cdef inline void check_storage(object st) except *:
    """Raise StaleTensorError (Storage.check explains the fix) when `st` was freed by a transient reset; `st` may
    be another device's storage, checked by its own method."""
    if type(st) is Storage:
        if (<Storage>st).stale():
            st.check()
    else:
        st.check()
