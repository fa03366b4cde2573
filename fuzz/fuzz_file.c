#include "fuzz/fuzz_file.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 4

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

const char *eq_fuzz_file(int slot, const char *name, const uint8_t *data, size_t size)
{
    if (slot < 0 || slot >= SLOTS) abort();
    if (dir[0] == '\0') {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/equiv-fuzz-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
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
