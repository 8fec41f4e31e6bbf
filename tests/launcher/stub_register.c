/*
 * Stands in for libhcguard.so under the Python hook's tests: records what
 * hcguard_register_copy_fn was given, and offers a function whose address
 * a fake cuda.core exports as HOST_COPY_FN.
 */
#include <stddef.h>

#include "hcguard.h"

void *hcg_stub_registered(void);
int hcg_stub_count(void);
void hcg_stub_copy(void *record);

static void *registered;
static int count;

int hcguard_register_copy_fn(void *fn)
{
    if (!fn)
        return -1;
    registered = fn;
    count++;
    return 0;
}

void *hcg_stub_registered(void) { return registered; }
int hcg_stub_count(void) { return count; }
void hcg_stub_copy(void *record) { (void)record; }
