/*
 * Fuzz target for hcg_elf_symbol_image, the reader of ELF static symbol
 * tables (src/elfsym.c), which reads files hcguard did not write. The
 * input's first 8 bytes are the address looked up, the rest the image.
 * Whatever the image, the reader must return 0 or -1 without reading
 * outside it (ASan), and a name it returns must be a NUL-terminated
 * string within the buffer, for a symbol that starts at or below the
 * address; a one-byte buffer holds at most the empty string.
 */
#include <stdlib.h>
#include <string.h>

#include "hcg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const void *img, size_t size, uintptr_t off, size_t len)
{
    char name[300];
    uintptr_t start = 0;
    memset(name, 'x', sizeof name);
    int rc = hcg_elf_symbol_image(img, size, off, name, len, &start);
    if (rc != 0 && rc != -1)
        abort();
    if (rc == 0 && (memchr(name, '\0', len) == NULL || start > off))
        abort();
    if (memchr(name + len, 'x', 1) == NULL) /* nothing written past len */
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t off = 0;
    if (size < sizeof off)
        return 0;
    memcpy(&off, data, sizeof off);
    /* an exact-size copy, so that any read past the image is caught */
    size_t n = size - sizeof off;
    unsigned char *img = malloc(n ? n : 1);
    if (!img)
        return 0;
    memcpy(img, data + sizeof off, n);
    check(img, n, (uintptr_t)off, 256);
    check(img, n, (uintptr_t)off, 1);
    free(img);
    return 0;
}
