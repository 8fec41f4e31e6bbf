/*
 * Internal interfaces of libhcguard, all layers: for the unit tests,
 * fuzzers, benchmarks and the launcher. hcguard's own sources include the
 * header of their layer instead (docs/ARCHITECTURE.md). Every name is
 * either hcg_-prefixed or static in its file.
 */
#ifndef HCG_H
#define HCG_H

#include "lifecycle/lifecycle.h"

#endif /* HCG_H */
