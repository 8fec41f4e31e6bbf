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

/* From the one list in hcguard.h; a value left out reads "unknown". */
static const status_text g_status[HCGUARD_STATUS_COUNT] = {
#define STATUS_TEXT(e, value, name, text) [HCGUARD_##e] = {name, text},
    HCGUARD_STATUS_MAP(STATUS_TEXT)
#undef STATUS_TEXT
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
