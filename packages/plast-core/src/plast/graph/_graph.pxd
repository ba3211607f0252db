# The recorder's compiled entry points (the structs they make are _core/_structs.pxd's).

cpdef add_readers(object holder, object refs)
cpdef list record(object op, object inputs, object args, object specs, object device)
cpdef type tensor_class()
cpdef object convert(object x, object dtype)
