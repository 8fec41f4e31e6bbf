/* Memory: device allocations (each its own PROT_NONE mapping, contents in
 * a shadow buffer), pinned host memory, synchronous copies, and pointer
 * attributes. */
#include "fakecuda.h"

/* ======================================================================
 * Memory.
 * ====================================================================== */
static fc_mem *mem_at(uintptr_t p)
{
    for (fc_mem *m = fc_state.mems; m; m = m->next)
        if (p >= m->base && p - m->base < m->size)
            return m;
    return NULL;
}

/* Does [p, p + n) touch device-only memory? */
static int mem_touches_device(uintptr_t p, size_t n)
{
    for (fc_mem *m = fc_state.mems; m; m = m->next)
        if (m->device && p < m->base + m->size && m->base < p + n)
            return 1;
    return 0;
}

void fc_mem_release(fc_mem *m)
{
    munmap((void *)m->base, m->map_size);
    free(m->shadow);
    free(m);
}

/* Each allocation is its own mapping: device memory PROT_NONE (the host
 * faults on it), pinned host memory read/write. */
static CUresult mem_alloc(size_t size, int device, uintptr_t *out)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > SIZE_MAX - page)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fc_mem *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->map_size = (size + page - 1) / page * page;
    void *p = mmap(NULL, m->map_size, device ? PROT_NONE : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED || (device && !(m->shadow = calloc(1, size)))) {
        if (p != MAP_FAILED)
            munmap(p, m->map_size);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->device = device;
    m->base = (uintptr_t)p;
    m->size = size;
    m->buffer_id = fc_id();
    fc_lock();
    m->ctx = fc_cur_ctx();
    if (m->ctx) {
        m->next = fc_state.mems;
        fc_state.mems = m;
    }
    fc_unlock();
    if (!m->ctx) {
        fc_mem_release(m);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *out = m->base;
    return CUDA_SUCCESS;
}

static CUresult mem_free(uintptr_t base, int device)
{
    fc_lock();
    fc_mem **pp = &fc_state.mems;
    while (*pp && !((*pp)->base == base && (*pp)->device == device))
        pp = &(*pp)->next;
    fc_mem *m = *pp;
    if (m)
        *pp = m->next;
    fc_unlock();
    if (!m)
        return CUDA_ERROR_INVALID_VALUE;
    fc_mem_release(m);
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    FC_ENTER();
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult r = mem_alloc(bytesize, 1, &p);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    return r;
}

FC_API CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    FC_ENTER();
    if (dptr == 0)
        return CUDA_SUCCESS;
    return mem_free((uintptr_t)dptr, 1);
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned flags)
{
    const unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                           CU_MEMHOSTALLOC_WRITECOMBINED;
    FC_ENTER();
    if (!pp || (flags & ~known))
        return CUDA_ERROR_INVALID_VALUE;
    if (bytesize == 0) { /* measured: success, and no memory */
        *pp = NULL;
        return CUDA_SUCCESS;
    }
    uintptr_t p;
    CUresult r = mem_alloc(bytesize, 0, &p);
    if (r == CUDA_SUCCESS)
        *pp = (void *)p;
    return r;
}

FC_API CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return host_alloc(pp, bytesize, 0);
}

FC_API CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize,
                                       unsigned int Flags)
{
    return host_alloc(pp, bytesize, Flags);
}

FC_API CUresult CUDAAPI cuMemFreeHost(void *p)
{
    FC_ENTER();
    if (!p)
        return CUDA_SUCCESS; /* what a zero-size cuMemAllocHost gave */
    return mem_free((uintptr_t)p, 0);
}

/* Where the bytes of [p, p + n) are: in the shadow of the device
 * allocation that holds all of it, or, for host memory, at p. NULL when the
 * range is partly device memory, or is not device memory but must be. */
static unsigned char *bytes_of(uintptr_t p, size_t n, int need_device)
{
    fc_mem *m = mem_at(p);
    if (m && m->device)
        return n <= m->size - (p - m->base) ? m->shadow + (p - m->base) : NULL;
    if (need_device || !p || p > UINTPTR_MAX - n || mem_touches_device(p, n))
        return NULL;
    return (unsigned char *)p;
}

/* A synchronous copy on the default stream: the work enqueued before it
 * on that stream runs first (on the legacy stream, all earlier work). The
 * host side may be device memory too, as with the real driver's unified
 * addressing. */
static CUresult copy_sync(uintptr_t dev, void *host, size_t n, int to_device,
                          int ptds)
{
    FC_ENTER();
    if (n == 0)
        return CUDA_SUCCESS;
    fc_lock();
    fc_stream *s;
    CUresult r = fc_stream_get(NULL, ptds, &s);
    if (r == CUDA_SUCCESS)
        r = s->cap_status ? fc_capture_forbid(s)
                          : fc_wait_done(ptds ? s->last_seq : fc_state.enq_seq);
    if (r == CUDA_SUCCESS) {
        unsigned char *d = bytes_of(dev, n, 1), *h = bytes_of((uintptr_t)host, n, 0);
        if (d && h)
            memmove(to_device ? d : h, to_device ? h : d, n);
        else
            r = CUDA_ERROR_INVALID_VALUE;
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice,
                                        const void *srcHost, size_t ByteCount)
{
    return copy_sync((uintptr_t)dstDevice, (void *)(uintptr_t)srcHost,
                     ByteCount, 1, 0);
}

FC_API CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice,
                                             const void *srcHost,
                                             size_t ByteCount)
{
    return copy_sync((uintptr_t)dstDevice, (void *)(uintptr_t)srcHost,
                     ByteCount, 1, 1);
}

FC_API CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice,
                                        size_t ByteCount)
{
    return copy_sync((uintptr_t)srcDevice, dstHost, ByteCount, 0, 0);
}

FC_API CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dstHost,
                                             CUdeviceptr srcDevice,
                                             size_t ByteCount)
{
    return copy_sync((uintptr_t)srcDevice, dstHost, ByteCount, 0, 1);
}

/* ======================================================================
 * Pointer attributes.
 * ====================================================================== */

/* Write attribute a of address p, inside allocation m, or m NULL for
 * memory the driver does not know. Returns CUDA_SUCCESS; or
 * CUDA_ERROR_INVALID_VALUE when the value does not exist for this memory
 * (what the plural form writes for it was still written); or
 * CUDA_ERROR_NOT_SUPPORTED for an attribute not modelled (nothing written).
 * Sizes and the values for unknown memory are the real driver's (measured):
 * booleans are 4 bytes; for unknown memory the host pointer is p itself,
 * the device ordinal is -2 and the range is not written. */
static CUresult attr_write(CUpointer_attribute a, void *data, const fc_mem *m,
                           uintptr_t p)
{
    CUresult ok = m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: {
        CUcontext v = m ? (CUcontext)m->ctx : NULL;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: {
        unsigned v = !m ? 0u : m->device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: {
        CUdeviceptr v = m ? (CUdeviceptr)p : 0;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: {
        void *v = m && m->device ? NULL : (void *)p;
        memcpy(data, &v, sizeof v);
        return m && !m->device ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_MAPPED: {
        unsigned v = m && a == CU_POINTER_ATTRIBUTE_MAPPED;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
        int v = m ? 0 : -2;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: {
        unsigned long long v = m ? m->buffer_id : 0;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: {
        CUdeviceptr v = m ? (CUdeviceptr)m->base : 0;
        if (m)
            memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: {
        size_t v = m ? m->size : 0;
        if (m)
            memcpy(data, &v, sizeof v);
        return ok;
    }
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

FC_API CUresult CUDAAPI cuPointerGetAttribute(void *data,
                                              CUpointer_attribute attribute,
                                              CUdeviceptr ptr)
{
    FC_ENTER();
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    const fc_mem *m = mem_at((uintptr_t)ptr);
    CUresult r = m ? attr_write(attribute, data, m, (uintptr_t)ptr)
                   : CUDA_ERROR_INVALID_VALUE;
    fc_unlock();
    return r;
}

/* Unknown memory is not an error here: it gets the values described at
 * attr_write (mostly zero). Attributes not modelled are left as the caller
 * set them. */
FC_API CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
                                               CUpointer_attribute *attributes,
                                               void **data, CUdeviceptr ptr)
{
    FC_ENTER();
    if (numAttributes && (!attributes || !data))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; i++)
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    const fc_mem *m = mem_at((uintptr_t)ptr);
    for (unsigned i = 0; i < numAttributes; i++)
        (void)attr_write(attributes[i], data[i], m, (uintptr_t)ptr);
    fc_unlock();
    return CUDA_SUCCESS;
}

