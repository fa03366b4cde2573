/* The watch over a multi-process run (reductions/mpi_watch.h): the peers' table, the watchdog
 * thread, rank 0's signs of life and the signal handlers. */
#include "reductions/mpi_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness/base/exit_cleanup.h"
#include "harness/base/signal_chain.h"
#include "reductions/mpi_transport.h"

/* The host's states live in memory the host's ranks share: they must be lock-free. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2, "shared states need lock-free atomics");

enum { HOST_MAX = 64 };
enum { TAG_ALIVE = 7101, TAG_SHARE }; /* on the watch's own communicator */

/* A rank's state as the others of its host see it. */
enum { PEER_RUNNING = 0, PEER_FINISHED, PEER_SIGNALLED };

typedef struct {
    int world_rank, pid;
    unsigned long long pid_ns; /* the inode of its pid namespace: /proc shows it only where ours is the same */
    atomic_int state;
    atomic_llong waiting_since_ns; /* CLOCK_MONOTONIC (one clock for the host); 0: not in a wait */
} host_slot;

typedef struct {
    atomic_int reported; /* the job's error line is out (printed by a rank of this host) */
    int n;
    host_slot slot[];
} host_table;

typedef struct {
    int pid;
    char host[HOST_MAX];
} peer_info;

static int users;
static int me = -1, world_size;
static int one_host;            /* every rank runs on this rank's host */
static peer_info *peers;        /* world_size entries, every rank's */
static host_table *host;        /* shared with the host's ranks (or, without shared memory, this rank's alone) */
static int host_index;          /* this rank's slot */
static MPI_Comm control = MPI_COMM_NULL;

static double limit_s;
static atomic_llong since_ns; /* the current wait's start, or its last sign of life; 0: none */
static const char *_Atomic what_waits;
static atomic_int waiting_for_root;
static pthread_t thread;
static int thread_running;
static atomic_int stop_thread;

/* rank 0's signs of life: sent by the watchdog thread while `alive_on`, under alive_lock, which the
 * main thread takes to turn them off before it calls MPI again (MPI_THREAD_SERIALIZED) */
static int can_send_alive;
static pthread_mutex_t alive_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int alive_on;
static int root_owes_share;
static long long alive_every_ns;

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_ns(long long ns)
{
    struct timespec t = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
    nanosleep(&t, NULL);
}

/* ---- A line built with async-signal-safe steps only (the handlers use it too). ---- */

typedef struct {
    char text[640];
    size_t len;
} line;

static void put(line *l, const char *s)
{
    while (*s != '\0' && l->len < sizeof l->text - 2) l->text[l->len++] = *s++;
}

static void put_int(line *l, long long v)
{
    char digits[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do digits[n++] = (char)('0' + u % 10); while ((u /= 10) != 0);
    if (v < 0) put(l, "-");
    while (n > 0) {
        char c[2] = {digits[--n], '\0'};
        put(l, c);
    }
}

/* "rank R (pid P on HOST)" */
static void put_rank(line *l, int rank)
{
    put(l, "rank ");
    put_int(l, rank);
    if (peers == NULL || rank < 0 || rank >= world_size) return;
    put(l, " (pid ");
    put_int(l, peers[rank].pid);
    put(l, " on ");
    put(l, peers[rank].host);
    put(l, ")");
}

static void emit(line *l)
{
    l->text[l->len++] = '\n';
    ssize_t off = 0;
    while (off < (ssize_t)l->len) {
        ssize_t n = write(STDERR_FILENO, l->text + off, l->len - (size_t)off);
        if (n <= 0 && errno != EINTR) break;
        if (n > 0) off += n;
    }
}

/* ---- The host's ranks, as /proc shows them. ---- */

/* The state letter of /proc/PID/stat (R, S, D, T, t, ...), or 0 where the process is gone or a
 * zombie (ended, not yet reaped by its launcher). open/read/close: safe in a handler. */
static char proc_state(int pid)
{
    char path[40] = "/proc/";
    line p = {{0}, 0};
    put_int(&p, pid);
    memcpy(path + 6, p.text, p.len);
    memcpy(path + 6 + p.len, "/stat", 6);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    const char *close_paren = NULL; /* the command may hold ')': the state follows the last one */
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == ')') close_paren = buf + i;
    if (close_paren == NULL || close_paren + 2 >= buf + n) return '?';
    char state = close_paren[2];
    return state == 'Z' || state == 'X' ? 0 : state;
}

/* Why a rank of this host may be the one the others wait for, most telling first. */
typedef enum { SUSPECT_NONE, SUSPECT_STOPPED, SUSPECT_DIED, SUSPECT_EXITED, SUSPECT_BUSY } suspect;

static int inspectable(int i) { return i != host_index && host->slot[i].pid_ns == host->slot[host_index].pid_ns; }

static suspect judge(int i)
{
    const host_slot *s = &host->slot[i];
    const char st = proc_state(s->pid);
    const int state = atomic_load(&s->state);
    if (st == 'T' || st == 't') return SUSPECT_STOPPED;
    if (st == 0) return state == PEER_RUNNING ? SUSPECT_DIED : state == PEER_FINISHED ? SUSPECT_EXITED : SUSPECT_NONE;
    if (state == PEER_RUNNING && atomic_load(&s->waiting_since_ns) == 0) return SUSPECT_BUSY;
    return SUSPECT_NONE;
}

/* The host's rank most likely missed (lowest rank among the most telling), or -1. `only`: consider
 * that kind alone (SUSPECT_NONE: any); `rank`: that world rank alone (-1: any). */
static int find_suspect(suspect only, int rank, suspect *kind)
{
    int best = -1;
    *kind = SUSPECT_NONE;
    for (int i = 0; host != NULL && i < host->n; i++) {
        if (!inspectable(i) || (rank >= 0 && host->slot[i].world_rank != rank)) continue;
        suspect k = judge(i);
        if (k == SUSPECT_NONE || (only != SUSPECT_NONE && k != only)) continue;
        if (best < 0 || k < *kind || (k == *kind && host->slot[i].world_rank < best)) {
            best = host->slot[i].world_rank;
            *kind = k;
        }
    }
    return best;
}

int eq_mpi_watch_claim_report(void)
{
    int expected = 0;
    if (host == NULL) return 1;
    return atomic_compare_exchange_strong(&host->reported, &expected, 1);
}

void eq_mpi_watch_finished(void)
{
    if (host != NULL) atomic_store(&host->slot[host_index].state, PEER_FINISHED);
}

/* ---- The watchdog: one thread that ends the process when a wait outlasts the limit. ---- */

/* The current wait (or the time since rank 0's last sign of life) outlasted the limit: name the
 * rank that did not arrive, once, and end. Not a handler: it may format freely, but calls no MPI
 * function. */
static void timed_out(void)
{
    /* what this rank made (rank 0's --out private folder) goes first: every way on ends in _exit */
    eq_exit_cleanup_run();
    const char *what = atomic_load(&what_waits);
    const int for_root = atomic_load(&waiting_for_root);
    suspect kind;
    /* waiting for rank 0 alone, only rank 0 can be missing */
    int who = find_suspect(SUSPECT_NONE, for_root ? 0 : -1, &kind);
    if (who < 0) {
        /* Nobody on this host to blame: the missing rank runs elsewhere, and its host's line should
         * come first. Waiting for rank 0, rank 1 names it for all. */
        sleep_ns((long long)(EQ_MPI_WATCH_GRACE_S * 1e9));
        if (for_root && me != 1) _exit(2);
        if (for_root) who = 0;
    }
    if (!eq_mpi_watch_claim_report()) {
        sleep_ns(1000000000LL); /* the line is out: leave it the time to get through the launcher */
        _exit(2);
    }
    char waited[48];
    snprintf(waited, sizeof waited, "%g s (EQUIV_COLLECTIVE_TIMEOUT_S)", limit_s);
    line l = {{0}, 0};
    put(&l, "equiv: error: ");
    if (who < 0) {
        put_rank(&l, me);
        put(&l, ": ");
        put(&l, what);
        put(&l, " did not finish within ");
        put(&l, waited);
        put(&l, ", and no rank on this host is stopped, gone or outside a wait: a rank on another host hangs, "
                "or the ranks run different steps");
        emit(&l);
        _exit(2);
    }
    put_rank(&l, who);
    switch (kind) {
    case SUSPECT_STOPPED: put(&l, " is stopped (SIGSTOP, or a debugger holds it)"); break;
    case SUSPECT_DIED: put(&l, " is gone without finishing (killed by a signal, or crashed)"); break;
    case SUSPECT_EXITED: put(&l, " finished and exited while the others still wait (the ranks ran different steps)"); break;
    case SUSPECT_BUSY: put(&l, " is running outside any collective (still computing, or hung)"); break;
    case SUSPECT_NONE: put(&l, " sent no sign of life (stopped, hung or unreachable)"); break;
    }
    if (for_root) {
        put(&l, ": rank ");
        put_int(&l, me);
        put(&l, " heard nothing from it for ");
        put(&l, waited);
        put(&l, " while it waited for ");
        put(&l, what);
    } else {
        put(&l, ": it did not arrive at ");
        put(&l, what);
        put(&l, ", where rank ");
        put_int(&l, me);
        put(&l, " waited ");
        put(&l, waited);
    }
    emit(&l);
    _exit(2);
}

/* Rank 0 alone: every alive_every_ns a sign of life to every other rank, and at every tick a call
 * into MPI, so that MPI moves what is queued (a send that waits for room, a connection being made)
 * though the main thread calls none. */
static void signs_of_life(int send)
{
    static const int sign = 1;
    int flag = 0;
    pthread_mutex_lock(&alive_lock);
    if (atomic_load(&alive_on)) {
        for (int r = 1; send && r < world_size; r++) {
            MPI_Request req;
            /* one int leaves at once (eager); a peer that is gone is not this thread's to report */
            if (MPI_Isend(&sign, 1, MPI_INT, r, TAG_ALIVE, control, &req) == MPI_SUCCESS) MPI_Request_free(&req);
        }
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_ALIVE, control, &flag, MPI_STATUS_IGNORE); /* progress only */
    }
    pthread_mutex_unlock(&alive_lock);
}

static void *watchdog(void *unused)
{
    const long long tick = alive_every_ns < 100000000LL ? alive_every_ns : 100000000LL;
    long long last_alive = 0;
    while (!atomic_load(&stop_thread)) {
        const long long t = now_ns();
        if (atomic_load(&alive_on)) {
            const int send = t - last_alive >= alive_every_ns;
            signs_of_life(send);
            if (send) last_alive = t;
        }
        const long long since = atomic_load(&since_ns);
        if (since != 0 && (double)(t - since) * 1e-9 > limit_s) timed_out();
        sleep_ns(tick);
    }
    return unused;
}

static void alive_off(void)
{
    if (!atomic_load(&alive_on)) return;
    pthread_mutex_lock(&alive_lock); /* a sending in progress ends first */
    atomic_store(&alive_on, 0);
    pthread_mutex_unlock(&alive_lock);
}

void eq_mpi_watch_begin(const char *what)
{
    alive_off();
    const long long t = now_ns();
    atomic_store(&what_waits, what);
    atomic_store(&since_ns, t);
    if (host != NULL) atomic_store(&host->slot[host_index].waiting_since_ns, t);
}

void eq_mpi_watch_end(void)
{
    atomic_store(&since_ns, 0);
    if (host != NULL) atomic_store(&host->slot[host_index].waiting_since_ns, 0);
}

/* ---- Rank 0 alone, and the value it shares at the end. ---- */

void eq_mpi_watch_root_alone(void)
{
    if (me != 0 || world_size < 2) return;
    root_owes_share = 1;
    if (can_send_alive && thread_running) atomic_store(&alive_on, 1);
}

int eq_mpi_watch_root_owes_share(void) { return me == 0 && root_owes_share; }

eq_status eq_mpi_watch_share_root_int(int *value)
{
    eq_status st = EQ_OK;
    if (me == 0) {
        eq_mpi_watch_begin("the sending of rank 0's outcome");
        root_owes_share = 0;
        for (int r = 1; r < world_size && st == EQ_OK; r++)
            st = EQ_MPI_CHECK(MPI_Send(value, 1, MPI_INT, r, TAG_SHARE, control), "MPI_Send (rank 0's outcome)");
        eq_mpi_watch_end();
        return st;
    }
    MPI_Request req;
    int done = 0, sign = 0, got = 0;
    long long pause = 1000000LL; /* 1 ms, doubling to 20 ms: the CPU stays rank 0's */
    st = EQ_MPI_CHECK(MPI_Irecv(value, 1, MPI_INT, 0, TAG_SHARE, control, &req), "MPI_Irecv (rank 0's outcome)");
    if (st != EQ_OK) return st;
    atomic_store(&waiting_for_root, 1);
    eq_mpi_watch_begin("rank 0's references, comparisons and reports");
    while (st == EQ_OK && !done) {
        st = EQ_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test (rank 0's outcome)");
        for (got = 1; st == EQ_OK && got;) {
            st = EQ_MPI_CHECK(MPI_Iprobe(0, TAG_ALIVE, control, &got, MPI_STATUS_IGNORE), "MPI_Iprobe (rank 0 alive)");
            if (st == EQ_OK && got) {
                st = EQ_MPI_CHECK(MPI_Recv(&sign, 1, MPI_INT, 0, TAG_ALIVE, control, MPI_STATUS_IGNORE),
                                  "MPI_Recv (rank 0 alive)");
                atomic_store(&since_ns, now_ns()); /* rank 0 lives: the clock starts again */
            }
        }
        if (st == EQ_OK && !done) {
            sleep_ns(pause);
            if (pause < 20000000LL) pause *= 2;
        }
    }
    eq_mpi_watch_end();
    atomic_store(&waiting_for_root, 0);
    if (!done) MPI_Cancel(&req);
    return st;
}

/* ---- The signal handlers. ---- */

static eq_signal_chain chain;

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    }
    return "a signal";
}

/* "NAME, pid P": the process's name from /proc/P/comm ("mpirun", "slurmstepd"), where /proc shows
 * it. open/read/close: safe in a handler. */
static void put_process(line *l, int pid)
{
    char path[40] = "/proc/", name[32];
    line p = {{0}, 0};
    put_int(&p, pid);
    memcpy(path + 6, p.text, p.len);
    memcpy(path + 6 + p.len, "/comm", 6);
    const int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, name, sizeof name - 1) : 0;
    if (fd >= 0) close(fd);
    while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0')) n--;
    name[n > 0 ? n : 0] = '\0';
    for (ssize_t i = 0; i < n; i++)
        if (name[i] < ' ' || name[i] > '~') name[i] = '?'; /* one line, whatever the name */
    if (n > 0) {
        put(l, name);
        put(l, ", ");
    }
    put(l, "pid ");
    put_int(l, pid);
}

/* 1 when a rank of this host has finished (the job ends by itself: a launcher's signal then ends
 * what is left of it). */
static int any_finished(void)
{
    for (int i = 0; i < host->n; i++)
        if (atomic_load(&host->slot[i].state) == PEER_FINISHED) return 1;
    return 0;
}

/* The launcher ends every rank at once, and kills them all outright (SIGKILL) as soon as one has
 * ended: so a rank other than 0 ends only once rank 0 of its host has handled the signal (it
 * removes its --out private folder first, harness/base/exit_cleanup.h), or gone, or after 0.9 s
 * (Open MPI's mpirun kills outright 1 s after its SIGTERM in any case). nanosleep: safe. */
static void wait_for_root_handler(void)
{
    for (int i = 0; i < host->n; i++) {
        if (host->slot[i].world_rank != 0 || !inspectable(i)) continue;
        for (int ms = 0; ms < 900; ms += 5) {
            if (atomic_load(&host->slot[i].state) != PEER_RUNNING || proc_state(host->slot[i].pid) == 0) return;
            const struct timespec pause = {0, 5000000L};
            nanosleep(&pause, NULL);
        }
    }
}

/* Async-signal-safe throughout: atomics, open/read/write, nanosleep, getppid, sigaction, raise. */
static void on_signal(int sig, siginfo_t *info, void *context)
{
    /* what this rank made (rank 0's --out private folder) goes first; then its state says so */
    eq_exit_cleanup_run();
    if (host != NULL) {
        const int finished = atomic_load(&host->slot[host_index].state) == PEER_FINISHED || any_finished();
        atomic_store(&host->slot[host_index].state, PEER_SIGNALLED);
        suspect kind;
        const int sender = info != NULL ? (int)info->si_pid : 0;
        const int from_launcher = sender == 0 || sender == getppid();
        /* A rank of this host gone without finishing nor being signalled: the launcher's signal
         * follows its death. Else the signal is this rank's own unless its launcher sent it; the
         * launcher's, while the job runs and no line is out, means it was itself interrupted or
         * stopped (mpirun passes SIGINT and SIGTERM on as SIGTERM). The kernel's (no sender) and
         * the launcher's at a job's end are no news. */
        const int reported = atomic_load(&host->reported);
        int gone = reported ? -1 : find_suspect(SUSPECT_DIED, -1, &kind);
        const int launcher_stopped = from_launcher && sender != 0 && gone < 0 && !finished && !reported;
        if ((gone >= 0 || !from_launcher || launcher_stopped) && eq_mpi_watch_claim_report()) {
            line l = {{0}, 0};
            put(&l, "equiv: error: ");
            if (gone >= 0) {
                put_rank(&l, gone);
                put(&l, " was killed by a signal or crashed: the launcher ended the other ranks");
            } else if (launcher_stopped) {
                put(&l, "the launcher (");
                put_process(&l, sender);
                put(&l, ") ended the job with ");
                put(&l, signal_name(sig));
                put(&l, one_host ? " to every rank while none had failed" : " while no rank of this host had failed");
                put(&l, ": it was interrupted or stopped (Ctrl-C, kill, a time limit)");
            } else {
                put_rank(&l, me);
                put(&l, " was ended by ");
                put(&l, signal_name(sig));
                put(&l, " from ");
                put_process(&l, sender);
            }
            emit(&l);
        }
        if (from_launcher && me != 0) wait_for_root_handler();
    }
    /* then as the signal would have ended the process without us (harness/base/signal_chain.h) */
    eq_signal_chain_pass_on(&chain, sig, info, context);
}

/* ---- Start and stop. ---- */

static unsigned long long pid_namespace(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* The host's table in memory its ranks share: the host's first rank creates it (shm_open), the
 * others map it by name, and the name is removed once every rank holds it. Where any rank of the
 * host fails to map it, each keeps a table of its own (nothing to see of the others). */
static eq_status open_host_table(MPI_Comm world)
{
    eq_status st = EQ_OK;
    MPI_Comm node = MPI_COMM_NULL;
    int node_rank = 0, node_size = 1, fd = -1, mapped = 0, all_mapped = 0;
    char name[64] = "";
    void *map = MAP_FAILED;
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node),
                        "MPI_Comm_split_type (this host's ranks)"));
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_rank(node, &node_rank), "MPI_Comm_rank"));
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_size(node, &node_size), "MPI_Comm_size"));
    const size_t bytes = sizeof(host_table) + (size_t)node_size * sizeof(host_slot);
    if (node_rank == 0) {
        snprintf(name, sizeof name, "/equiv-watch-%d-%lld", (int)getpid(), now_ns());
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd >= 0 && ftruncate(fd, (off_t)bytes) != 0) {
            shm_unlink(name);
            close(fd);
            fd = -1;
        }
        if (fd < 0) name[0] = '\0';
    }
    EQ_TRY(EQ_MPI_CHECK(MPI_Bcast(name, sizeof name, MPI_CHAR, 0, node), "MPI_Bcast (the host table's name)"));
    if (node_rank != 0 && name[0] != '\0') fd = shm_open(name, O_RDWR, 0);
    if (fd >= 0 && name[0] != '\0') map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0) close(fd);
    mapped = map != MAP_FAILED;
    EQ_TRY(EQ_MPI_CHECK(MPI_Allreduce(&mapped, &all_mapped, 1, MPI_INT, MPI_MIN, node), "MPI_Allreduce (host table)"));
    if (node_rank == 0 && name[0] != '\0') shm_unlink(name);
    if (all_mapped) {
        host = map;
        host_index = node_rank;
    } else {
        if (mapped) munmap(map, bytes);
        host = calloc(1, sizeof(host_table) + sizeof(host_slot));
        if (host == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "rank %d: no memory for the watch's table", me);
            goto cleanup;
        }
        host_index = 0;
        node_size = 1;
    }
    host_slot *mine = &host->slot[host_index];
    mine->world_rank = me;
    mine->pid = (int)getpid();
    mine->pid_ns = pid_namespace();
    atomic_store(&mine->state, PEER_RUNNING);
    atomic_store(&mine->waiting_since_ns, 0);
    if (host_index == 0) host->n = node_size;
    /* every slot filled before any rank reads one */
    EQ_TRY(EQ_MPI_CHECK(MPI_Barrier(node), "MPI_Barrier (host table)"));
cleanup:
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
    return st;
}

static eq_status read_limit(void)
{
    const char *text = getenv("EQUIV_COLLECTIVE_TIMEOUT_S");
    limit_s = 300.0;
    if (text != NULL && text[0] != '\0') {
        char *end = NULL;
        limit_s = strtod(text, &end);
        if (end == text || *end != '\0' || !(limit_s >= 0.0 && limit_s < 1e7))
            return EQ_FAIL(EQ_ERR_USAGE, "EQUIV_COLLECTIVE_TIMEOUT_S wants seconds >= 0, got '%s'", text);
    }
    /* a sign of life every second, at least four within the limit, at most ten a second */
    alive_every_ns = (long long)(limit_s / 4 * 1e9);
    if (alive_every_ns > 1000000000LL) alive_every_ns = 1000000000LL;
    if (alive_every_ns < 100000000LL) alive_every_ns = 100000000LL;
    return EQ_OK;
}

/* Who every rank is, and the host's table: once per process (a later world of the same process
 * has the same ranks). */
static eq_status meet_the_ranks(MPI_Comm world)
{
    eq_status st = EQ_OK;
    int level = MPI_THREAD_SINGLE;
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_rank(world, &me), "MPI_Comm_rank"));
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_size(world, &world_size), "MPI_Comm_size"));
    EQ_TRY(EQ_MPI_CHECK(MPI_Query_thread(&level), "MPI_Query_thread"));
    can_send_alive = level >= MPI_THREAD_SERIALIZED;
    peers = calloc((size_t)world_size, sizeof *peers);
    if (peers == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "rank %d: no memory for the table of %d ranks", me, world_size);
        goto cleanup;
    }
    peer_info self = {(int)getpid(), ""};
    if (gethostname(self.host, sizeof self.host - 1) != 0 || self.host[0] == '\0')
        snprintf(self.host, sizeof self.host, "an unnamed host");
    EQ_TRY(EQ_MPI_CHECK(MPI_Allgather(&self, sizeof self, MPI_BYTE, peers, sizeof self, MPI_BYTE, world),
                        "MPI_Allgather (every rank's pid and host)"));
    one_host = 1;
    for (int r = 0; r < world_size; r++)
        if (strcmp(peers[r].host, self.host) != 0) one_host = 0;
    EQ_TRY(open_host_table(world));
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_dup(world, &control), "MPI_Comm_dup (the watch's messages)"));
    eq_signal_chain_arm(&chain, on_signal);
cleanup:
    return st;
}

eq_status eq_mpi_watch_start(MPI_Comm world)
{
    eq_status st = EQ_OK;
    if (users++ > 0) return EQ_OK;
    EQ_TRY(read_limit());
    if (control == MPI_COMM_NULL) EQ_TRY(meet_the_ranks(world));
    if (limit_s > 0.0) {
        atomic_store(&stop_thread, 0);
        if (pthread_create(&thread, NULL, watchdog, NULL) != 0) {
            st = EQ_FAIL(EQ_ERR_BACKEND, "rank %d: cannot start the collective watchdog thread", me);
            goto cleanup;
        }
        thread_running = 1;
    }
cleanup:
    return st;
}

void eq_mpi_watch_stop(void)
{
    if (users == 0 || --users > 0) return;
    alive_off();
    if (thread_running) {
        atomic_store(&stop_thread, 1);
        pthread_join(thread, NULL);
        thread_running = 0;
    }
    /* the tables, the handlers and the watch's communicator stay (MPI_Finalize frees it): the
     * process ends soon, and a signal until then is still told apart from a normal end */
}
