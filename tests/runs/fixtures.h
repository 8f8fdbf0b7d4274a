/* fixtures.h - where the real-world fixtures live (../shared/fixtures beside the repository,
 * or $TANDEM_FIXTURES), read in place; tests that need them skip with one line when absent. */
#ifndef TDM_TESTS_RUNS_FIXTURES_H
#define TDM_TESTS_RUNS_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static const char *fixtures_dir(void) {
    const char *d = getenv("TANDEM_FIXTURES");
    return d && *d ? d : "../shared/fixtures";
}

/* dir/rel into out; 1 when it exists. */
static int fixture(char *out, size_t cap, const char *rel) {
    snprintf(out, cap, "%s/%s", fixtures_dir(), rel);
    struct stat st;
    return stat(out, &st) == 0;
}

#endif
