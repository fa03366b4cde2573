/* equiv bench: where the time of a set of runs goes, measured, never asserted.
 *
 * Each workload runs as its own child `equiv` (this binary, /proc/self/exe) with --out to a
 * scratch folder, as a user would run it, so that wait4() gives that run's CPU time and peak
 * memory alone. The child keeps its phase table (EQUIV_PHASE_TIMES, harness/base/phase_time.h): the
 * parent turns it into shares of the child's wall time as the parent saw it (process start and
 * exit included, under "other"). Before the workloads, an OpenBLAS SGEMM on a large square with
 * every worker thread gives this machine's fp32 GEMM peak, the yardstick of the GEMM rates.
 *
 * Stopped by SIGINT, SIGTERM or SIGHUP (`timeout` sends SIGTERM to this process alone), the bench
 * passes the signal on to the running child's process group (its own: the child and any reader it
 * started), waits for it, removes its scratch folder and --out's private folder, and then ends by
 * the signal: a child left running kept writing hundreds of MB into a scratch folder no one
 * removed. */
#define _DEFAULT_SOURCE /* wait4: the rusage of one child */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "harness/base/clock.h"
#include "harness/driver/commands.h"
#include "harness/driver/out_dir.h"
#include "harness/base/openblas.h"
#include "harness/base/parallel.h"
#include "harness/base/phase_time.h"
#include "harness/base/signal_chain.h"

#define MAX_CHILD_ARGS 16

typedef struct {
    const char *name;        /* what --only picks */
    const char *size;        /* --size of the full benchmark */
    const char *quick_size;  /* --size under --quick */
    const char *args[10];    /* the rest of the child's command line, NULL-terminated */
} workload;

/* The workloads of issue "Performance": seed 002's shapes where the case has them. */
static const workload workloads[] = {
    {"row_parallel_bf16", "docs", "ci", {"--case", "row_parallel", "--tp", "4", "--dtype", "bf16", NULL}},
    {"row_parallel_fp32", "docs", "ci", {"--case", "row_parallel", "--tp", "4", "--dtype", "fp32", NULL}},
    {"gpt_bench", "bench", "ci_lean", {"--case", "gpt", "--tp", "4", "--dtype", "bf16", NULL}},
    {"gpt_docs_fwd", "docs", "ci_lean", {"--case", "gpt", "--tp", "4", "--dtype", "bf16", "--forward-only", NULL}},
    {"spd_docs", "docs", "ci", {"--case", "spd", "--dp", "16", NULL}},
};
#define N_WORKLOADS ((int)(sizeof workloads / sizeof workloads[0]))

/* The table's share columns: the phases, then "other" (wall time in none of them). */
#define N_SHARES (EQ_PHASE_COUNT + 1)

typedef struct {
    int exit_code;                /* the child's: 0 as expected, 1 a comparison not as expected */
    double wall_s, cpu_s;         /* as the parent saw the child: fork to wait4, rusage */
    double peak_mib;              /* the child's peak resident memory */
    double gemm_flops;            /* 2 M N K summed over the child's GEMMs */
    double blas_cpu_s;            /* CPU time inside every BLAS GEMM call, the bound's included */
    double phase_s[EQ_PHASE_COUNT], phase_cpu_s[EQ_PHASE_COUNT];
    double phase_count[EQ_PHASE_COUNT];
    double share_pct[N_SHARES];   /* of wall_s; they sum to 100 */
} bench_result;

typedef struct {
    int n, threads;
    double seconds, gflops; /* the best of the repeats */
} sgemm_peak;

/* picked[i] = workload i is to run: every one without --only, else those it names. */
static eq_status pick_workloads(const char *only, int picked[N_WORKLOADS])
{
    for (int i = 0; i < N_WORKLOADS; i++) picked[i] = only == NULL;
    if (only == NULL) return EQ_OK;
    const char *p = only;
    for (;;) {
        const size_t len = strcspn(p, ",");
        int found = 0;
        for (int i = 0; i < N_WORKLOADS; i++)
            if (strlen(workloads[i].name) == len && strncmp(p, workloads[i].name, len) == 0) found = picked[i] = 1;
        if (!found) {
            char known[256] = "";
            for (int i = 0; i < N_WORKLOADS; i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", workloads[i].name);
            return EQ_FAIL(EQ_ERR_USAGE, "--only: unknown workload '%.*s' (known: %s)", (int)len, p, known);
        }
        if (p[len] == '\0') return EQ_OK;
        p += len + 1;
    }
}

/* C[n,n] = A B^T by OpenBLAS with every worker equiv's GEMMs use, the best of `reps` after one
 * warm-up. OpenBLAS's own threading is fine here: only the rate matters, not the rounding. */
static eq_status measure_sgemm_peak(int n, int reps, sgemm_peak *out)
{
    eq_status st = eq_openblas_open();
    if (st != EQ_OK) return st;
    float *a = malloc((size_t)n * (size_t)n * sizeof *a), *b = malloc((size_t)n * (size_t)n * sizeof *b),
          *c = malloc((size_t)n * (size_t)n * sizeof *c);
    if (a == NULL || b == NULL || c == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "bench: no memory for the %d x %d SGEMM", n, n);
        goto cleanup;
    }
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++) {
        a[i] = (float)((i * 7) % 13) * 0.0625f - 0.375f;
        b[i] = (float)((i * 5) % 11) * 0.0625f - 0.3125f;
    }
    out->n = n;
    out->threads = eq_parallel_workers();
    out->seconds = 1e300;
    eq_openblas.set_num_threads(out->threads);
    for (int r = 0; r <= reps; r++) {
        const double t0 = eq_monotonic_seconds();
        eq_openblas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        const double s = eq_monotonic_seconds() - t0;
        if (r > 0 && s < out->seconds) out->seconds = s;
    }
    out->gflops = 2.0 * (double)n * (double)n * (double)n / out->seconds * 1e-9;
cleanup:
    free(a);
    free(b);
    free(c);
    return st;
}

/* ---- a signal that stops the bench ---- */

static eq_signal_chain chain;
static volatile sig_atomic_t stop_signal; /* the signal that stops the bench, 0 while none has */
static volatile sig_atomic_t running_child; /* the workload's pid (and process group), 0 when none runs */

/* Notes the signal and passes it on to the running child; the bench stops where it next looks. */
static void on_signal(int sig, siginfo_t *info, void *context)
{
    (void)info;
    (void)context;
    if (stop_signal == 0) stop_signal = sig;
    if (running_child > 0) kill(-(pid_t)running_child, sig);
}

/* Removes dir and everything under it (what a child's --out holds: files, and the private
 * folder a failed run may leave). */
static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char path[4400];
            struct stat sb;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) remove_tree(path);
            else unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* The last non-empty line of a small text file (the child's standard error), or "". */
static void last_line(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *fp = fopen(path, "r");
    if (fp == NULL) return;
    char line[1024];
    while (fgets(line, sizeof line, fp) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] != '\0') snprintf(buf, len, "%s", line);
    }
    fclose(fp);
}

/* The child's command line: equiv ARGS --size S --out DIR. */
static int child_argv(const workload *w, int quick, const char *out_dir, const char *argv[MAX_CHILD_ARGS])
{
    int n = 0;
    argv[n++] = "equiv";
    for (int i = 0; w->args[i] != NULL; i++) argv[n++] = w->args[i];
    argv[n++] = "--size";
    argv[n++] = quick ? w->quick_size : w->size;
    argv[n++] = "--out";
    argv[n++] = out_dir;
    argv[n] = NULL;
    return n;
}

/* The child's phase table (harness/base/phase_time.h) into r. */
static eq_status read_phase_table(const char *path, const char *name, bench_result *r)
{
    eq_status st = EQ_OK;
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    json_t *phases = json_object_get(root, "phases");
    if (root == NULL || !json_is_number(json_object_get(root, "gemm_flops")) ||
        !json_is_number(json_object_get(root, "blas_cpu_seconds")) || !json_is_object(phases)) {
        st = EQ_FAIL(EQ_ERR_INTERNAL, "workload %s: no phase table from the child (%s)", name, path);
        goto cleanup;
    }
    r->gemm_flops = json_number_value(json_object_get(root, "gemm_flops"));
    r->blas_cpu_s = json_number_value(json_object_get(root, "blas_cpu_seconds"));
    for (int p = 0; p < EQ_PHASE_COUNT; p++) {
        json_t *one = json_object_get(phases, eq_phase_name((eq_phase)p));
        if (!json_is_number(json_object_get(one, "seconds")) || !json_is_number(json_object_get(one, "cpu_seconds")) ||
            !json_is_number(json_object_get(one, "count"))) {
            st = EQ_FAIL(EQ_ERR_INTERNAL, "workload %s: phase '%s' missing from %s", name, eq_phase_name((eq_phase)p),
                         path);
            goto cleanup;
        }
        r->phase_s[p] = json_number_value(json_object_get(one, "seconds"));
        r->phase_cpu_s[p] = json_number_value(json_object_get(one, "cpu_seconds"));
        r->phase_count[p] = json_number_value(json_object_get(one, "count"));
    }
cleanup:
    json_decref(root);
    return st;
}

/* Runs one workload as a child and measures it. scratch: a private folder of this bench. */
static eq_status run_workload(const workload *w, int quick, const char *scratch, const char *self, bench_result *r)
{
    char out_dir[4200], table[4200], err_path[4200];
    snprintf(out_dir, sizeof out_dir, "%s/out", scratch);
    snprintf(table, sizeof table, "%s/phases.json", scratch);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", scratch);
    unlink(table);
    const char *argv[MAX_CHILD_ARGS];
    child_argv(w, quick, out_dir, argv);
    memset(r, 0, sizeof *r);

    fflush(stdout);
    fflush(stderr);
    const double t0 = eq_monotonic_seconds();
    const pid_t pid = fork();
    if (pid < 0) return EQ_FAIL(EQ_ERR_BACKEND, "workload %s: fork: %s", w->name, strerror(errno));
    if (pid == 0) {
        setpgid(0, 0); /* its own process group, which a signal to the bench is passed on to */
        const int null_fd = open("/dev/null", O_WRONLY), err_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (null_fd < 0 || err_fd < 0 || dup2(null_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0 ||
            setenv("EQUIV_PHASE_TIMES", table, 1) != 0)
            _exit(127);
        execv(self, (char *const *)argv);
        _exit(127);
    }
    setpgid(pid, pid); /* as the child does: whichever runs first */
    running_child = pid;
    if (stop_signal != 0) kill(-pid, stop_signal); /* a signal that came before running_child was set */
    int status = 0;
    struct rusage ru;
    pid_t got;
    while ((got = wait4(pid, &status, 0, &ru)) < 0 && errno == EINTR) continue;
    running_child = 0;
    r->wall_s = eq_monotonic_seconds() - t0;
    remove_tree(out_dir);
    if (stop_signal != 0) return EQ_FAIL(EQ_ERR_BACKEND, "bench stopped by signal %d", (int)stop_signal);
    if (got < 0) return EQ_FAIL(EQ_ERR_BACKEND, "workload %s: wait4: %s", w->name, strerror(errno));
    char why[1024];
    last_line(err_path, why, sizeof why);
    if (WIFSIGNALED(status))
        return EQ_FAIL(EQ_ERR_BACKEND, "workload %s: equiv killed by signal %d%s%s", w->name, WTERMSIG(status),
                       why[0] ? ": " : "", why);
    r->exit_code = WEXITSTATUS(status);
    if (r->exit_code != 0 && r->exit_code != 1) /* 1: it ran, a comparison was not as expected */
        return EQ_FAIL(EQ_ERR_BACKEND, "workload %s: equiv exited with status %d%s%s", w->name, r->exit_code,
                       why[0] ? ": " : "", why[0] ? why : "(no message)");
    r->cpu_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
               1e-6 * (double)ru.ru_stime.tv_usec;
    r->peak_mib = (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
    eq_status st = read_phase_table(table, w->name, r);
    if (st != EQ_OK) return st;
    double in_phases = 0.0;
    for (int p = 0; p < EQ_PHASE_COUNT; p++) {
        r->share_pct[p] = r->wall_s > 0 ? 100.0 * r->phase_s[p] / r->wall_s : 0.0;
        in_phases += r->share_pct[p];
    }
    r->share_pct[EQ_PHASE_COUNT] = in_phases < 100.0 ? 100.0 - in_phases : 0.0; /* other */
    return EQ_OK;
}

static double gemm_gflops(const bench_result *r)
{
    return r->phase_s[EQ_PHASE_GEMM] > 0 ? r->gemm_flops / r->phase_s[EQ_PHASE_GEMM] * 1e-9 : 0.0;
}

/* The share of the child's CPU time inside BLAS GEMM calls, the rounding bound's included. */
static double blas_share(const bench_result *r) { return r->cpu_s > 0 ? 100.0 * r->blas_cpu_s / r->cpu_s : 0.0; }

static const char *share_name(int i) { return i < EQ_PHASE_COUNT ? eq_phase_name((eq_phase)i) : "other"; }

static void print_table_header(void)
{
    printf("%-18s %8s %8s %9s %9s %6s %8s %8s", "workload", "wall_s", "cpu_s", "peak_MiB", "gemm_GF/s", "%peak",
           "gemmcpu%", "blascpu%");
    for (int i = 0; i < N_SHARES; i++) {
        char head[32];
        snprintf(head, sizeof head, "%s%%", share_name(i));
        printf(" %*s", i == EQ_PHASE_COLLECTIVES ? 12 : 8, head);
    }
    printf("\n");
}

static void print_table_row(const char *name, const bench_result *r, const sgemm_peak *peak)
{
    const double cpu_share = r->cpu_s > 0 ? 100.0 * r->phase_cpu_s[EQ_PHASE_GEMM] / r->cpu_s : 0.0;
    printf("%-18s %8.2f %8.2f %9.1f %9.1f %6.1f %8.1f %8.1f", name, r->wall_s, r->cpu_s, r->peak_mib, gemm_gflops(r),
           100.0 * gemm_gflops(r) / peak->gflops, cpu_share, blas_share(r));
    for (int i = 0; i < N_SHARES; i++) printf(" %*.1f", i == EQ_PHASE_COLLECTIVES ? 12 : 8, r->share_pct[i]);
    printf("%s\n", r->exit_code ? "  (a comparison not as expected: exit 1)" : "");
    fflush(stdout);
}

static json_t *result_json(const workload *w, int quick, const bench_result *r, const sgemm_peak *peak)
{
    json_t *o = json_object(), *shares = json_object(), *phases = json_object(), *cmd = json_array();
    const char *argv[MAX_CHILD_ARGS];
    child_argv(w, quick, "DIR", argv);
    for (int i = 0; argv[i] != NULL; i++) json_array_append_new(cmd, json_string(argv[i]));
    json_object_set_new(o, "name", json_string(w->name));
    json_object_set_new(o, "command", cmd);
    json_object_set_new(o, "exit", json_integer(r->exit_code));
    json_object_set_new(o, "wall_s", json_real(r->wall_s));
    json_object_set_new(o, "cpu_s", json_real(r->cpu_s));
    json_object_set_new(o, "peak_mib", json_real(r->peak_mib));
    json_object_set_new(o, "gemm_flops", json_real(r->gemm_flops));
    json_object_set_new(o, "gemm_gflops", json_real(gemm_gflops(r)));
    json_object_set_new(o, "gemm_pct_of_sgemm_peak", json_real(100.0 * gemm_gflops(r) / peak->gflops));
    json_object_set_new(o, "gemm_pct_of_cpu",
                        json_real(r->cpu_s > 0 ? 100.0 * r->phase_cpu_s[EQ_PHASE_GEMM] / r->cpu_s : 0.0));
    json_object_set_new(o, "blas_cpu_s", json_real(r->blas_cpu_s));
    json_object_set_new(o, "blas_pct_of_cpu", json_real(blas_share(r)));
    for (int i = 0; i < N_SHARES; i++) json_object_set_new(shares, share_name(i), json_real(r->share_pct[i]));
    for (int p = 0; p < EQ_PHASE_COUNT; p++) {
        json_t *one = json_object();
        json_object_set_new(one, "seconds", json_real(r->phase_s[p]));
        json_object_set_new(one, "cpu_seconds", json_real(r->phase_cpu_s[p]));
        json_object_set_new(one, "count", json_integer((json_int_t)r->phase_count[p]));
        json_object_set_new(phases, eq_phase_name((eq_phase)p), one);
    }
    json_object_set_new(o, "share_of_wall_pct", shares);
    json_object_set_new(o, "phases", phases);
    return o;
}

eq_status eq_cmd_bench(const eq_cli *cli)
{
    eq_status st = EQ_OK;
    int picked[N_WORKLOADS];
    char scratch[4096] = "", self[4096];
    eq_out out = {0};
    sgemm_peak peak = {0};
    json_t *report = json_object(), *results = json_array();
    EQ_TRY(pick_workloads(cli->only, picked));
    const ssize_t self_len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (self_len <= 0) {
        st = EQ_FAIL(EQ_ERR_BACKEND, "bench: cannot find this program (/proc/self/exe): %s", strerror(errno));
        goto cleanup;
    }
    self[self_len] = '\0';
    if (report == NULL || results == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "bench: no memory for the report");
        goto cleanup;
    }
    EQ_TRY(eq_out_open(&out, cli->out_dir));
    eq_signal_chain_arm(&chain, on_signal); /* after eq_out_open's: this one runs first */
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/equiv-bench.XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(scratch) == NULL) {
        st = EQ_FAIL(EQ_ERR_IO, "bench: cannot create a scratch folder %s: %s", scratch, strerror(errno));
        scratch[0] = '\0';
        goto cleanup;
    }

    EQ_TRY(measure_sgemm_peak(cli->quick ? 512 : 3072, 3, &peak));
    printf("equiv bench%s: SGEMM peak %.1f GFLOP/s (OpenBLAS sgemm %d x %d x %d, %d threads, best of 3)\n",
           cli->quick ? " --quick" : "", peak.gflops, peak.n, peak.n, peak.n, peak.threads);
    printf("shares (%%) are of each run's wall time; gemm_GF/s = GEMM FLOPs / time in GEMM; %%peak of the SGEMM "
           "peak; gemmcpu%% = the GEMM phase's share of CPU time; blascpu%% = the share inside BLAS GEMM calls, "
           "the rounding bound's included\n");
    print_table_header();
    fflush(stdout); /* before the children's progress lines (-v) on standard error */
    for (int i = 0; i < N_WORKLOADS; i++) {
        if (!picked[i] || stop_signal != 0) continue;
        if (cli->verbose) fprintf(stderr, "equiv: bench: running %s\n", workloads[i].name);
        bench_result r;
        EQ_TRY(run_workload(&workloads[i], cli->quick, scratch, self, &r));
        print_table_row(workloads[i].name, &r, &peak);
        json_array_append_new(results, result_json(&workloads[i], cli->quick, &r, &peak));
    }
    if (stop_signal != 0) { /* before a workload: nothing more is written */
        st = EQ_FAIL(EQ_ERR_BACKEND, "bench stopped by signal %d", (int)stop_signal);
        goto cleanup;
    }

    if (eq_out_active(&out)) {
        json_t *p = json_object();
        json_object_set_new(p, "gflops", json_real(peak.gflops));
        json_object_set_new(p, "n", json_integer(peak.n));
        json_object_set_new(p, "threads", json_integer(peak.threads));
        json_object_set_new(p, "seconds", json_real(peak.seconds));
        json_object_set_new(report, "sgemm_peak", p);
        json_object_set_new(report, "quick", json_boolean(cli->quick));
        json_object_set(report, "workloads", results);
        char path[4400];
        EQ_TRY(eq_out_path(&out, "bench.json", path, sizeof path));
        if (json_dump_file(report, path, JSON_INDENT(2)) != 0) {
            st = EQ_FAIL(EQ_ERR_IO, "bench: cannot write %s", path);
            goto cleanup;
        }
        EQ_TRY(eq_out_commit(&out));
    }
cleanup:
    eq_signal_chain_disarm(&chain); /* first: the handler armed before it (eq_out_open's) comes back */
    eq_out_discard(&out);
    if (scratch[0] != '\0') remove_tree(scratch);
    json_decref(results);
    json_decref(report);
    if (stop_signal != 0) { /* everything removed: now end as the signal would have */
        fflush(NULL);
        signal(stop_signal, SIG_DFL);
        raise(stop_signal);
    }
    return st;
}
