/* The sinks, one row each of hcg_sinks[], in the order each event reaches
 * them: the summary and the audit's findings count and print; the event
 * log and the trace are files, which also take the events of a program
 * that died and those written from a fatal signal's handler. The
 * collector (src/events) walks the table for events; start-up, fork, exec,
 * exit and the launcher's recovery (src/lifecycle) walk it through the
 * hcg_sinks_* functions below. A new sink is a file in src/sinks, its
 * declarations in sinks.h and one row here: nothing else names it. */
#include "sinks/sinks.h"

/* ---- the event log and the trace: files named by the configuration --- */

static int log_open(const hcg_config *c)
{
    return c->log_path[0] ? hcg_jsonl_open(c->log_path, c->log_pattern) : 0;
}

static int log_recover(const hcg_flight *f, pid_t pid)
{
    char path[HCG_PATH_MAX];
    return hcg_flight_path(f->log_path, path) ? hcg_jsonl_reopen(path, pid, &f->out_id[HCG_SINK_LOG]) : 0;
}

static int trace_open(const hcg_config *c)
{
    return c->trace_path[0] ? hcg_trace_open(c->trace_path, c->trace_pattern) : 0;
}

static int trace_recover(const hcg_flight *f, pid_t pid)
{
    char path[HCG_PATH_MAX];
    return hcg_flight_path(f->trace_path, path) ? hcg_trace_reopen(path, pid, &f->out_id[HCG_SINK_TRACE]) : 0;
}

/* ---- the table ---------------------------------------------------------- */

static const hcg_sink summary_sink = {
    .name = "summary",
    .event = hcg_summary_event,
    .read_event = hcg_summary_event,
    .after_fork = hcg_summary_after_fork,
    .exec_slot = -1,
    .active = hcg_summary_active,
    .report = hcg_summary_print, /* the findings' part too */
    .errors = hcg_summary_errors, /* the findings' errors too */
};
static const hcg_sink findings_sink = {
    .name = "findings",
    .event = hcg_audit_event,
    .read_event = hcg_audit_event,
    .after_fork = hcg_audit_after_fork,
    .exec_slot = -1,
};
static const hcg_sink jsonl_sink = {
    .name = "event log",
    .event = hcg_jsonl_event,
    .flush = hcg_jsonl_flush,
    .open = log_open,
    .recover = log_recover,
    .file_end = hcg_jsonl_file_end,
    .rewrite_from = hcg_jsonl_rewrite_from,
    .after_fork = hcg_jsonl_after_fork,
    .exec_slot = HCG_SINK_LOG,
    .exec_state = hcg_jsonl_exec_state,
    .close = hcg_jsonl_close,
    .summary = hcg_jsonl_summary,
};
static const hcg_sink trace_sink = {
    .name = "trace",
    .event = hcg_trace_event,
    .flush = hcg_trace_flush,
    .open = trace_open,
    .recover = trace_recover,
    .file_end = hcg_trace_file_end,
    .rewrite_from = hcg_trace_rewrite_from,
    .after_fork = hcg_trace_after_fork,
    .exec_slot = HCG_SINK_TRACE,
    .exec_state = hcg_trace_exec_state,
    .close = hcg_trace_close,
    .seal = hcg_trace_seal,
    .summary = hcg_trace_summary,
};

const hcg_sink *const hcg_sinks[] = {&summary_sink, &findings_sink, &jsonl_sink, &trace_sink,
                                     NULL};

/* Function names are looked up only from their cache while a signal
 * handler writes (no lock, no allocation). */
void (*const hcg_sinks_signal_mode)(int on) = hcg_fn_names_cached_only;

/* ---- every sink --------------------------------------------------------- */

#define EACH_SINK(k) for (const hcg_sink *const *k = hcg_sinks; *k; k++)

void hcg_sinks_open(const hcg_config *c)
{
    EACH_SINK(k)
        if ((*k)->open)
            (*k)->open(c);
}

void hcg_sinks_recover(const hcg_flight *f, pid_t pid)
{
    EACH_SINK(k)
        if ((*k)->recover)
            (*k)->recover(f, pid);
}

void hcg_sinks_after_fork(void)
{
    EACH_SINK(k)
        if ((*k)->after_fork)
            (*k)->after_fork();
}

void hcg_sinks_exec_states(char states[HCG_SINK_SLOTS], int forked)
{
    EACH_SINK(k)
        if ((*k)->exec_state && (*k)->exec_slot >= 0 && (*k)->exec_slot < HCG_SINK_SLOTS)
            states[(*k)->exec_slot] = (*k)->exec_state(forked);
}

void hcg_sinks_close(void)
{
    EACH_SINK(k)
        if ((*k)->close)
            (*k)->close();
}

void hcg_sinks_summary_lines(void)
{
    EACH_SINK(k)
        if ((*k)->summary)
            (*k)->summary();
}

int hcg_sinks_active(void)
{
    int active = 0;
    EACH_SINK(k)
        active |= (*k)->active && (*k)->active();
    return active;
}

void hcg_sinks_report_exit(void)
{
    hcg_summary_at_exit();
    hcg_sinks_report();
}

void hcg_sinks_report(void)
{
    /* The summary holds the sinks' locks while it writes and names
     * functions (cancellation points): never cancelled half-way. */
    int cancel = hcg_nocancel_begin();
    EACH_SINK(k)
        if ((*k)->report)
            (*k)->report();
    hcg_nocancel_end(cancel);
}

uint64_t hcg_sinks_errors(void)
{
    uint64_t errors = 0;
    EACH_SINK(k)
        if ((*k)->errors)
            errors += (*k)->errors();
    return errors;
}

void hcg_sinks_read_start(void)
{
    EACH_SINK(k)
        if ((*k)->read_event && (*k)->after_fork)
            (*k)->after_fork();
}

void hcg_sinks_read_event(const hcg_event *e)
{
    EACH_SINK(k)
        if ((*k)->read_event)
            (*k)->read_event(e);
}

/* ---- the run's counts, which the summary keeps -------------------------- */

void hcg_sinks_stats(hcguard_stats *out)
{
    hcg_summary_stats(out);
}

void hcg_sinks_report_recovered(const hcg_flight *f, const hcg_counts *c, uint64_t dropped,
                                pid_t pid, const char *how)
{
    hcg_summary_print_recovered(f, c, dropped, pid, how);
}

uint64_t hcg_sinks_errors_of(const hcg_counts *c)
{
    return hcg_summary_errors_of(c);
}

void hcg_sinks_report_idle(void)
{
    hcg_summary_print_idle();
}

void hcg_sinks_report_read(const char *title, const hcg_counts *c,
                           const uint64_t launched[HCG_FN_KIND_COUNT], uint64_t nodes, int mode)
{
    hcg_summary_print_read(title, c, launched, nodes, mode);
}

hcg_trace_proc *hcg_sinks_trace_start(int pid, uint64_t base_ns, uint32_t tid_base,
                                      uint64_t flow_first)
{
    return hcg_trace_proc_new(pid, base_ns, tid_base, flow_first);
}

void hcg_sinks_trace_end(hcg_trace_proc *tp)
{
    hcg_trace_proc_free(tp);
}

size_t hcg_sinks_trace_event(hcg_trace_proc *tp, const hcg_event *e, const char *fn_name,
                             uint32_t enq_tid, char *out, size_t room)
{
    return hcg_trace_format(tp, e, fn_name, enq_tid, out, room);
}
