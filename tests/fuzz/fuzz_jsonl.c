/*
 * Fuzz target for the event log's reader (src/jsonl_read.c). Any line
 * must be accepted or refused with a reason, never read past its end;
 * a line accepted must carry what its event needs, and written back out
 * in the log's own form it must read back to the same record.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/jsonl_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t put_str(char *out, size_t n, const char *key, const char *s)
{
    n += (size_t)sprintf(out + n, ",\"%s\":\"", key);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            n += (size_t)sprintf(out + n, "\\%c", ch);
        else if (ch < 0x20)
            n += (size_t)sprintf(out + n, "\\u%04x", ch);
        else
            out[n++] = (char)ch;
    }
    out[n++] = '"';
    return n;
}

static const char *kind_name(hcg_logrec_kind k)
{
    static const char *const names[] = {"run", "skip", "reject", "finding"};
    return names[k - HCG_LOGREC_RUN];
}

/* The record as the writer would put it (every field it holds). */
static size_t write_back(const hcg_logrec *r, char *out)
{
    size_t n = (size_t)sprintf(out, "{\"event\":\"%s\",\"pid\":%" PRId64 ",\"seq\":%" PRIu64,
                               kind_name(r->kind), r->pid, r->seq);
    n = put_str(out, n, "api", r->api);
    n = put_str(out, n, "fn_kind", r->fn_kind);
    n += (size_t)sprintf(out + n, ",\"fn\":\"0x%" PRIx64 "\",\"user_data\":\"0x%" PRIx64
                         "\",\"stream\":\"0x%" PRIx64 "\",\"tid\":%" PRIu64
                         ",\"t_enqueue_ns\":%" PRIu64,
                         r->fn, r->user_data, r->stream, r->tid, r->t_enqueue_ns);
    if (r->have & HCG_LR_FN_NAME)
        n = put_str(out, n, "fn_name", r->fn_name);
    if (r->have & HCG_LR_GRAPH)
        n += (size_t)sprintf(out + n, ",\"graph\":\"0x%" PRIx64 "\",\"node\":\"0x%" PRIx64 "\"",
                             r->graph, r->node);
    if (r->have & HCG_LR_T_START)
        n += (size_t)sprintf(out + n, ",\"t_start_ns\":%" PRIu64 ",\"t_end_ns\":%" PRIu64
                             ",\"duration_ns\":%" PRIu64, r->t_start_ns, r->t_end_ns,
                             r->duration_ns);
    if (r->have & HCG_LR_DST)
        n += (size_t)sprintf(out + n, ",\"dst\":\"0x%" PRIx64 "\",\"src\":\"0x%" PRIx64
                             "\",\"bytes\":%" PRIu64, r->dst, r->src, r->bytes);
    if (r->have & HCG_LR_GBPS)
        n += (size_t)sprintf(out + n, ",\"gbps\":%.17g", r->gbps);
    if (r->have & HCG_LR_REASON)
        n = put_str(out, n, "reason", r->reason);
    if (r->have & HCG_LR_FINDING)
        n = put_str(out, n, "finding", r->finding);
    if (r->have & HCG_LR_CALLED)
        n = put_str(out, n, "called", r->called);
    if (r->have & HCG_LR_CALLER)
        n = put_str(out, n, "caller", r->caller);
    if (r->have & HCG_LR_ENQUEUE_TID)
        n += (size_t)sprintf(out + n, ",\"enqueue_tid\":%" PRIu64, r->enqueue_tid);
    if (r->have & HCG_LR_REJECT_SEQ)
        n += (size_t)sprintf(out + n, ",\"reject_seq\":%" PRIu64, r->reject_seq);
    if (r->have & HCG_LR_FAULT)
        n = put_str(out, n, "fault", r->fault);
    if (r->have & HCG_LR_FAULT_CODE)
        n = put_str(out, n, "fault_code", r->fault_code);
    if (r->have & HCG_LR_FAULT_ADDR)
        n += (size_t)sprintf(out + n, ",\"fault_addr\":\"0x%" PRIx64 "\"", r->fault_addr);
    /* the header's fields, read in any record (a reader skips what it
     * does not need) */
    if (r->have & HCG_LR_SCHEMA)
        n += (size_t)sprintf(out + n, ",\"schema\":%" PRIu64, r->schema);
    if (r->have & HCG_LR_VERSION)
        n = put_str(out, n, "hcguard", r->version);
    if (r->have & HCG_LR_PPID)
        n += (size_t)sprintf(out + n, ",\"ppid\":%" PRIu64, r->ppid);
    if (r->have & HCG_LR_HOST)
        n = put_str(out, n, "host", r->host);
    if (r->have & HCG_LR_RANK)
        n = put_str(out, n, "rank", r->rank);
    if (r->have & HCG_LR_MODE)
        n = put_str(out, n, "mode", r->mode);
    if (r->have & HCG_LR_DRIVER_VERSION)
        n += (size_t)sprintf(out + n, ",\"driver_version\":%" PRIu64, r->driver_version);
    if (r->have & HCG_LR_EXE)
        n = put_str(out, n, "exe", r->exe);
    if (r->have & HCG_LR_T0)
        n += (size_t)sprintf(out + n, ",\"t0_ns\":%" PRIu64, r->t0_ns);
    out[n++] = '}';
    return n;
}

static int same(const hcg_logrec *a, const hcg_logrec *b)
{
    return a->kind == b->kind && a->have == b->have && a->pid == b->pid && a->seq == b->seq &&
           a->tid == b->tid && a->fn == b->fn && a->user_data == b->user_data &&
           a->stream == b->stream && a->graph == b->graph && a->node == b->node &&
           a->dst == b->dst && a->src == b->src && a->bytes == b->bytes &&
           a->t_enqueue_ns == b->t_enqueue_ns && a->t_start_ns == b->t_start_ns &&
           a->t_end_ns == b->t_end_ns && a->duration_ns == b->duration_ns &&
           (a->gbps == b->gbps) && !strcmp(a->api, b->api) && !strcmp(a->fn_name, b->fn_name) &&
           !strcmp(a->fn_kind, b->fn_kind) && !strcmp(a->reason, b->reason) &&
           !strcmp(a->finding, b->finding) && !strcmp(a->called, b->called) &&
           !strcmp(a->caller, b->caller) && a->enqueue_tid == b->enqueue_tid &&
           a->reject_seq == b->reject_seq &&
           !strcmp(a->fault, b->fault) && !strcmp(a->fault_code, b->fault_code) &&
           a->fault_addr == b->fault_addr && a->schema == b->schema && a->ppid == b->ppid &&
           a->driver_version == b->driver_version && a->t0_ns == b->t0_ns &&
           !strcmp(a->version, b->version) && !strcmp(a->host, b->host) &&
           !strcmp(a->rank, b->rank) && !strcmp(a->mode, b->mode) && !strcmp(a->exe, b->exe);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so that any read past the line is caught */
    char *line = malloc(size ? size : 1);
    if (!line)
        return 0;
    memcpy(line, data, size);
    hcg_logrec r, back;
    char err[256];
    int rc = hcg_logrec_parse(line, size, &r, err, sizeof err);
    if ((rc != 0 && rc != -1) || (rc == -1 && !err[0]))
        abort();
    /* a header is checked below; a kind a newer writer added (OTHER) is
     * skipped by readers, nothing to write back */
    if (rc == 0 && r.kind != HCG_LOGREC_HEADER && r.kind != HCG_LOGREC_OTHER) {
        if (r.kind < HCG_LOGREC_RUN || r.kind > HCG_LOGREC_FINDING || r.pid <= 0)
            abort();
        static char out[8 * HCG_LOGREC_LINE_MAX];
        size_t n = write_back(&r, out);
        if (hcg_logrec_parse(out, n, &back, err, sizeof err) != 0 || !same(&r, &back))
            abort();
    }
    /* The header parser on the same bytes: 0 with a pid and a schema it
     * reads, 1 (not a header), or -1 with a reason. */
    hcg_loghdr h;
    int hr = hcg_loghdr_parse(line, size, &h, err, sizeof err);
    if (hr < -1 || hr > 1 || (hr == -1 && !err[0]) ||
        (hr == 0 && (h.pid <= 0 || h.schema > HCG_LOGHDR_SCHEMA)) ||
        (hr == 0 && rc == 0 && r.kind != HCG_LOGREC_HEADER))
        abort();
    free(line);
    return 0;
}
