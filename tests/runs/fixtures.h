/* fixtures.h - where the tests find ../shared/fixtures (real artefacts of other projects, read in
 * place: the repository holds no copy), and the one line they print when it is absent. */
#ifndef TDM_TESTS_RUNS_FIXTURES_H
#define TDM_TESTS_RUNS_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* $TANDEM_FIXTURES, else ../shared/fixtures (tests run from the repository root). */
static inline const char *fixtures_dir(void) {
    const char *d = getenv("TANDEM_FIXTURES");
    return d && *d ? d : "../shared/fixtures";
}

/* 1 when the fixtures are there; otherwise 0, and the first call prints the one line saying so. */
static inline int fixtures_present(const char *what) {
    static int said;
    struct stat st;
    char p[1200];
    snprintf(p, sizeof p, "%s/README.md", fixtures_dir());
    if (stat(p, &st) == 0) return 1;
    if (!said++)
        printf("skipped: the tests on real artefacts (%s, ...): %s not found; set TANDEM_FIXTURES\n", what,
               fixtures_dir());
    return 0;
}

static inline const char *fixture(const char *rel) {
    static char buf[4][1200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", fixtures_dir(), rel);
    return buf[k];
}

/* dir/rel into out; 1 when it exists. */
static inline int fixture_path(char *out, size_t cap, const char *rel) {
    snprintf(out, cap, "%s/%s", fixtures_dir(), rel);
    struct stat st;
    return stat(out, &st) == 0;
}

#endif
