/* fs.h - whole-file reads with a size bound, and atomic writes.
 *
 * tdm_read_file refuses files larger than max_bytes, so an input can never make us
 * allocate more than the caller planned for. tdm_write_file_atomic writes to
 * "PATH.tmp.<pid>", fsyncs, renames over PATH and fsyncs the directory: a crash
 * leaves either the old file or the new one, never a torn one.
 */
#ifndef TDM_FS_H
#define TDM_FS_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Opens path read-only: its descriptor (close() it) and *size in bytes, or -1 with a message.
 * Anything but a regular file (a folder, a device, a FIFO) is refused, a FIFO without waiting
 * for a writer to open it. Every reader of a path the user gives goes through this. */
int tdm_open_regular(const char *path, uint64_t *size, tdm_error *err);

/* Reads the whole file; the buffer is NUL-terminated (not counted in *len). free() it. */
char *tdm_read_file(const char *path, size_t max_bytes, size_t *len, tdm_error *err);

/* Maps the whole file read-only (shared with every process that maps it: the ranks of one
 * node read a dataset once into the page cache); not NUL-terminated. Release with
 * tdm_unmap_file(p, len). An empty file maps to a valid pointer of length 0. */
const char *tdm_map_file(const char *path, size_t max_bytes, size_t *len, tdm_error *err);
void tdm_unmap_file(const char *p, size_t len);

/* A mapped file that another program shortens while it is read raises SIGBUS at the first
 * page past its new end. Reads of a mapping inside a guard turn that into a return instead:
 *
 *     tdm_map_guard g;
 *     tdm_map_guard_arm(&g, p, len);
 *     if (sigsetjmp(g.jb, 1) != 0) { ...the file shrank: report it (the guard is off)... }
 *     ...read p[0 .. len)...
 *     tdm_map_guard_leave(&g);
 *
 * The jump skips whatever the reads had under way: the caller must be able to drop it (the
 * dataset loader ends the run with the error). Guards nest per thread; a SIGBUS outside every
 * guard of its thread goes to the handler that was there before (by default the crash). */
typedef struct tdm_map_guard {
    sigjmp_buf jb;
    const char *lo;
    size_t len;
    struct tdm_map_guard *prev;
} tdm_map_guard;
void tdm_map_guard_arm(tdm_map_guard *g, const char *p, size_t len);
void tdm_map_guard_leave(tdm_map_guard *g);

int tdm_write_file_atomic(const char *path, const void *data, size_t len, tdm_error *err);

/* Writes `len` bytes fully, retrying short writes; names `path` in the error. */
int tdm_write_all(int fd, const void *data, size_t len, const char *path, tdm_error *err);

/* fsyncs a directory so a rename inside it is durable. */
int tdm_fsync_dir(const char *dir, tdm_error *err);

/* mkdir -p. */
int tdm_mkdirs(const char *path, tdm_error *err);

int tdm_file_exists(const char *path);

/* Directory part of a path ("a/b/c.json" -> "a/b", "c.json" -> "."), into out[cap]. */
void tdm_dirname(const char *path, char *out, size_t cap);

#endif
