#define _GNU_SOURCE /* syscall, SYS_getdents64 */
#include "harness/driver/out_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "harness/base/exit_cleanup.h"
#include "harness/base/signal_chain.h"

#define TEMP_PREFIX ".equiv-tmp."

/* ---- removal in a signal handler: system calls only ---- */

static eq_signal_chain chain;
static char active_temp[4200];  /* the private folder a signal removes ("" when none) */
static char active_dir[4096];   /* --out, removed too when created_dirs (rmdir: only if empty) */
static volatile sig_atomic_t active_created_dirs;
/* the commit is moving files into --out (signals wait on its thread; another thread's handler or
 * eq_exit_cleanup_run waits for it to end, and then finds nothing to remove: a whole set) */
static atomic_int committing;

/* Unlinks every entry of the (flat) folder, then the folder: open, getdents64, unlinkat, rmdir. */
static void remove_flat_dir_signal_safe(const char *path)
{
#ifdef SYS_getdents64
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd >= 0) {
        _Alignas(8) char buf[4096];
        for (;;) {
            long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
            if (n <= 0) break;
            for (long off = 0; off < n;) {
                /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
                unsigned short reclen;
                memcpy(&reclen, buf + off + 16, sizeof reclen);
                const char *name = buf + off + 19;
                if (!(name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))))
                    unlinkat(fd, name, 0);
                off += reclen;
            }
        }
        close(fd);
    }
#endif
    rmdir(path);
}

/* Removes the last `levels` folders of path (--out and the parents this command created), each
 * only if empty: rmdir and a copy of the path cut at its slashes, safe in a signal handler. */
static void remove_created_dirs(const char *path, int levels)
{
    char p[sizeof active_dir];
    size_t n = 0;
    while (n + 1 < sizeof p && path[n] != '\0') p[n] = path[n], n++;
    p[n] = '\0';
    for (int k = 0; k < levels && n > 0; k++) {
        if (rmdir(p) != 0) return;
        while (n > 0 && p[n - 1] != '/') n--; /* the parent: cut at the last slash */
        while (n > 1 && p[n - 1] == '/') n--;
        p[n] = '\0';
    }
}

/* Removes what this command made in --out, however the process ends: from a signal handler, or
 * from the thread that is about to end the process (eq_exit_cleanup_run). Another thread may
 * still write into the private folder meanwhile (the main thread, while a handler runs on another
 * one): a file made between the listing and the rmdir fails the rmdir, so the folder is listed
 * again, a few times. */
static void remove_active(void)
{
    for (int waited_ms = 0; atomic_load(&committing) && waited_ms < 10000; waited_ms++) {
        const struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    if (atomic_load(&committing)) return; /* a commit stuck on the lock: leave its folder whole */
    for (int tries = 0; tries < 5 && active_temp[0] != '\0'; tries++) {
        remove_flat_dir_signal_safe(active_temp);
        if (access(active_temp, F_OK) != 0) break;
    }
    if (active_created_dirs > 0) remove_created_dirs(active_dir, active_created_dirs);
}

static void on_signal(int sig, siginfo_t *info, void *context)
{
    remove_active();
    eq_signal_chain_pass_on(&chain, sig, info, context); /* then as the signal would have ended the process */
}

static void disarm(void)
{
    eq_exit_cleanup_set(NULL);
    eq_signal_chain_disarm(&chain);
    active_temp[0] = '\0';
    active_created_dirs = 0;
}

/* ---- stale temporaries ---- */

/* This host's name as it appears in private folder names: letters, digits and '-' only. */
static void host_name(char *buf, size_t len)
{
    char raw[256] = "";
    if (gethostname(raw, sizeof raw - 1) != 0 || raw[0] == '\0') snprintf(raw, sizeof raw, "host");
    size_t j = 0;
    for (size_t i = 0; raw[i] && j + 1 < len && j < 64; i++) {
        char c = raw[i];
        buf[j++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '-';
    }
    buf[j] = '\0';
}

static int process_gone(long pid) { return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH; }

/* ".equiv-tmp.PID.HOST.XXXXXX" of this host whose process is gone, or ".NAME.tmp.PID" of a dead
 * process (what equiv wrote before private folders). */
static int is_stale(const char *name, const char *host)
{
    char *end = NULL;
    if (strncmp(name, TEMP_PREFIX, strlen(TEMP_PREFIX)) == 0) {
        long pid = strtol(name + strlen(TEMP_PREFIX), &end, 10);
        size_t host_len = strlen(host);
        return end != NULL && *end == '.' && strncmp(end + 1, host, host_len) == 0 && end[1 + host_len] == '.' &&
               strlen(end + 2 + host_len) == 6 && process_gone(pid);
    }
    const char *tmp = strstr(name, ".tmp.");
    if (name[0] != '.' || tmp == NULL) return 0;
    long pid = strtol(tmp + 5, &end, 10);
    return end != tmp + 5 && *end == '\0' && process_gone(pid);
}

static void clean_stale(const char *dir)
{
    char host[80], path[8400];
    host_name(host, sizeof host);
    DIR *d = opendir(dir);
    if (d == NULL) return;
    for (struct dirent *ent; (ent = readdir(d)) != NULL;) {
        if (!is_stale(ent->d_name, host)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        struct stat sb;
        if (lstat(path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) remove_flat_dir_signal_safe(path);
        else unlink(path);
    }
    closedir(d);
}

/* ---- the output folder ---- */

/* mkdir -p: creates path and its missing parents; returns how many folders it created (the last
 * ones of the path), or -1 with errno set and none of them left. path is restored on return. A
 * folder another process made meanwhile (two runs into runs/a and runs/b, both making runs/) is
 * there, not made here. */
static int make_dirs(char *path)
{
    if (mkdir(path, 0777) == 0) return 1;
    if (errno == EEXIST) return 0;
    if (errno != ENOENT) return -1;
    char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path) return -1; /* no parent to make ("/x" with no root?) */
    *slash = '\0';
    const int made = make_dirs(path);
    *slash = '/';
    if (made < 0) return -1;
    if (mkdir(path, 0777) == 0) return made + 1;
    const int err = errno;
    *slash = '\0';
    remove_created_dirs(path, made);
    *slash = '/';
    errno = err;
    return -1;
}

int eq_out_active(const eq_out *out) { return out->dir[0] != '\0'; }

eq_status eq_out_open(eq_out *out, const char *dir)
{
    memset(out, 0, sizeof *out);
    if (dir == NULL) return EQ_OK;
    if (active_temp[0] != '\0') return EQ_FAIL(EQ_ERR_INTERNAL, "two output folders open at once");
    if (dir[0] == '\0' || strlen(dir) >= sizeof out->dir - 128)
        return EQ_FAIL(EQ_ERR_USAGE, "--out '%.60s' is empty or too long", dir);
    snprintf(out->dir, sizeof out->dir, "%s", dir);
    for (size_t n = strlen(out->dir); n > 1 && out->dir[n - 1] == '/';) out->dir[--n] = '\0'; /* runs/ -> runs */
    dir = out->dir;
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) {
            const eq_status st = EQ_FAIL(EQ_ERR_USAGE, "--out %s exists and is not a folder", dir);
            out->dir[0] = '\0'; /* dir is out->dir: cleared once the message holds it */
            return st;
        }
    } else if ((out->created_dirs = make_dirs(out->dir)) < 0) {
        int err = errno;
        out->created_dirs = 0;
        eq_status st = EQ_FAIL(EQ_ERR_IO, "cannot create folder %s: %s", dir, strerror(err));
        out->dir[0] = '\0';
        return st;
    }
    clean_stale(dir);
    char host[80];
    host_name(host, sizeof host);
    snprintf(out->temp, sizeof out->temp, "%s/" TEMP_PREFIX "%ld.%s.XXXXXX", dir, (long)getpid(), host);
    if (mkdtemp(out->temp) == NULL) {
        int err = errno;
        out->temp[0] = '\0';
        eq_out_discard(out);
        return EQ_FAIL(EQ_ERR_IO, "cannot write into %s: %s", dir, strerror(err));
    }
    snprintf(active_temp, sizeof active_temp, "%s", out->temp);
    snprintf(active_dir, sizeof active_dir, "%s", out->dir);
    active_created_dirs = out->created_dirs;
    eq_signal_chain_arm(&chain, on_signal);
    eq_exit_cleanup_set(remove_active); /* the MPI watchdog's _exit, MPI_Abort */
    return EQ_OK;
}

eq_status eq_out_path(eq_out *out, const char *name, char *path, size_t len)
{
    if (!eq_out_active(out) || out->temp[0] == '\0') return EQ_FAIL(EQ_ERR_INTERNAL, "no output folder open");
    if (name[0] == '\0' || name[0] == '.' || strchr(name, '/') != NULL || strlen(name) >= sizeof out->names[0])
        return EQ_FAIL(EQ_ERR_INTERNAL, "output file name '%s' is not a plain name", name);
    for (int i = 0; i < out->n_names; i++)
        if (strcmp(out->names[i], name) == 0) return EQ_FAIL(EQ_ERR_INTERNAL, "output file %s written twice", name);
    if (out->n_names == out->cap_names) {
        int cap = out->cap_names ? 2 * out->cap_names : 16;
        char(*grown)[256] = realloc(out->names, (size_t)cap * sizeof *grown);
        if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the output file list");
        out->names = grown;
        out->cap_names = cap;
    }
    if ((size_t)snprintf(path, len, "%s/%s", out->temp, name) >= len)
        return EQ_FAIL(EQ_ERR_USAGE, "output path %s/%s is too long", out->dir, name);
    snprintf(out->names[out->n_names++], sizeof out->names[0], "%s", name);
    return EQ_OK;
}

eq_status eq_out_commit(eq_out *out)
{
    eq_status st = EQ_OK;
    if (!eq_out_active(out) || out->temp[0] == '\0') return EQ_OK;
    sigset_t block, before;
    sigemptyset(&block);
    for (int i = 0; i < EQ_SIGNAL_CHAIN_N; i++) sigaddset(&block, eq_signal_chain_signals[i]);
    sigprocmask(SIG_BLOCK, &block, &before); /* a signal now would leave half a set: it waits */
    atomic_store(&committing, 1);            /* and another thread's handler waits for the end */
    int dfd = open(out->dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0 || flock(dfd, LOCK_EX) != 0) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot lock %s to move the outputs in: %s", out->dir, strerror(errno));
        goto cleanup;
    }
    for (int i = 0; i < out->n_names; i++) {
        struct stat sb;
        if (fstatat(dfd, out->names[i], &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode)) {
            st = EQ_FAIL(EQ_ERR_IO, "cannot write %s/%s: a folder of that name is in the way", out->dir,
                         out->names[i]);
            goto cleanup;
        }
    }
    int tfd = open(out->temp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (tfd < 0) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot open %s: %s", out->temp, strerror(errno));
        goto cleanup;
    }
    for (int i = 0; i < out->n_names && st == EQ_OK; i++) {
        if (faccessat(tfd, out->names[i], F_OK, AT_SYMLINK_NOFOLLOW) != 0) continue; /* a writer that wrote nothing */
        if (renameat(tfd, out->names[i], dfd, out->names[i]) != 0)
            st = EQ_FAIL(EQ_ERR_IO, "cannot move %s into %s: %s", out->names[i], out->dir, strerror(errno));
    }
    close(tfd);
    if (st == EQ_OK) {
        remove_flat_dir_signal_safe(out->temp);
        out->temp[0] = '\0';
        out->created_dirs = 0;
        disarm();
    }
cleanup:
    if (dfd >= 0) close(dfd); /* releases the lock */
    atomic_store(&committing, 0);
    sigprocmask(SIG_SETMASK, &before, NULL);
    return st;
}

void eq_out_discard(eq_out *out)
{
    if (out->temp[0] != '\0') remove_flat_dir_signal_safe(out->temp);
    if (out->created_dirs > 0) remove_created_dirs(out->dir, out->created_dirs);
    if (out->temp[0] != '\0' || out->created_dirs > 0) disarm();
    free(out->names);
    memset(out, 0, sizeof *out);
}
