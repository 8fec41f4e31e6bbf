/* env(1), linked statically: ld.so is not involved, so LD_PRELOAD is only
 * printed, never loaded, and the launcher's choice of library can be seen
 * whatever state that library is in. */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    for (char **e = environ; *e; e++)
        puts(*e);
    return 0;
}
