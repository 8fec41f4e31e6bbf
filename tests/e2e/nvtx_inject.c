/* A test NVTX tool: the injection library NVTX loads from
 * NVTX_INJECTION64_PATH (InitializeInjectionNvtx2, nvtx3's
 * nvtxDetail/nvtxInit.h). It records the domains made, the strings
 * registered and every range pushed and popped, with its thread, domain,
 * name and payload, and writes them to $HCG_NVTX_OUT at exit, one per line:
 *
 *   domain D NAME
 *   string S D TEXT
 *   push TID D S PAYLOAD_TYPE PAYLOAD DEPTH     (DEPTH: after the push)
 *   pop TID D DEPTH                            (DEPTH: after the pop; -1 unmatched)
 *   ascii TID D TEXT                            (a push named by a plain string)
 *
 * Handles are printed as the indexes of what they name. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wcast-function-type"
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic pop

#define MAX_NAMES 1024
#define MAX_LINES 200000

typedef struct name {
    int domain; /* -1: a domain itself */
    char text[200];
} name;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static name names[MAX_NAMES]; /* domains and strings; a handle is &names[i] */
static unsigned n_names;
static char *lines[MAX_LINES];
static unsigned n_lines, lost;
static _Thread_local int depth;

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&lock);
    if (n_lines < MAX_LINES && (lines[n_lines] = strdup(buf)))
        n_lines++;
    else
        lost++;
    pthread_mutex_unlock(&lock);
}

static long index_of(const void *handle)
{
    const name *n = handle;
    return n >= names && n < names + MAX_NAMES ? n - names : -1;
}

static void *new_name(int domain, const char *text)
{
    pthread_mutex_lock(&lock);
    name *n = n_names < MAX_NAMES ? &names[n_names++] : NULL;
    if (n) {
        n->domain = domain;
        snprintf(n->text, sizeof n->text, "%s", text);
    }
    pthread_mutex_unlock(&lock);
    return n;
}

static long tid(void)
{
    return (long)syscall(SYS_gettid);
}

static nvtxDomainHandle_t domain_create(const char *text)
{
    void *d = new_name(-1, text);
    record("domain %ld %s", index_of(d), text);
    return d;
}

static nvtxStringHandle_t register_string(nvtxDomainHandle_t d, const char *text)
{
    void *s = new_name((int)index_of(d), text);
    record("string %ld %ld %s", index_of(s), index_of(d), text);
    return s;
}

static int push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    depth++;
    unsigned long long payload = a->payloadType ? (unsigned long long)a->payload.ullValue : 0;
    if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
        record("push %ld %ld %ld %d %llu %d", tid(), index_of(d),
               index_of(a->message.registered), a->payloadType, payload, depth);
    else
        record("ascii %ld %ld %s", tid(), index_of(d),
               a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii ? a->message.ascii
                                                                            : "?");
    return depth - 1;
}

static int pop(nvtxDomainHandle_t d)
{
    int was = depth;
    depth = depth > 0 ? depth - 1 : -1;
    record("pop %ld %ld %d", tid(), index_of(d), depth);
    if (depth < 0)
        depth = 0;
    return was ? was - 1 : -2;
}

__attribute__((destructor)) static void write_out(void)
{
    const char *path = getenv("HCG_NVTX_OUT");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f)
        return;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < n_lines; i++) {
        fprintf(f, "%s\n", lines[i]);
        free(lines[i]);
    }
    n_lines = 0;
    if (lost)
        fprintf(f, "lost %u\n", lost);
    pthread_mutex_unlock(&lock);
    fclose(f);
}

static int set(NvtxFunctionTable t, unsigned size, unsigned id, NvtxFunctionPointer fn)
{
    if (id >= size || !t[id])
        return -1;
    *t[id] = fn;
    return 0;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    /* HCG_NVTX_INIT_DELAY_MS: a tool slow to start, which holds up
     * hcguard's own start (its first launch) that long. */
    const char *delay = getenv("HCG_NVTX_INIT_DELAY_MS");
    if (delay)
        usleep((useconds_t)atoi(delay) * 1000);
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable t = NULL;
    unsigned size = 0;
    if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &size) || !t)
        return 0;
    int bad = 0;
    bad |= set(t, size, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)domain_create);
    bad |= set(t, size, NVTX_CBID_CORE2_DomainRegisterStringA,
               (NvtxFunctionPointer)register_string);
    bad |= set(t, size, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)push);
    bad |= set(t, size, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)pop);
    record("init");
    return bad ? 0 : 1;
}
