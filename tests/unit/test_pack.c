/*
 * The copy part of the public API: hcguard_pack_copy on real memory,
 * hcguard_host_copy, and the stable status names.
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hcguard.h"
#include "../common/check.h"

static const hcguard_copy_record sentinel = {0x1111, 0x2222, 0x3333};

static int untouched(const hcguard_copy_record *r)
{
    return memcmp(r, &sentinel, sizeof *r) == 0;
}

#define CHECK_PACK_FAILS(dst, src, n, want)                                  \
    do {                                                                     \
        hcguard_copy_record rec_ = sentinel;                                 \
        CHECK_STATUS(hcguard_pack_copy(&rec_, (dst), (src), (n)), (want));   \
        CHECK(untouched(&rec_));                                             \
    } while (0)

static void test_pack_good(void)
{
    static char a[4096], b[4096];
    hcguard_copy_record rec = sentinel;
    CHECK_STATUS(hcguard_pack_copy(&rec, a, b, sizeof a), HCGUARD_OK);
    CHECK(rec.dst == (uintptr_t)a && rec.src == (uintptr_t)b);
    CHECK_EQ(rec.nbytes, sizeof a);
    /* touching halves of one buffer */
    CHECK_STATUS(hcguard_pack_copy(&rec, a, a + 2048, 2048), HCGUARD_OK);
    CHECK_STATUS(hcguard_pack_copy(&rec, a + 2048, a, 2048), HCGUARD_OK);
    /* read-only source is fine */
    CHECK_STATUS(hcguard_pack_copy(&rec, a, "read-only", 10), HCGUARD_OK);
    /* zero bytes: packed whatever the addresses */
    rec = sentinel;
    CHECK_STATUS(hcguard_pack_copy(&rec, NULL, NULL, 0), HCGUARD_OK);
    CHECK(rec.dst == 0 && rec.src == 0 && rec.nbytes == 0);
    /* a stack buffer */
    char local[64];
    CHECK_STATUS(hcguard_pack_copy(&rec, local, b, sizeof local), HCGUARD_OK);
}

static void test_pack_bad(void)
{
    static char a[4096];
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    char *none = mmap(NULL, 2 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    CHECK(none != MAP_FAILED);
    munmap(none + pg, pg); /* a hole after the PROT_NONE page */
    CHECK_STATUS(hcguard_pack_copy(NULL, a, a + 8, 8), HCGUARD_ERR_NULL_RECORD);
    CHECK_PACK_FAILS(NULL, a, 8, HCGUARD_ERR_NULL_DST);
    CHECK_PACK_FAILS(a, NULL, 8, HCGUARD_ERR_NULL_SRC);
    CHECK_PACK_FAILS((void *)(UINTPTR_MAX - 3), a, 8, HCGUARD_ERR_DST_OVERFLOW);
    CHECK_PACK_FAILS(a, (void *)(UINTPTR_MAX - 3), 8, HCGUARD_ERR_SRC_OVERFLOW);
    CHECK_PACK_FAILS(a, a + 7, 8, HCGUARD_ERR_OVERLAP);
    CHECK_PACK_FAILS(a + 7, a, 8, HCGUARD_ERR_OVERLAP);
    CHECK_PACK_FAILS(a, a, 1, HCGUARD_ERR_OVERLAP);
    CHECK_PACK_FAILS(none + pg, a, 8, HCGUARD_ERR_DST_UNMAPPED);
    CHECK_PACK_FAILS(a, none + pg, 8, HCGUARD_ERR_SRC_UNMAPPED);
    CHECK_PACK_FAILS(none, a, 8, HCGUARD_ERR_DST_NOT_WRITABLE);
    CHECK_PACK_FAILS((void *)"literal", a, 8, HCGUARD_ERR_DST_NOT_WRITABLE);
    CHECK_PACK_FAILS(a, none, 8, HCGUARD_ERR_SRC_NOT_READABLE);
    CHECK_PACK_FAILS(a, none + pg - 4, 8, HCGUARD_ERR_SRC_NOT_READABLE);
    CHECK_PACK_FAILS(a + sizeof a - 8, a, SIZE_MAX / 2, HCGUARD_ERR_OVERLAP);
    munmap(none, pg);
}

static void test_host_copy(void)
{
    char src[100], dst[100];
    hcguard_copy_record rec;
    for (int i = 0; i < 100; i++)
        src[i] = (char)(i * 7), dst[i] = 0;
    CHECK_STATUS(hcguard_pack_copy(&rec, dst, src, 60), HCGUARD_OK);
    hcguard_host_copy(&rec);
    CHECK(memcmp(dst, src, 60) == 0);
    CHECK(dst[60] == 0 && dst[99] == 0);
    /* zero bytes copies nothing, even with bad addresses */
    memset(dst, 0x5a, sizeof dst);
    rec = (hcguard_copy_record){(uintptr_t)dst, (uintptr_t)src, 0};
    hcguard_host_copy(&rec);
    rec = (hcguard_copy_record){0, 8, 0};
    hcguard_host_copy(&rec);
    for (int i = 0; i < 100; i++)
        CHECK(dst[i] == 0x5a);
    hcguard_host_copy(NULL);
}

/* HCGUARD_STATUS_MAP, as a program expanding it sees it: values 0, 1, ...
 * in order, one row per value below HCGUARD_STATUS_COUNT, and the names
 * and descriptions the library returns. */
static void test_status_map(void)
{
    static const struct { int value; const char *name, *text; } rows[] = {
#define ROW(e, value, name, text) {value, name, text},
        HCGUARD_STATUS_MAP(ROW)
#undef ROW
    };
    CHECK_EQ((int)(sizeof rows / sizeof rows[0]), (int)HCGUARD_STATUS_COUNT);
    for (int i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++) {
        CHECK_EQ(rows[i].value, i);
        CHECK_STR(hcguard_status_name((hcguard_status)i), rows[i].name);
        CHECK_STR(hcguard_status_string((hcguard_status)i), rows[i].text);
    }
    CHECK_EQ((int)HCGUARD_ERR_COPY_FAULTED, 14); /* ABI: values never move */
}

static void test_names(void)
{
    static const char *const want[HCGUARD_STATUS_COUNT] = {
        "ok", "null-record", "record-unreadable", "null-dst", "null-src",
        "dst-overflow", "src-overflow", "overlap", "dst-unmapped",
        "src-unmapped", "dst-not-writable", "src-not-readable", "dst-device",
        "src-device", "copy-faulted"};
    for (int i = 0; i < HCGUARD_STATUS_COUNT; i++) {
        const char *n = hcguard_status_name((hcguard_status)i);
        const char *s = hcguard_status_string((hcguard_status)i);
        CHECK(n && want[i] && strcmp(n, want[i]) == 0);
        CHECK(s && strlen(s) > 5 && strcmp(s, "unknown status") != 0);
        for (int j = 0; j < i; j++) {
            CHECK(strcmp(n, hcguard_status_name((hcguard_status)j)) != 0);
            CHECK(strcmp(s, hcguard_status_string((hcguard_status)j)) != 0);
        }
    }
    CHECK(strcmp(hcguard_status_string(HCGUARD_ERR_OVERLAP),
                 "destination range overlaps source range") == 0);
    CHECK(strcmp(hcguard_status_name(HCGUARD_STATUS_COUNT), "unknown") == 0);
    CHECK(strcmp(hcguard_status_name((hcguard_status)-1), "unknown") == 0);
    CHECK(strcmp(hcguard_status_name((hcguard_status)1000), "unknown") == 0);
    CHECK(strcmp(hcguard_status_string((hcguard_status)1000), "unknown status") == 0);
}

static const check_case cases[] = {
    CHECK_CASE(pack_good),
    CHECK_CASE(pack_bad),
    CHECK_CASE(host_copy),
    CHECK_CASE(names),
    CHECK_CASE(status_map),
};

int main(int argc, char **argv)
{
    return check_main("test_pack", CHECK_CASES(cases), argc, argv);
}
