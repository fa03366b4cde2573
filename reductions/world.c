/* The rank world (reductions/world.h): rank discovery from the launcher's environment, the MPI
 * bootstrap with its dp and tp communicators, agreement on the outcome, and abort. */
#include "reductions/world.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equiv_config.h"
#include "harness/base/exit_cleanup.h"

#if EQUIV_HAVE_MPI
#include <mpi.h>

#include "reductions/mpi_transport.h"
#include "reductions/mpi_watch.h"
#endif

static eq_status parse_env_int(const char *name, const char *text, int lo, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > INT_MAX)
        return EQ_FAIL(EQ_ERR_USAGE, "environment variable %s='%s' is not an integer >= %d", name, text, lo);
    *out = (int)v;
    return EQ_OK;
}

eq_status eq_rank_env_read(const char *(*get)(const char *name), eq_rank_env *out)
{
    static const struct {
        const char *source, *rank, *size, *local;
    } families[] = {
        {"OMPI_COMM_WORLD", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
        {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
        {"MV2_COMM_WORLD", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK"},
        {"SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    };
    *out = (eq_rank_env){0, 0, 1, -1, "none"};
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        const char *rank = get(families[i].rank), *size = get(families[i].size), *local = get(families[i].local);
        if (rank == NULL && size == NULL) continue;
        if (rank == NULL || size == NULL)
            return EQ_FAIL(EQ_ERR_USAGE, "environment sets %s but not %s", rank ? families[i].rank : families[i].size,
                           rank ? families[i].size : families[i].rank);
        eq_status st = parse_env_int(families[i].rank, rank, 0, &out->rank);
        if (st == EQ_OK) st = parse_env_int(families[i].size, size, 1, &out->size);
        if (st == EQ_OK && local != NULL) st = parse_env_int(families[i].local, local, 0, &out->local_rank);
        if (st != EQ_OK) return st;
        if (out->rank >= out->size)
            return EQ_FAIL(EQ_ERR_USAGE, "environment says rank %d of %d (%s, %s)", out->rank, out->size,
                           families[i].rank, families[i].size);
        out->found = 1;
        out->source = families[i].source;
        return EQ_OK;
    }
    return EQ_OK;
}

int eq_world_is_root(const eq_world *w) { return w == NULL || w->rank == 0; }

eq_group eq_world_tp_group(const eq_world *w, eq_algo algo)
{
    if (w->has_collective_groups) return w->collective_tp;
    eq_group g = {w->transport, algo, w->layout.tp, w->tp_rank, 1, w->tp_comm, EQ_NCCL_CONFIG_DEFAULT};
    return g;
}

eq_group eq_world_dp_group(const eq_world *w, eq_algo algo)
{
    if (w->has_collective_groups) return w->collective_dp;
    eq_group g = {w->transport, algo, w->layout.dp, w->dp_rank, 1, w->dp_comm, EQ_NCCL_CONFIG_DEFAULT};
    return g;
}

const char *eq_env_get(const char *name) { return getenv(name); }

/* ---- The settings every rank must share. ---- */

uint64_t eq_digest(uint64_t h, const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

void eq_world_settings_add(eq_world_settings *s, const char *key, uint64_t digest, const char *fmt, ...)
{
    if (s->n == 0) s->digest = EQ_DIGEST_START;
    if (s->n >= EQ_WORLD_SETTINGS_MAX) return; /* world_test holds the run's list below the cap */
    eq_world_setting *e = &s->setting[s->n++];
    char whole[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(whole, sizeof whole, fmt, ap);
    va_end(ap);
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    e->digest = digest != 0 ? digest : eq_digest(EQ_DIGEST_START, whole, strlen(whole));
    /* one line whatever a name holds (a case name with a newline must not forge a second line) */
    size_t n = strlen(whole);
    if (n >= sizeof e->shown) {
        n = sizeof e->shown - 4;
        memcpy(whole + n, "...", 4);
        n += 3;
    }
    for (size_t i = 0; i < n; i++) e->shown[i] = (unsigned char)whole[i] < ' ' || whole[i] == 0x7f ? '?' : whole[i];
    s->digest = eq_digest(s->digest, e->key, strlen(e->key) + 1);
    s->digest = eq_digest(s->digest, &e->digest, sizeof e->digest);
}

static const eq_world_setting *setting_of(const eq_world_settings *s, const char *key)
{
    for (int i = 0; i < s->n && i < EQ_WORLD_SETTINGS_MAX; i++)
        if (strncmp(s->setting[i].key, key, sizeof s->setting[i].key) == 0) return &s->setting[i];
    return NULL;
}

int eq_world_settings_differ(const eq_world_settings *mine, int rank, const eq_world_settings *root, char *msg,
                             size_t len)
{
    const eq_world_setting *first_mine = NULL, *first_root = NULL;
    const char *first_key = NULL;
    int n_differ = 0;
    if (len > 0) msg[0] = '\0';
    if (mine->digest == root->digest && mine->n == root->n) return 0;
    /* every key of either side, rank 0's order first */
    for (int side = 0; side < 2; side++) {
        const eq_world_settings *s = side == 0 ? root : mine;
        for (int i = 0; i < s->n && i < EQ_WORLD_SETTINGS_MAX; i++) {
            const char *key = s->setting[i].key;
            if (side == 1 && setting_of(root, key) != NULL) continue; /* seen from rank 0's side */
            const eq_world_setting *a = setting_of(mine, key), *b = setting_of(root, key);
            if (a != NULL && b != NULL && a->digest == b->digest) continue;
            if (n_differ++ == 0) first_mine = a, first_root = b, first_key = key;
        }
    }
    if (n_differ == 0) return 0;
    char key[EQ_WORLD_SETTING_KEY + 1];
    snprintf(key, sizeof key, "%.*s", EQ_WORLD_SETTING_KEY, first_key);
    snprintf(msg, len, "rank %d runs %s%.*s, rank 0 %s%.*s", rank, first_mine ? "" : "no ",
             EQ_WORLD_SETTING_SHOWN, first_mine ? first_mine->shown : key, first_root ? "" : "no ",
             EQ_WORLD_SETTING_SHOWN, first_root ? first_root->shown : key);
    return n_differ;
}

#if EQUIV_HAVE_MPI

static eq_status new_comm(void **slot)
{
    MPI_Comm *c = malloc(sizeof *c);
    if (c == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for a communicator");
    *c = MPI_COMM_NULL;
    *slot = c;
    return EQ_OK;
}

/* Every rank, once the watch runs: rank 0's settings to all, each rank's own compared with them,
 * and the first and last rank that differ found by one reduction. Where any differs, the first
 * prints the line and every rank fails with it out. */
static eq_status check_same_settings(eq_world *w, const eq_world_settings *mine)
{
    eq_status st = EQ_OK;
    char differs[700];
    eq_world_settings *root = malloc(sizeof *root);
    if (root == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "rank %d: no memory for the settings check", w->rank);
    if (w->rank == 0) *root = *mine;
    eq_mpi_watch_begin("the check that every rank runs the same settings");
    st = EQ_MPI_CHECK(MPI_Bcast(root, (int)sizeof *root, MPI_BYTE, 0, *(MPI_Comm *)w->world_comm),
                      "MPI_Bcast (rank 0's settings)");
    const int n_differ = st == EQ_OK ? eq_world_settings_differ(mine, w->rank, root, differs, sizeof differs) : 0;
    const int mismatch = n_differ > 0;
    /* (-first, last) by MAX: the first and the last rank whose settings differ */
    int span[2] = {mismatch ? -w->rank : -INT_MAX, mismatch ? w->rank : -1};
    if (st == EQ_OK)
        st = EQ_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, span, 2, MPI_INT, MPI_MAX, *(MPI_Comm *)w->world_comm),
                          "MPI_Allreduce (which ranks run other settings)");
    eq_mpi_watch_end();
    if (st != EQ_OK || span[0] == -INT_MAX) goto cleanup;
    const int first = -span[0], last = span[1];
    if (w->rank == first && eq_mpi_watch_claim_report()) {
        char more[160] = "";
        if (n_differ > 1)
            snprintf(more, sizeof more, "%d more setting%s", n_differ - 1, n_differ > 2 ? "s differ" : " differs");
        if (last > first)
            snprintf(more + strlen(more), sizeof more - strlen(more), "%srank %d differs from rank 0 too%s",
                     more[0] ? "; " : "", last, last > first + 1 ? ", and maybe ranks between" : "");
        fprintf(stderr, "equiv: error: %s%s%s%s: every rank must run the same settings\n", differs,
                more[0] ? " (" : "", more, more[0] ? ")" : "");
        fflush(stderr);
    }
    w->error_out = 1;
    st = EQ_FAIL(EQ_ERR_USAGE, "rank %d runs other settings than rank 0", first);
cleanup:
    free(root);
    return st;
}

eq_status eq_world_init_mpi(eq_world *w, eq_layout layout, const eq_world_settings *settings)
{
    eq_status st = EQ_OK;
    eq_rank_env env;
    int initialized = 0, provided = 0;
    memset(w, 0, sizeof *w);
    w->layout = layout;
    w->transport = &eq_transport_mpi;
    EQ_TRY(eq_rank_env_read(eq_env_get, &env));
    MPI_Initialized(&initialized);
    if (!initialized) {
        /* SERIALIZED: the main thread calls MPI (the CPU backend's threads never do), except while
         * rank 0 works alone, when the watchdog thread sends its signs of life and the main thread
         * calls none (reductions/mpi_watch.h). With less, the waits keep the plain limit. */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            st = EQ_FAIL(EQ_ERR_BACKEND, "MPI_Init_thread failed (launched by %s, rank %d)", env.source, env.rank);
            goto cleanup;
        }
        w->initialized_mpi = 1;
    }
    EQ_TRY(new_comm(&w->world_comm));
    EQ_TRY(new_comm(&w->tp_comm));
    EQ_TRY(new_comm(&w->dp_comm));
    MPI_Comm *world = w->world_comm, *tp = w->tp_comm, *dp = w->dp_comm;
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, world), "MPI_Comm_dup"));
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_rank(*world, &w->rank), "MPI_Comm_rank"));
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_size(*world, &w->size), "MPI_Comm_size"));
    EQ_TRY(eq_mpi_transport_init());
    /* the watch first (the same steps on every rank, whatever it runs), so that every wait after
     * it is bounded, the settings check's too */
    w->watching = 1;
    EQ_TRY(eq_mpi_watch_start(*world));
    if (settings != NULL) EQ_TRY(check_same_settings(w, settings));
    w->local_rank = env.local_rank;
    if (env.found && (env.rank != w->rank || env.size != w->size)) {
        st = EQ_FAIL(EQ_ERR_USAGE, "rank %d: the environment (%s) says rank %d of %d, MPI says rank %d of %d",
                     w->rank, env.source, env.rank, env.size, w->rank, w->size);
        goto cleanup;
    }
    if (w->size != layout.dp * layout.tp) {
        st = EQ_FAIL(EQ_ERR_USAGE, "--comm mpi runs one rank per process: dp %d x tp %d needs %d processes, "
                     "the launcher started %d (mpirun -np %d)",
                     layout.dp, layout.tp, layout.dp * layout.tp, w->size, layout.dp * layout.tp);
        goto cleanup;
    }
    w->dp_rank = eq_world_dp_rank(layout, w->rank);
    w->tp_rank = eq_world_tp_rank(layout, w->rank);
    /* tp group: same dp_rank, ordered by tp_rank; dp group: same tp_rank, ordered by dp_rank */
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_split(*world, w->dp_rank, w->tp_rank, tp), "MPI_Comm_split (tp)"));
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_split(*world, w->tp_rank, w->dp_rank, dp), "MPI_Comm_split (dp)"));
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_set_errhandler(*tp, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
    EQ_TRY(EQ_MPI_CHECK(MPI_Comm_set_errhandler(*dp, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
cleanup:
    return st;
}

static void free_comm(void **slot)
{
    MPI_Comm *c = *slot;
    if (c != NULL && *c != MPI_COMM_NULL) MPI_Comm_free(c);
    free(c);
    *slot = NULL;
}

void eq_world_free(eq_world *w)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (w->release_collectives != NULL) w->release_collectives(w->collectives);
    w->collectives = NULL, w->release_collectives = NULL, w->has_collective_groups = 0;
    if (!finalized) {
        eq_mpi_transport_free();
        free_comm(&w->tp_comm);
        free_comm(&w->dp_comm);
        free_comm(&w->world_comm);
        if (w->initialized_mpi) {
            /* MPI_Finalize waits for every rank: watched too, and this rank's end is no failure */
            eq_mpi_watch_finished();
            eq_mpi_watch_begin("MPI_Finalize (the end of the run)");
            MPI_Finalize();
            eq_mpi_watch_end();
        }
    }
    if (w->watching) eq_mpi_watch_stop();
    w->watching = 0;
    w->initialized_mpi = 0;
}

static int error_printed;

int eq_world_error_printed(void) { return error_printed; }

eq_status eq_world_finish(eq_world *w, eq_status mine)
{
    int failed_rank = -1, zero = 0;
    eq_status st = mine;
    /* rank 0 failed alone while the others wait for its outcome: they get it first (the agreement
     * then carries rank 0's error) */
    if (eq_mpi_watch_root_owes_share()) (void)eq_world_share_int(w, &zero);
    if (w->world_comm != NULL && *(MPI_Comm *)w->world_comm != MPI_COMM_NULL) st = eq_world_agree(w, mine, &failed_rank);
    else if (mine != EQ_OK) failed_rank = w->rank; /* MPI never started: each rank says why */
    const int line_out = w->error_out; /* the settings check printed it */
    if (st != EQ_OK && failed_rank == w->rank && !line_out && (!w->watching || eq_mpi_watch_claim_report())) {
        fprintf(stderr, "equiv: error: rank %d: %s [%s]\n", w->rank, eq_error_message(), eq_error_where());
        fflush(stderr);
    }
    if (st != EQ_OK) error_printed = 1; /* by the failing rank: the others stay quiet */
    eq_world_free(w);
    return st;
}

eq_status eq_world_agree(const eq_world *w, eq_status mine, int *failed_rank)
{
    /* (first failing rank, its status) by MIN over rank, then its status broadcast */
    int first = mine == EQ_OK ? INT_MAX : w->rank, code = (int)mine;
    eq_mpi_watch_begin("the agreement on the run's outcome");
    eq_status st = EQ_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, *(MPI_Comm *)w->world_comm),
                                "MPI_Allreduce (agreement)");
    if (st == EQ_OK && first != INT_MAX)
        st = EQ_MPI_CHECK(MPI_Bcast(&code, 1, MPI_INT, first, *(MPI_Comm *)w->world_comm), "MPI_Bcast (agreement)");
    eq_mpi_watch_end();
    *failed_rank = first == INT_MAX ? -1 : first;
    if (st != EQ_OK) return st;
    return (eq_status)code;
}

void eq_world_root_alone(const eq_world *w)
{
    if (w->watching) eq_mpi_watch_root_alone();
}

eq_status eq_world_share_int(const eq_world *w, int *value)
{
    if (!w->watching) return EQ_FAIL(EQ_ERR_INTERNAL, "rank %d: a share in a world that is not started", w->rank);
    return eq_mpi_watch_share_root_int(value);
}

eq_status eq_world_broadcast_bytes(const eq_world *w, void *buf, size_t bytes, int root)
{
    if (bytes > (size_t)INT_MAX || root < 0 || root >= w->size)
        return EQ_FAIL(EQ_ERR_INTERNAL, "rank %d: broadcast of %zu bytes from rank %d of %d", w->rank, bytes, root,
                       w->size);
    eq_mpi_watch_begin("a broadcast over the world");
    eq_status st = EQ_MPI_CHECK(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, *(MPI_Comm *)w->world_comm), "MPI_Bcast");
    eq_mpi_watch_end();
    return st;
}

#define GATHER_CHUNK ((size_t)1 << 30)

eq_status eq_world_gather_bytes(const eq_world *w, const void *mine, size_t bytes, void **parts, size_t *sizes)
{
    eq_status st = EQ_OK;
    MPI_Comm comm = *(MPI_Comm *)w->world_comm;
    uint64_t n = bytes, *all = NULL;
    if (w->rank == 0) {
        all = malloc((size_t)w->size * sizeof *all);
        if (all == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "rank 0: no memory to gather %d ranks' results", w->size);
        for (int r = 0; r < w->size; r++) parts[r] = NULL, sizes[r] = 0;
    }
    eq_mpi_watch_begin("the gather of every rank's results to rank 0");
    EQ_TRY(EQ_MPI_CHECK(MPI_Gather(&n, (int)sizeof n, MPI_BYTE, all, (int)sizeof n, MPI_BYTE, 0, comm),
                        "MPI_Gather (the lengths of the results)"));
    if (w->rank != 0) {
        for (size_t at = 0; at < bytes; at += GATHER_CHUNK) {
            const size_t len = bytes - at < GATHER_CHUNK ? bytes - at : GATHER_CHUNK;
            EQ_TRY(EQ_MPI_CHECK(MPI_Send((const char *)mine + at, (int)len, MPI_BYTE, 0, 0, comm),
                                "MPI_Send (results to rank 0)"));
        }
        goto cleanup;
    }
    for (int r = 0; r < w->size; r++) {
        char *p = malloc(all[r] > 0 ? (size_t)all[r] : 1);
        if (p == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "rank 0: no memory for rank %d's %llu bytes of results", r,
                         (unsigned long long)all[r]);
            goto cleanup;
        }
        parts[r] = p;
        sizes[r] = (size_t)all[r];
        if (r == 0) {
            if (bytes > 0) memcpy(p, mine, bytes);
            continue;
        }
        for (size_t at = 0; at < sizes[r]; at += GATHER_CHUNK) {
            const size_t len = sizes[r] - at < GATHER_CHUNK ? sizes[r] - at : GATHER_CHUNK;
            EQ_TRY(EQ_MPI_CHECK(MPI_Recv(p + at, (int)len, MPI_BYTE, r, 0, comm, MPI_STATUS_IGNORE),
                                "MPI_Recv (a rank's results)"));
        }
    }
cleanup:
    eq_mpi_watch_end();
    free(all);
    return st;
}

void eq_world_abort(const eq_world *w)
{
    if (!w->watching || eq_mpi_watch_claim_report()) { /* else the job's error line is out already */
        fprintf(stderr, "equiv: error: rank %d: %s [%s]\n", w->rank, eq_error_message(), eq_error_where());
        fflush(stderr);
    }
    eq_exit_cleanup_run(); /* rank 0's --out private folder: MPI_Abort returns to no cleanup */
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2); /* not reached */
}

#else /* no MPI in this build */

eq_status eq_world_init_mpi(eq_world *w, eq_layout layout, const eq_world_settings *settings)
{
    (void)settings;
    memset(w, 0, sizeof *w);
    w->layout = layout;
    return EQ_FAIL(EQ_ERR_USAGE, "this equiv was built without MPI: install libopenmpi-dev and rebuild "
                   "(meson configure -Dmpi=enabled)");
}

void eq_world_free(eq_world *w) { (void)w; }

eq_status eq_world_agree(const eq_world *w, eq_status mine, int *failed_rank)
{
    (void)w;
    *failed_rank = mine == EQ_OK ? -1 : 0;
    return mine;
}

void eq_world_root_alone(const eq_world *w) { (void)w; }

eq_status eq_world_share_int(const eq_world *w, int *value)
{
    (void)w;
    (void)value;
    return EQ_OK;
}

int eq_world_error_printed(void) { return 0; }

eq_status eq_world_broadcast_bytes(const eq_world *w, void *buf, size_t bytes, int root)
{
    (void)w;
    (void)buf;
    (void)bytes;
    (void)root;
    return EQ_FAIL(EQ_ERR_USAGE, "this equiv was built without MPI");
}

eq_status eq_world_finish(eq_world *w, eq_status mine)
{
    (void)w;
    return mine;
}

eq_status eq_world_gather_bytes(const eq_world *w, const void *mine, size_t bytes, void **parts, size_t *sizes)
{
    (void)w;
    (void)mine;
    (void)bytes;
    (void)parts;
    (void)sizes;
    return EQ_FAIL(EQ_ERR_USAGE, "this equiv was built without MPI");
}

void eq_world_abort(const eq_world *w)
{
    (void)w;
    fprintf(stderr, "equiv: error: %s [%s]\n", eq_error_message(), eq_error_where());
    eq_exit_cleanup_run();
    exit(2);
}

#endif
