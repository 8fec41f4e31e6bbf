/*
 * hcguard: guard, audit and measure host functions run by the CUDA driver.
 *
 * This is the small public API. The interposer itself needs none of it: it is
 * preloaded (LD_PRELOAD, or `hcguard run`) under an unmodified program. A
 * program that wants a host-copy function of its own, or wants to read
 * hcguard's counters, includes this header and links -lhcguard (or looks the
 * symbols up with dlsym(RTLD_DEFAULT, ...) so that it also runs without it).
 */
#ifndef HCGUARD_H
#define HCGUARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCGUARD_VERSION_MAJOR 0
#define HCGUARD_VERSION_MINOR 1
#define HCGUARD_VERSION_PATCH 0

/*
 * The host-copy record: native endian, native width, 24 bytes on LP64.
 * The same layout as cuda.core's HOST_COPY_FN record and Python's
 * struct.pack("@PPN", dst, src, nbytes). A zero nbytes copies nothing.
 */
typedef struct hcguard_copy_record {
    uintptr_t dst;
    uintptr_t src;
    size_t nbytes;
} hcguard_copy_record;

/*
 * Outcome of checking a record, listed once (in the manner of libuv's
 * UV_ERRNO_MAP): HCGUARD_STATUS_MAP(X) calls X(enumerator, value, name,
 * description) for each, and the enumeration below, hcguard_status_name()
 * and hcguard_status_string() are made from it; a program may expand it
 * too. The values are ABI and the names are stable (they appear in the
 * summary and in the JSON Lines event log, and scripts match on them): a
 * new status is a new row at the end, with the next value; no row is ever
 * renumbered or renamed.
 *
 * "copy-faulted": the record was good when checked, but hcguard's own copy
 * faulted when it ran (a buffer unmapped, mprotect'ed, freed or a file
 * truncated under it meanwhile): the fault was contained, the copy is
 * incomplete, and the program goes on. Run time only.
 */
#define HCGUARD_STATUS_MAP(X)                                                            \
    X(OK, 0, "ok", "the record is valid")                                               \
    X(ERR_NULL_RECORD, 1, "null-record", "the record pointer is NULL")                  \
    X(ERR_RECORD_UNREADABLE, 2, "record-unreadable", "the record's bytes cannot be read") \
    X(ERR_NULL_DST, 3, "null-dst", "destination address is 0 with a non-zero size")     \
    X(ERR_NULL_SRC, 4, "null-src", "source address is 0 with a non-zero size")          \
    X(ERR_DST_OVERFLOW, 5, "dst-overflow",                                              \
      "destination range runs past the end of the address space")                       \
    X(ERR_SRC_OVERFLOW, 6, "src-overflow",                                              \
      "source range runs past the end of the address space")                            \
    X(ERR_OVERLAP, 7, "overlap", "destination range overlaps source range")             \
    X(ERR_DST_UNMAPPED, 8, "dst-unmapped", "part of the destination range is not mapped") \
    X(ERR_SRC_UNMAPPED, 9, "src-unmapped", "part of the source range is not mapped")    \
    X(ERR_DST_NOT_WRITABLE, 10, "dst-not-writable",                                     \
      "part of the destination range is not writable")                                  \
    X(ERR_SRC_NOT_READABLE, 11, "src-not-readable",                                     \
      "part of the source range is not readable")                                       \
    X(ERR_DST_DEVICE, 12, "dst-device", "destination is device memory, not host-accessible") \
    X(ERR_SRC_DEVICE, 13, "src-device", "source is device memory, not host-accessible") \
    X(ERR_COPY_FAULTED, 14, "copy-faulted",                                             \
      "the copy faulted when it ran (a buffer changed since the check): contained, "     \
      "the copy is incomplete")

typedef enum hcguard_status {
#define HCGUARD_STATUS_ENUM_(e, value, name, text) HCGUARD_##e = value,
    HCGUARD_STATUS_MAP(HCGUARD_STATUS_ENUM_)
#undef HCGUARD_STATUS_ENUM_
    HCGUARD_STATUS_COUNT /* one more than the last value */
} hcguard_status;

/* Stable short name ("null-dst") and a one-line description. */
const char *hcguard_status_name(hcguard_status s);
const char *hcguard_status_string(hcguard_status s);

/*
 * The host-copy function: a CUhostFn (void (*)(void *)) that copies
 * record->nbytes bytes from record->src to record->dst. Under hcguard it is
 * never called: hcguard reads the record once, checks that copy of it, and
 * performs the copy itself from it, fault-contained. Without hcguard it
 * copies unchecked, as any host function would.
 */
void hcguard_host_copy(void *record);
/*
 * Fill *rec after the checks cuda.core's pack_host_copy_args makes: null
 * addresses, address overflow, overlapping ranges (touching is fine), and
 * that both ranges are mapped host memory (dst writable, src readable).
 * Returns HCGUARD_OK and fills *rec, or an error and leaves *rec alone.
 */
hcguard_status hcguard_pack_copy(hcguard_copy_record *rec, void *dst,
                                 const void *src, size_t nbytes);

/*
 * Tell hcguard that fn is a host-copy function with the record ABI above
 * (for functions it cannot find by symbol, e.g. in a stripped module).
 * Registering declares that fn does exactly the record's copy and nothing
 * else: under hcguard it is then never called, hcguard performs the copy
 * itself from its checked snapshot of the record. (A function that does
 * more than copy is named with --copy-fn instead: it is called, with the
 * address of hcguard's checked 24-byte snapshot as its argument.)
 * Returns 0 (also for hcguard_host_copy, a copy without registering), or -1
 * if fn is NULL, a libc function (memcpy and the others a host function
 * must not be: refused when launched), or 64 functions are registered
 * already (a function whose library was unloaded gives its place back).
 */
int hcguard_register_copy_fn(void *fn);

/* Counters since start-up; events still in flight on the driver's threads
 * are drained first, so after a stream synchronize the figures are exact. */
typedef struct hcguard_stats {
    uint64_t host_fns_launched; /* host functions that reached the driver     */
    uint64_t host_fns_ran;      /* host functions that ran through hcguard    */
    uint64_t copies_launched;   /* of those launched, recognised host copies  */
    uint64_t copies_ran;        /* copies that ran (the copy was performed)   */
    uint64_t rejected;          /* refused at enqueue (guard) or reported (audit) */
    uint64_t skipped;           /* bad at run time: the copy was not performed */
    uint64_t bytes_copied;
    uint64_t events_dropped;    /* events lost to a full per-thread buffer    */
    uint64_t graph_calls_live;  /* graph host-node calls kept for graphs and
                                   executable graphs that can still run them */
} hcguard_stats;

/* Fills the first size bytes of *out: pass sizeof *out, so that a program
 * built against this header keeps working with a later hcguard whose
 * hcguard_stats has grown (fields are only ever added at the end). Returns
 * 0; -1, writing nothing, if out is NULL or size is 0. */
int hcguard_get_stats(hcguard_stats *out, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* HCGUARD_H */
