/* An empty shared object: something ld.so can preload in place of
 * libhcguard.so, so that the launcher's environment can be checked
 * without the interposer loaded. */
int hcg_launcher_dummy(void);
int hcg_launcher_dummy(void) { return 0; }
