/*
 * The copy part of the public API: hcguard's own host-copy function, the
 * checked packer, and the names of the statuses.
 */
#include <string.h>

#include "check/check.h"

/* Unchecked on purpose: under hcguard it is never called (the trampoline
 * performs the copy itself from its checked snapshot of the record);
 * without hcguard it behaves like any host function. */
HCG_EXPORT void hcguard_host_copy(void *record)
{
    const hcguard_copy_record *r = record;
    if (!r || r->nbytes == 0)
        return;
    memcpy((void *)r->dst, (const void *)r->src, r->nbytes);
}

HCG_EXPORT hcguard_status hcguard_pack_copy(hcguard_copy_record *rec,
                                            void *dst, const void *src,
                                            size_t nbytes)
{
    hcguard_copy_record r;
    hcguard_status s;
    if (!rec)
        return HCGUARD_ERR_NULL_RECORD;
    r.dst = (uintptr_t)dst;
    r.src = (uintptr_t)src;
    r.nbytes = nbytes;
    s = hcg_validate_fields(hcg_oracle_process(), &r);
    if (s == HCGUARD_OK)
        *rec = r;
    return s;
}

typedef struct status_text {
    const char *name;
    const char *text;
} status_text;

/* The names are stable (summary, JSON Lines log): never rename one. */
static const status_text g_status[HCGUARD_STATUS_COUNT] = {
    [HCGUARD_OK] = {"ok", "the record is valid"},
    [HCGUARD_ERR_NULL_RECORD] = {"null-record", "the record pointer is NULL"},
    [HCGUARD_ERR_RECORD_UNREADABLE] =
        {"record-unreadable", "the record's bytes cannot be read"},
    [HCGUARD_ERR_NULL_DST] =
        {"null-dst", "destination address is 0 with a non-zero size"},
    [HCGUARD_ERR_NULL_SRC] =
        {"null-src", "source address is 0 with a non-zero size"},
    [HCGUARD_ERR_DST_OVERFLOW] =
        {"dst-overflow", "destination range runs past the end of the address space"},
    [HCGUARD_ERR_SRC_OVERFLOW] =
        {"src-overflow", "source range runs past the end of the address space"},
    [HCGUARD_ERR_OVERLAP] =
        {"overlap", "destination range overlaps source range"},
    [HCGUARD_ERR_DST_UNMAPPED] =
        {"dst-unmapped", "part of the destination range is not mapped"},
    [HCGUARD_ERR_SRC_UNMAPPED] =
        {"src-unmapped", "part of the source range is not mapped"},
    [HCGUARD_ERR_DST_NOT_WRITABLE] =
        {"dst-not-writable", "part of the destination range is not writable"},
    [HCGUARD_ERR_SRC_NOT_READABLE] =
        {"src-not-readable", "part of the source range is not readable"},
    [HCGUARD_ERR_DST_DEVICE] =
        {"dst-device", "destination is device memory, not host-accessible"},
    [HCGUARD_ERR_SRC_DEVICE] =
        {"src-device", "source is device memory, not host-accessible"},
    [HCGUARD_ERR_COPY_FAULTED] =
        {"copy-faulted", "the copy faulted when it ran (a buffer changed since the check): contained, "
                         "the copy is incomplete"},
};

static const status_text *status_entry(hcguard_status s)
{
    if ((unsigned)s >= HCGUARD_STATUS_COUNT || !g_status[s].name)
        return NULL;
    return &g_status[s];
}

HCG_EXPORT const char *hcguard_status_name(hcguard_status s)
{
    const status_text *t = status_entry(s);
    return t ? t->name : "unknown";
}

HCG_EXPORT const char *hcguard_status_string(hcguard_status s)
{
    const status_text *t = status_entry(s);
    return t ? t->text : "unknown status";
}
