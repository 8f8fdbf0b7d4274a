#include "core/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"

/* What a path that is not a regular file is, for messages. */
static const char *file_kind(mode_t m) {
    return S_ISDIR(m)                 ? "a folder"
           : S_ISFIFO(m)              ? "a FIFO (named pipe)"
           : S_ISSOCK(m)              ? "a socket"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device"
                                      : "a special file";
}

/* O_NONBLOCK: a blocking open() of a FIFO waits for a writer, forever when none comes; this one
 * returns at once, and the type is checked before a byte is read. */
int tdm_open_regular(const char *path, uint64_t *size, tdm_error *err) {
    *size = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return tdm_errorf(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tdm_errorf(err, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tdm_errorf(err, "%s: %s, not a regular file (expected a file to read)", path, file_kind(st.st_mode));
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *size = (uint64_t)st.st_size;
    return fd;
}

/* Opens a regular file of at most max_bytes: its descriptor and size, or -1 with a message. */
static int open_bounded(const char *path, size_t max_bytes, size_t *size, tdm_error *err) {
    uint64_t n;
    *size = 0;
    int fd = tdm_open_regular(path, &n, err);
    if (fd < 0) return -1;
    if (n > max_bytes) {
        close(fd);
        return tdm_errorf(err, "%s: file is %llu bytes, more than the limit of %zu", path, (unsigned long long)n,
                          max_bytes);
    }
    *size = (size_t)n;
    return fd;
}

char *tdm_read_file(const char *path, size_t max_bytes, size_t *len, tdm_error *err) {
    size_t n;
    int fd = open_bounded(path, max_bytes, &n, err);
    if (fd < 0) return NULL;
    char *buf = tdm_xmalloc(n + 1);
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            tdm_errorf(err, "%s: read failed after %zu of %zu bytes", path, got, n);
            free(buf);
            close(fd);
            return NULL;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

const char *tdm_map_file(const char *path, size_t max_bytes, size_t *len, tdm_error *err) {
    size_t n;
    int fd = open_bounded(path, max_bytes, &n, err);
    if (fd < 0) return NULL;
    *len = n;
    if (n == 0) {
        close(fd);
        return "";
    }
    void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        tdm_errorf(err, "%s: cannot map %zu bytes: %s", path, n, strerror(e));
        return NULL;
    }
    madvise(p, n, MADV_SEQUENTIAL);
    return p;
}

void tdm_unmap_file(const char *p, size_t len) {
    if (p && len > 0) munmap((void *)p, len);
}

/* ---- SIGBUS guards (fs.h) */

static _Thread_local tdm_map_guard *g_guard; /* this thread's innermost guard */
static struct sigaction g_prev_bus;          /* the handler before ours */
static pthread_once_t g_bus_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    const char *a = si->si_addr;
    for (tdm_map_guard *g = g_guard; g; g = g->prev)
        if (a >= g->lo && (size_t)(a - g->lo) < g->len + (size_t)sysconf(_SC_PAGESIZE)) {
            g_guard = g->prev;
            siglongjmp(g->jb, 1);
        }
    /* not a guarded read: hand it to the previous handler */
    if (g_prev_bus.sa_flags & SA_SIGINFO) {
        g_prev_bus.sa_sigaction(sig, si, uc);
    } else if (g_prev_bus.sa_handler != SIG_IGN && g_prev_bus.sa_handler != SIG_DFL) {
        g_prev_bus.sa_handler(sig);
    } else {
        /* the default action: returning re-executes the faulting access, which now crashes */
        signal(SIGBUS, SIG_DFL);
    }
}

static void install_sigbus(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_prev_bus);
}

void tdm_map_guard_arm(tdm_map_guard *g, const char *p, size_t len) {
    pthread_once(&g_bus_once, install_sigbus);
    g->lo = p;
    g->len = len;
    g->prev = g_guard;
    g_guard = g;
}

void tdm_map_guard_leave(tdm_map_guard *g) {
    if (g_guard == g) g_guard = g->prev;
}

int tdm_write_all(int fd, const void *data, size_t len, const char *path, tdm_error *err) {
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return tdm_errorf(err, "%s: write failed: %s", path, strerror(errno));
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

void tdm_dirname(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, cap, ".");
    } else if (slash == path) {
        snprintf(out, cap, "/");
    } else {
        size_t n = (size_t)(slash - path);
        if (n >= cap) n = cap - 1;
        memcpy(out, path, n);
        out[n] = 0;
    }
}

int tdm_fsync_dir(const char *dir, tdm_error *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return tdm_errorf(err, "%s: cannot open directory: %s", dir, strerror(errno));
    int rc = fsync(fd);
    close(fd);
    if (rc != 0) return tdm_errorf(err, "%s: fsync failed: %s", dir, strerror(errno));
    return 0;
}

int tdm_write_file_atomic(const char *path, const void *data, size_t len, tdm_error *err) {
    char tmp[4096], dir[4096];
    /* a cut-short temporary name could be another file, or PATH itself */
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp)
        return tdm_errorf(err, "a path of %zu bytes is too long to write through a temporary file beside it: %s",
                          strlen(path), path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return tdm_errorf(err, "%s: cannot create: %s", tmp, strerror(errno));
    if (tdm_write_all(fd, data, len, tmp, err) != 0) goto fail;
    if (fsync(fd) != 0) {
        tdm_errorf(err, "%s: fsync failed: %s", tmp, strerror(errno));
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        tdm_errorf(err, "%s: close failed: %s", tmp, strerror(errno));
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        tdm_errorf(err, "%s: rename failed: %s", path, strerror(errno));
        goto fail;
    }
    tdm_dirname(path, dir, sizeof dir);
    return tdm_fsync_dir(dir, err);
fail:
    if (fd >= 0) close(fd);
    unlink(tmp);
    return -1;
}

int tdm_mkdirs(const char *path, tdm_error *err) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return tdm_errorf(err, "%s: bad directory path", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return tdm_errorf(err, "%s: cannot create directory: %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return tdm_errorf(err, "%s: not a directory", path);
    return 0;
}

int tdm_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}
