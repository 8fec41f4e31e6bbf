/* The names of the base layer's enumerations, from their .def files. */
#include "base/base.h"
#include "base/names.h"

const char *hcg_fnkind_name(hcg_fnkind k)
{
    static const char *const names[HCG_FN_KIND_COUNT] = {
#define HCG_FNKIND(e, name) [HCG_FN_##e] = name,
#include "base/fnkinds.def"
#undef HCG_FNKIND
    };
    return (unsigned)k < HCG_FN_KIND_COUNT ? names[k] : "unknown";
}

const char *hcg_api_name(hcg_api a)
{
    static const char *const names[HCG_API_COUNT] = {
#define HCG_API(e, name) [HCG_API_##e] = name,
#include "base/apis.def"
#undef HCG_API
    };
    return (unsigned)a < HCG_API_COUNT ? names[a] : "unknown";
}

const char *hcg_evkind_name(hcg_evkind k)
{
    static const char *const names[] = {
#define HCG_EVKIND(e, name) [HCG_EV_##e] = name,
#include "base/evkinds.def"
#undef HCG_EVKIND
    };
    return (unsigned)k < sizeof names / sizeof names[0] && names[k] ? names[k] : "unknown";
}

const char *hcg_finding_name(hcg_finding f)
{
    static const char *const names[HCG_FIND_COUNT] = {
#define HCG_FINDING(e, name) [HCG_FIND_##e] = name,
#include "base/findings.def"
#undef HCG_FINDING
    };
    return (unsigned)f < HCG_FIND_COUNT && names[f] ? names[f] : "unknown";
}
