/* The report of each bad record found at enqueue: an event with the call
 * site, walked here on the application's thread while the stack exists.
 * The collector merges identical ones and prints the first of each
 * (src/sinks/findings.c). */
#include "check/check.h"

void hcg_report_reject(hcg_api api, CUstream s, void *fn, void *user,
                       hcg_fnkind kind, const hcguard_copy_record *r,
                       hcguard_status why, int refused)
{
    hcg_event e = hcg_event_make(HCG_EV_REJECT, why, api, (uintptr_t)s, (uintptr_t)fn,
                                 (uintptr_t)user);
    e.fnkind = (uint8_t)kind;
    if (!refused)
        e.flags |= HCG_EVF_PASSED;
    if (r) {
        e.dst = r->dst;
        e.src = r->src;
        e.bytes = r->nbytes;
        e.flags |= HCG_EVF_HAVE_RECORD;
    }
    e.caller = hcg_callsite_here();
    hcg_event_push(&e);
}
