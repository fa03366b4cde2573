#include "fuzz/fuzz_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLOTS 4
#define PREFIX "equiv-fuzz-"

static char dir[PATH_MAX];
static struct {
    char path[PATH_MAX];
    int fd;
} files[SLOTS];

static void remove_files(void)
{
    for (int i = 0; i < SLOTS; i++)
        if (files[i].path[0] != '\0') {
            close(files[i].fd);
            unlink(files[i].path);
        }
    if (dir[0] != '\0') rmdir(dir);
}

static void die(const char *what, const char *path)
{
    fprintf(stderr, "fuzz harness: %s %s: ", what, path);
    perror(NULL);
    abort();
}

/* A crash ends the process without atexit, and a long -fork run crashes hundreds of times, so each
 * process removes what dead ones left: directories equiv-fuzz-PID-* of this user whose PID is gone.
 * (The files keep their names for the parsers: HDF5 1.10 resolves a /proc/self/fd link with
 * realpath(), which fails once the file is removed.) */
static void remove_stale(const char *tmp)
{
    DIR *d = opendir(tmp);
    if (d == NULL) return;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        long pid = 0;
        int used = 0;
        if (sscanf(e->d_name, PREFIX "%ld-%n", &pid, &used) != 1 || used == 0 || pid <= 0 || pid == (long)getpid() ||
            kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat sb;
        if (fd < 0) continue;
        DIR *stale = fstat(fd, &sb) == 0 && sb.st_uid == geteuid() ? fdopendir(fd) : NULL;
        if (stale == NULL) {
            close(fd);
            continue;
        }
        for (struct dirent *f = readdir(stale); f != NULL; f = readdir(stale))
            if (strcmp(f->d_name, ".") != 0 && strcmp(f->d_name, "..") != 0) unlinkat(fd, f->d_name, 0);
        closedir(stale);
        unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

const char *eq_fuzz_file(int slot, const char *name, const uint8_t *data, size_t size)
{
    if (slot < 0 || slot >= SLOTS) abort();
    if (dir[0] == '\0') {
        const char *tmp = getenv("TMPDIR");
        if (tmp == NULL || tmp[0] == '\0') tmp = "/tmp";
        remove_stale(tmp);
        snprintf(dir, sizeof dir, "%s/" PREFIX "%ld-XXXXXX", tmp, (long)getpid());
        if (mkdtemp(dir) == NULL) die("cannot create a directory like", dir);
        atexit(remove_files);
    }
    if (files[slot].path[0] == '\0') {
        snprintf(files[slot].path, sizeof files[slot].path, "%s/%s", dir, name);
        files[slot].fd = open(files[slot].path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (files[slot].fd < 0) die("cannot create", files[slot].path);
    }
    /* Rewritten in place, then cut to the input's length: one file for the whole run. */
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(files[slot].fd, data + done, size - done, (off_t)done);
        if (n <= 0) die("cannot write", files[slot].path);
        done += (size_t)n;
    }
    if (ftruncate(files[slot].fd, (off_t)size) != 0) die("cannot truncate", files[slot].path);
    return files[slot].path;
}
