/* The sinks the collector walks (src/events/events.c), in the order each
 * event reaches them: the summary and the audit's findings count and
 * print; the event log and the trace are files, which also take the
 * events of a program that died and those written from a fatal signal's
 * handler. */
#include "sinks/sinks.h"

static const hcg_sink summary_sink = {hcg_summary_event, NULL};
static const hcg_sink findings_sink = {hcg_audit_event, NULL};
static const hcg_sink jsonl_sink = {hcg_jsonl_event, hcg_jsonl_flush};
static const hcg_sink trace_sink = {hcg_trace_event, hcg_trace_flush};

const hcg_sink *const hcg_sinks[] = {&summary_sink, &findings_sink, &jsonl_sink, &trace_sink,
                                     NULL};

/* Function names are looked up only from their cache while a signal
 * handler writes (no lock, no allocation). */
void (*const hcg_sinks_signal_mode)(int on) = hcg_fn_names_cached_only;
