/* Read-only maps of file ranges and their SIGBUS (harness/file_map.h). */
#define _GNU_SOURCE /* MADV_SEQUENTIAL */
#include "harness/file_map.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness/base/exit_cleanup.h"

/* The ranges mapped now, for the handler: a row is taken under the lock and read by the handler
 * without it (lo is stored last and cleared first, so a row it sees whole is a range mapped now,
 * or one just unmapped, which no access can fault in any more). A process maps a batch's tensors
 * at a time; past ROWS the file is mapped all the same and a fault in it is named without a path. */
#define ROWS 4096
static struct {
    _Atomic uintptr_t lo;
    uintptr_t hi;
    const char *path;
} rows[ROWS];
static pthread_mutex_t rows_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction previous;
static pthread_once_t armed = PTHREAD_ONCE_INIT;

static void put(const char *s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    (void)context;
    const uintptr_t at = (uintptr_t)info->si_addr;
    for (int i = 0; i < ROWS; i++) {
        const uintptr_t lo = atomic_load(&rows[i].lo);
        if (lo == 0 || at < lo || at >= rows[i].hi) continue;
        char path[4 * 4096 + 1]; /* a path, each byte escaped at most to 4 */
        eq_escape_line(path, sizeof path, rows[i].path != NULL ? rows[i].path : "a file of the run");
        put("equiv: error: ");
        put(path);
        put(": the file was cut short while equiv read it (another process truncated or rewrote it)\n");
        eq_exit_cleanup_run();
        _exit(2);
    }
    /* not a mapped file's: as the signal would have ended the process */
    sigaction(sig, &previous, NULL);
}

static void arm(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous);
}

eq_status eq_file_map_open(int fd, const char *path, uint64_t offset, size_t bytes, eq_file_map *out)
{
    memset(out, 0, sizeof *out);
    out->slot = -1;
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start = offset / page * page;
    const size_t length = bytes + (size_t)(offset - start);
    pthread_once(&armed, arm);
    void *base = mmap(NULL, length, PROT_READ, MAP_SHARED, fd, (off_t)start);
    if (base == MAP_FAILED)
        return EQ_FAIL(EQ_ERR_NOMEM, "%s: cannot map %zu bytes of it: %s", path, bytes, strerror(errno));
    madvise(base, length, MADV_SEQUENTIAL); /* read ahead as it is read, and drop what was read */
    out->base = base;
    out->length = length;
    out->data = (const char *)base + (offset - start);
    pthread_mutex_lock(&rows_lock);
    for (int i = 0; i < ROWS && out->slot < 0; i++) {
        if (atomic_load(&rows[i].lo) != 0) continue;
        rows[i].hi = (uintptr_t)base + length;
        rows[i].path = path;
        atomic_store(&rows[i].lo, (uintptr_t)base);
        out->slot = i;
    }
    pthread_mutex_unlock(&rows_lock);
    return EQ_OK;
}

void eq_file_map_close(eq_file_map *m)
{
    if (m->base == NULL) return;
    if (m->slot >= 0) {
        pthread_mutex_lock(&rows_lock);
        atomic_store(&rows[m->slot].lo, 0);
        pthread_mutex_unlock(&rows_lock);
    }
    munmap(m->base, m->length);
    memset(m, 0, sizeof *m);
    m->slot = -1;
}
