/* The table of real libc functions (src/driver/libc.def, libc.c): every
 * row is found, is libc's own or the next definition and never hcguard's
 * own interposer (which would call itself for ever), is found once and
 * kept, and a lookup made while another runs on the same thread gets
 * libc's own without recursing. */
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include "hcg.h"
#include "../common/check.h"

/* hcguard's interposers, linked into this program from the core archive. */
static void *const interposers[] = {(void *)munmap, (void *)mprotect, (void *)mremap,
                                    (void *)shmdt, (void *)sigaction, (void *)signal};

static void test_rows_found(void)
{
    for (int id = 0; id < HCG_LIBC_COUNT; id++) {
        void *p = hcg_libc((hcg_libc_id)id);
        CHECK_MSG(p != NULL, "row %d not found", id);
        for (size_t i = 0; i < sizeof interposers / sizeof interposers[0]; i++)
            CHECK_MSG(p != interposers[i], "row %d is hcguard's own interposer", id);
        CHECK(hcg_libc((hcg_libc_id)id) == p); /* kept */
    }
}

static void test_libc_rows_are_libcs(void)
{
    CHECK(HCG_REAL(execve) == (hcg_libc_execve_fn)hcg_dynsym("libc.so.", "execve", NULL));
    CHECK(HCG_REAL(libc_sigaction) ==
          (hcg_libc_libc_sigaction_fn)hcg_dynsym("libc.so.", "sigaction", NULL));
    /* At GLIBC_2.15 where libc has that version (x86-64), else the only
     * one (aarch64: GLIBC_2.17). */
    void *spawn = hcg_dynsym("libc.so.", "posix_spawn", "GLIBC_2.15");
    if (!spawn)
        spawn = hcg_dynsym("libc.so.", "posix_spawn", NULL);
    CHECK(spawn != NULL);
    CHECK(HCG_REAL(posix_spawn) == (hcg_libc_posix_spawn_fn)spawn);
}

/* The next munmap after this program is libc's, or a sanitizer runtime's
 * that calls libc's: in another object than this program's interposer,
 * and calling it through the table unmaps. */
static void test_next_calls_through(void)
{
    Dl_info self, next;
    REQUIRE(dladdr((void *)munmap, &self) && dladdr((void *)HCG_REAL(munmap), &next));
    CHECK(strcmp(self.dli_fname, next.dli_fname) != 0);
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    CHECK_EQ(HCG_REAL(munmap)(m, 4096), 0);
    CHECK_EQ(HCG_REAL(mprotect)(m, 4096, PROT_READ), -1); /* gone */
    CHECK_EQ(hcg_libc_looking_up(), 0);
}

static void test_find_ways(void)
{
    CHECK(hcg_libc_find("memcpy", HCG_LIBC_HOW_DEFAULT, NULL) != NULL);
    CHECK(hcg_libc_find("memcpy", HCG_LIBC_HOW_LIBC_DLSYM, NULL) != NULL);
    CHECK(hcg_libc_find("hcg_no_such_function", HCG_LIBC_HOW_NEXT, NULL) == NULL);
    CHECK(hcg_libc_find("hcg_no_such_function", HCG_LIBC_HOW_LIBC, NULL) == NULL);
    CHECK(hcg_libc_find("hcg_no_such_function", HCG_LIBC_HOW_DEFAULT, NULL) == NULL);
    CHECK(hcg_libc_find("hcg_no_such_function", HCG_LIBC_HOW_LIBC_DLSYM, NULL) == NULL);
}

static const check_case cases[] = {
    CHECK_CASE(rows_found),
    CHECK_CASE(libc_rows_are_libcs),
    CHECK_CASE(next_calls_through),
    CHECK_CASE(find_ways),
};

int main(int argc, char **argv)
{
    return check_main("test_libc", CHECK_CASES(cases), argc, argv);
}
