# cython: language_level=3
"""A stand-in of cuda.core 1.3.0's extension module cuda.core._host_callback
(built at test time by core_host_copy.py): a noexcept nogil copy function
reading the native {dst, src, nbytes} record (struct.pack("@PPN", ...)),
and HOST_COPY_FN, a ctypes function pointer object holding its address."""
from libc.stdint cimport uintptr_t
from libc.string cimport memcpy
import ctypes

cdef struct _record:
    uintptr_t dst
    uintptr_t src
    size_t nbytes

cdef void _host_copy(void* data) noexcept nogil:
    cdef const _record* r = <const _record*>data
    if r.nbytes:
        memcpy(<void*>r.dst, <const void*>r.src, r.nbytes)

HOST_COPY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(<uintptr_t>&_host_copy)
