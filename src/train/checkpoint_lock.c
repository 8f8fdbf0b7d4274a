/* checkpoint_lock.c - one job per --save folder (checkpoint.h): an flock()ed <save>/.tandem.lock
 * naming its holder, and the refusal to write into a folder of checkpoints the run did not load. */
#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "train/checkpoint_internal.h"

/* This process's command line, arguments joined by spaces (Linux: /proc/self/cmdline). */
static void own_command(char *out, size_t cap) {
    out[0] = 0;
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return;
    size_t n = fread(out, 1, cap - 1, f);
    fclose(f);
    out[n] = 0;
    while (n > 0 && out[n - 1] == 0) n--;
    for (size_t i = 0; i < n; i++)
        if (out[i] == 0 || out[i] == '\n') out[i] = ' ';
    out[n] = 0;
}

/* The holder's line of the lock file, as the refusal quotes it. */
static void read_holder(int fd, char *out, size_t cap) {
    ssize_t n = pread(fd, out, cap - 1, 0);
    if (n < 0) n = 0;
    out[n] = 0;
    char *nl = strchr(out, '\n');
    if (nl) *nl = 0;
    if (!out[0]) snprintf(out, cap, "a job that has not yet written its name");
}

int tdm_ckpt_lock_save_dir(const char *save_dir, int *fd_out, tdm_error *err) {
    *fd_out = -1;
    if (tdm_mkdirs(save_dir, err) != 0) return tdm_error_prefix(err, "--save");
    char path[PATH_CAP];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", save_dir, TDM_CKPT_LOCK) >= sizeof path)
        return tdm_errorf(err, "--save %.64s...: path too long", save_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) /* read-only, or not ours */
        return tdm_errorf(err, "--save %s: cannot write a checkpoint there: %s (creating its lock file %s)", save_dir,
                          strerror(errno), TDM_CKPT_LOCK);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char holder[768];
        if (e == EWOULDBLOCK) read_holder(fd, holder, sizeof holder);
        close(fd);
        if (e == EWOULDBLOCK)
            return tdm_errorf(err, "--save %s is in use by another job (%s); give each job its own --save folder",
                              save_dir, holder);
        return tdm_errorf(err, "--save %s: cannot lock %s: %s", save_dir, TDM_CKPT_LOCK, strerror(e));
    }
    /* ours: the holder's name for a second job's refusal */
    char host[256] = "?", cmd[512], when[64] = "?", line[1024];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    own_command(cmd, sizeof cmd);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    int n = snprintf(line, sizeof line, "host %s, pid %d, since %s, command: %s\n", host, (int)getpid(), when, cmd);
    if (n >= (int)sizeof line) {
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n) {
        /* the lock holds without the name; a refusal then says so */
    }
    *fd_out = fd;
    return 0;
}

void tdm_ckpt_unlock_save_dir(int fd) {
    if (fd >= 0) close(fd); /* the kernel drops the flock; the file stays, unlocked */
}

int tdm_ckpt_dir_has_checkpoints(const char *save_dir) {
    char tracker[PATH_CAP];
    snprintf(tracker, sizeof tracker, "%s/%s", save_dir, TDM_CKPT_TRACKER);
    if (tdm_file_exists(tracker)) return 1;
    DIR *d = opendir(save_dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) { /* iter_XXXXXXX, not a leftover iter_XXXXXXX.tmp.<pid> */
        const char *s = e->d_name;
        if (strncmp(s, "iter_", 5) != 0) continue;
        s += 5;
        size_t k = strspn(s, "0123456789");
        found = k > 0 && s[k] == 0;
    }
    closedir(d);
    return found;
}
