/* version.c - the version `tandem --version` prints: the Makefile passes `git describe` of the tree and
 * rebuilds this file when it changes (a stamp file beside the objects). */
#include "tools/cli.h"

#ifndef TDM_VERSION
#define TDM_VERSION "unknown"
#endif

const char *tdm_version(void) { return TDM_VERSION; }
