/* The base layer's enumerations, shared by every layer above it: the kinds
 * of host function, the entry points that enqueue them, the kinds of event
 * and of audit finding. Each is listed once, in its .def file; the
 * enumerations here and their names (names.c) are made from it. */
#ifndef HCG_NAMES_H
#define HCG_NAMES_H

typedef enum hcg_fnkind {
#define HCG_FNKIND(e, name) HCG_FN_##e,
#include "base/fnkinds.def"
#undef HCG_FNKIND
    HCG_FN_KIND_COUNT
} hcg_fnkind;

static inline int hcg_fnkind_is_copy(hcg_fnkind k)
{
    return k >= HCG_FN_COPY_HCGUARD && k <= HCG_FN_COPY_REGISTERED;
}
const char *hcg_fnkind_name(hcg_fnkind k); /* "ordinary", "hcguard_host_copy", ... */

typedef enum hcg_api {
#define HCG_API(e, name) HCG_API_##e,
#include "base/apis.def"
#undef HCG_API
    HCG_API_COUNT
} hcg_api;
const char *hcg_api_name(hcg_api a);

typedef enum hcg_evkind {
    HCG_EV_NONE_ = 0,
#define HCG_EVKIND(e, name) HCG_EV_##e,
#include "base/evkinds.def"
#undef HCG_EVKIND
} hcg_evkind;
const char *hcg_evkind_name(hcg_evkind k); /* "run", ...; "unknown" */

typedef enum hcg_finding {
    HCG_FIND_NONE_ = 0,
#define HCG_FINDING(e, name) HCG_FIND_##e,
#include "base/findings.def"
#undef HCG_FINDING
    HCG_FIND_COUNT
} hcg_finding;
const char *hcg_finding_name(hcg_finding f);

#endif /* HCG_NAMES_H */
