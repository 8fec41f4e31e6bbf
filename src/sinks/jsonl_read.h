/* A strict reader of hcguard's own event log (HCGUARD_LOG, src/sinks/jsonl.c):
 * one flat JSON object per line, the fields README's log section names.
 * For tools that read a log back (`hcguard report`) and for tests. */
#ifndef HCG_JSONL_READ_H
#define HCG_JSONL_READ_H

#include <stddef.h>
#include <stdint.h>

/* A line longer than this is refused (the writer's bound is far below). */
#define HCG_LOGREC_LINE_MAX 8192

typedef enum hcg_logrec_kind {
    HCG_LOGREC_OTHER = 0, /* an event a newer writer added: skipped by the file reader */
    HCG_LOGREC_RUN = 1,
    HCG_LOGREC_SKIP,
    HCG_LOGREC_REJECT,
    HCG_LOGREC_FINDING,
    HCG_LOGREC_HEADER     /* the first line of each process (docs/LOG.md) */
} hcg_logrec_kind;

/* The newest schema (docs/LOG.md) this reader knows: a header with a
 * higher one stops hcg_logrec_read_fd. */
#define HCG_LOGREC_SCHEMA 1

/* hcg_loghdr's room for the rank (hcg_logrec has the same, so that both
 * parsers are one). */
#define HCG_LOGHDR_RANK_CAP 32

/* Bits of hcg_logrec.have: which fields the line held. */
enum {
    HCG_LR_EVENT = 1u << 0, HCG_LR_PID = 1u << 1, HCG_LR_SEQ = 1u << 2,
    HCG_LR_API = 1u << 3, HCG_LR_FN = 1u << 4, HCG_LR_FN_NAME = 1u << 5,
    HCG_LR_FN_KIND = 1u << 6, HCG_LR_USER = 1u << 7, HCG_LR_STREAM = 1u << 8,
    HCG_LR_TID = 1u << 9, HCG_LR_T_ENQUEUE = 1u << 10, HCG_LR_T_START = 1u << 11,
    HCG_LR_T_END = 1u << 12, HCG_LR_DURATION = 1u << 13, HCG_LR_DST = 1u << 14,
    HCG_LR_SRC = 1u << 15, HCG_LR_BYTES = 1u << 16, HCG_LR_GBPS = 1u << 17,
    HCG_LR_GRAPH = 1u << 18, HCG_LR_NODE = 1u << 19, HCG_LR_REASON = 1u << 20,
    HCG_LR_FINDING = 1u << 21, HCG_LR_CALLED = 1u << 22, HCG_LR_ENQUEUE_TID = 1u << 23,
    HCG_LR_FAULT = 1u << 24, HCG_LR_FAULT_CODE = 1u << 25, HCG_LR_FAULT_ADDR = 1u << 26, HCG_LR_CALLER = 1u << 27,
    HCG_LR_REJECT_SEQ = 1u << 28,
    /* the header's */
    HCG_LR_SCHEMA = 1ull << 32, HCG_LR_VERSION = 1ull << 33, HCG_LR_PPID = 1ull << 34,
    HCG_LR_HOST = 1ull << 35, HCG_LR_RANK = 1ull << 36, HCG_LR_MODE = 1ull << 37,
    HCG_LR_DRIVER_VERSION = 1ull << 38, HCG_LR_EXE = 1ull << 39, HCG_LR_T0 = 1ull << 40,
    HCG_LR_PROC_START = 1ull << 41
};

typedef struct hcg_logrec {
    hcg_logrec_kind kind;
    uint64_t have; /* HCG_LR_* */
    int64_t pid;
    uint64_t seq, tid, enqueue_tid;
    uint64_t reject_seq; /* a run's or skip's rejection at enqueue (audit mode) */
    uint64_t fn, user_data, stream, graph, node, dst, src, bytes, fault_addr;
    uint64_t t_enqueue_ns, t_start_ns, t_end_ns, duration_ns;
    double gbps;
    char api[64], fn_name[256], fn_kind[64], reason[64], finding[64], called[64];
    char fault[16], fault_code[32];
    char caller[320]; /* the call site, as the writer named it */
    /* the header's */
    uint64_t schema, ppid, driver_version, t0_ns, proc_start;
    char version[32], host[256], rank[HCG_LOGHDR_RANK_CAP], mode[16], exe[4096];
} hcg_logrec;
/* A record's rank is at most this long with its NUL (the writer's); a
 * header read by hcg_loghdr_parse may hold up to HCG_LOGHDR_RANK_CAP. */
#define HCG_LOGREC_RANK_MAX 16

/* Parse one line (without its '\n'; len bytes, no NUL needed). Returns 0,
 * or -1 with a one-line reason in err. Unknown keys with scalar values
 * are skipped (a newer writer may add fields); a repeated key, a nested
 * value, a missing field the event needs or a wrong type is an error. */
int hcg_logrec_parse(const char *line, size_t len, hcg_logrec *out, char *err,
                     size_t errlen);

/* Every line of the file at fd, in order, to cb (which returns 0 to go
 * on); records of an unknown kind are skipped. Returns the number of
 * lines, or -1 with "line N: reason" in err (an unterminated last line is
 * an error: a log cut short; so is a header of a schema newer than
 * HCG_LOGREC_SCHEMA). */
typedef int (*hcg_logrec_cb)(const hcg_logrec *r, void *ctx);
long hcg_logrec_read_fd(int fd, hcg_logrec_cb cb, void *ctx, char *err, size_t errlen);

/* The header record a process writes first (schema HCG_LOGHDR_SCHEMA):
 * {"event":"header","schema":1,"hcguard":"0.1.0","pid":N,"ppid":N,
 *  "host":"...","rank":"R" (optional),"mode":"guard|audit",
 *  "driver_version":N,"exe":"...","t0_ns":N}, and "proc_start":N where
 *  the writer could read it. */
#define HCG_LOGHDR_SCHEMA 1
typedef struct hcg_loghdr {
    uint64_t schema, ppid, driver_version, t0_ns;
    uint64_t proc_start; /* 0: not in the header */
    int64_t pid;
    char version[32], host[256], rank[HCG_LOGHDR_RANK_CAP], mode[16], exe[1024];
} hcg_loghdr;

/* Parse line as a header: 0; 1 if it is not one ("event" is not "header",
 * or there is none: an event line); -1 with a reason in err if it is a
 * header that cannot be used (a bad value, no "pid", or a schema newer
 * than HCG_LOGHDR_SCHEMA: then out has its pid and proc_start, where read). Unknown keys with scalar values are skipped.
 * The same parser as hcg_logrec_parse's, over the header's fields, more
 * lenient than a record (only "schema" and "pid" are needed). */
int hcg_loghdr_parse(const char *line, size_t len, hcg_loghdr *out, char *err, size_t errlen);

#endif
