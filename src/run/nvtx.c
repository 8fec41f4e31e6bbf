/* NVTX ranges for Nsight Systems (HCGUARD_NVTX, --nvtx): each host function
 * that runs is a range in an "hcguard" domain on the thread that runs it,
 * named by its function, with a copy's bytes as the payload. nvtx3 is
 * header-only (the CUDA toolkit's include/nvtx3): it loads the tool's
 * injection library (NVTX_INJECTION64_PATH, which nsys sets) at the first
 * NVTX call, made here at start-up, on the application's thread.
 *
 * Names are registered strings, made at enqueue (hcg_nvtx_name, on the
 * application's thread: a lock, maybe an allocation, once per function),
 * so that the callback thread only pushes and pops: no lock, no
 * allocation of hcguard's own. A fork child keeps the domain and names. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wcast-function-type"
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic pop

#include "run/run.h"

uint8_t hcg_nvtx_on;

static nvtxDomainHandle_t domain;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

/* fn -> its registered name: open addressing, grown under the lock. Only
 * the application's threads use it (at enqueue). */
typedef struct name_slot {
    uintptr_t fn;
    nvtxStringHandle_t name;
} name_slot;
static name_slot *slots;
static size_t n_slots, n_used;

void hcg_nvtx_init(void)
{
    if (!hcg_config_get()->nvtx || hcg_nvtx_on)
        return;
    domain = nvtxDomainCreateA("hcguard");
    if (!domain) { /* no tool attached: nothing would record the ranges */
        hcg_debug("NVTX: no tool attached (NVTX_INJECTION64_PATH is not set, or its library "
                  "did not load): no ranges");
        return;
    }
    hcg_nvtx_on = 1;
    atomic_fetch_or(&hcg_g_launch_rare, HCG_LAUNCH_NVTX); /* the launch names its call */
    hcg_debug("NVTX: host functions are ranges in the 'hcguard' domain");
}

static size_t slot_of(uintptr_t fn, size_t n)
{
    return (size_t)((fn * 0x9e3779b97f4a7c15ull) >> 20) & (n - 1);
}

/* Twice the room (at least 256 slots); 0, or -1 out of memory. */
static int grow(void)
{
    size_t n = n_slots ? 2 * n_slots : 256;
    name_slot *s = calloc(n, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < n_slots; i++) {
        if (!slots[i].fn)
            continue;
        size_t j = slot_of(slots[i].fn, n);
        while (s[j].fn)
            j = (j + 1) & (n - 1);
        s[j] = slots[i];
    }
    free(slots);
    slots = s;
    n_slots = n;
    return 0;
}

/* The name the summary gives fn: its symbol, or "anonymous". */
static nvtxStringHandle_t register_name(uintptr_t fn)
{
    char name[256], obj[8];
    if (hcg_symbolize((const void *)fn, name, sizeof name, obj, sizeof obj) != 0)
        snprintf(name, sizeof name, "anonymous");
    return nvtxDomainRegisterStringA(domain, name);
}

/* fn's slot, or the empty one it would take (names_lock held; room kept). */
static name_slot *slot_find(uintptr_t fn)
{
    size_t i = slot_of(fn, n_slots);
    while (slots[i].fn && slots[i].fn != fn)
        i = (i + 1) & (n_slots - 1);
    return &slots[i];
}

/* The name is made outside the lock: symbolizing reads ELF files (and may
 * unmap, which takes the oracle's lock) and the tool may take its own
 * locks; two threads may then register one function twice, harmlessly. */
void *hcg_nvtx_name(uintptr_t fn)
{
    hcg_fork_register();
    pthread_mutex_lock(&names_lock);
    const name_slot *known = n_slots ? slot_find(fn) : NULL;
    int found = known && known->fn;
    nvtxStringHandle_t h = found ? known->name : NULL;
    pthread_mutex_unlock(&names_lock);
    if (found)
        return h;
    nvtxStringHandle_t made = register_name(fn);
    pthread_mutex_lock(&names_lock);
    if (2 * (n_used + 1) <= n_slots || grow() == 0) {
        name_slot *s = slot_find(fn);
        if (!s->fn) {
            s->fn = fn;
            s->name = made;
            n_used++;
        }
        h = s->name;
    } else {
        h = made; /* out of memory: named, not kept */
    }
    pthread_mutex_unlock(&names_lock);
    return h;
}

/* Held across fork, so that a child finds the table whole; the names it
 * holds stay good (the domain and strings are the tool's). */
void hcg_nvtx_fork_lock(void)
{
    pthread_mutex_lock(&names_lock);
}

void hcg_nvtx_fork_unlock(void)
{
    pthread_mutex_unlock(&names_lock);
}

void hcg_nvtx_after_fork(void)
{
    pthread_mutex_init(&names_lock, NULL);
}

void hcg_nvtx_push(void *name, uint64_t bytes, int copy)
{
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    if (name) {
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = (nvtxStringHandle_t)name;
    } else {
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = "host function";
    }
    if (copy) {
        a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
        a.payload.ullValue = bytes;
    }
    nvtxDomainRangePushEx(domain, &a);
}

void hcg_nvtx_pop(void)
{
    nvtxDomainRangePop(domain);
}
