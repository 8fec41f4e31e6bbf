/* hcguard report (tools/report.c): merges event logs of many processes. */
#ifndef HCG_TOOLS_REPORT_H
#define HCG_TOOLS_REPORT_H

/* argv: what follows "report". Returns the exit status. */
int hcg_report_main(int argc, char **argv);

#endif
