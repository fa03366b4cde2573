#include "harness/progress.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "harness/base/clock.h"
#include "harness/base/env.h"

#define PREFIX "equiv progress: " /* LINES; a terminal's line goes without it */
#define DEFAULT_DELAY_S 2.0
#define CHANGE_GAP_S 1.0 /* LINES: a phase change waits this long after the last line */
#define TICK_S 0.25      /* the ticker's pace */

static void maybe_write(eq_progress *p);

static double monotonic_seconds(void *ctx)
{
    (void)ctx;
    return eq_monotonic_seconds();
}

eq_progress_mode eq_progress_mode_for(FILE *stream, int verbose)
{
    if (stream != NULL && isatty(fileno(stream))) return EQ_PROGRESS_TTY;
    return verbose ? EQ_PROGRESS_LINES : EQ_PROGRESS_OFF;
}

static int terminal_width(FILE *out)
{
    struct winsize ws;
    if (out != NULL && ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    const char *cols = getenv("COLUMNS");
    int n = cols ? atoi(cols) : 0;
    return n >= 20 ? n : 80;
}

/* The ticker: every TICK_S, what maybe_write allows (a redraw, or the interval's line), unless
 * cleared; ends when asked. */
static void *tick(void *arg)
{
    eq_progress *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until); /* pthread_cond_timedwait's clock */
        until.tv_nsec += (long)(TICK_S * 1e9);
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        int rc = 0;
        while (!p->stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&p->wake, &p->lock, &until);
        if (!p->stop && !p->held) maybe_write(p);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

void eq_progress_init(eq_progress *p, FILE *out, eq_progress_mode mode, eq_progress_clock clock, void *clock_ctx)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->mode = out != NULL ? mode : EQ_PROGRESS_OFF;
    p->clock = clock != NULL ? clock : monotonic_seconds;
    p->clock_ctx = clock_ctx;
    p->delay = DEFAULT_DELAY_S;
    double v = 0.0;
    if (eq_env_number(EQ_ENV_PROGRESS_AFTER_S, &v)) p->delay = v;
    p->line_interval = 5.0;
    p->redraw_interval = 0.25;
    p->width = mode == EQ_PROGRESS_TTY ? terminal_width(out) : 0;
    p->start = p->clock(p->clock_ctx);
    p->last_output = -1.0;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (clock == NULL && p->mode != EQ_PROGRESS_OFF)
        p->ticking = pthread_create(&p->ticker, NULL, tick, p) == 0; /* no thread: progress at the calls */
}

void eq_progress_free(eq_progress *p)
{
    if (p == NULL) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    if (p->ticking) pthread_join(p->ticker, NULL);
    p->ticking = 0;
    eq_progress_clear(p);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
}

void eq_progress_plan(eq_progress *p, int n_runs)
{
    if (p == NULL) return;
    pthread_mutex_lock(&p->lock);
    p->n_runs = n_runs > 0 ? n_runs : 0;
    pthread_mutex_unlock(&p->lock);
}

void eq_progress_duration(double seconds, char *buf, size_t n)
{
    long s = seconds > 0.0 ? (long)(seconds + 0.5) : 0;
    if (s < 60) snprintf(buf, n, "%ld s", s);
    else if (s < 3600) snprintf(buf, n, "%ld min %02ld s", s / 60, s % 60);
    else snprintf(buf, n, "%ld h %02ld min", s / 3600, s / 60 % 60);
}

/* The fraction of the command done at `now`: finished runs plus the current run's declared units,
 * or, where it declared none, its time so far over the finished runs' mean; negative when that
 * run has outlasted the mean (no estimate then). */
static double fraction_done(const eq_progress *p, double now)
{
    double in_run = 0.0;
    if (p->work_total > 0.0) {
        in_run = p->work_done / p->work_total;
    } else if (p->run >= 2 && p->run_start > p->start) {
        in_run = (now - p->run_start) / ((p->run_start - p->start) / (double)(p->run - 1));
        if (in_run >= 1.0) return -1.0;
    }
    if (in_run > 1.0) in_run = 1.0;
    if (in_run < 0.0) in_run = 0.0;
    if (p->n_runs <= 0) return in_run;
    double runs_done = p->run > 0 ? (double)(p->run - 1) : 0.0;
    double f = (runs_done + in_run) / (double)p->n_runs;
    return f > 1.0 ? 1.0 : f;
}

/* printf onto the end of buf (n bytes, *len used), cut at the end. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void append(char *buf, size_t n, size_t *len, const char *fmt, ...)
{
    if (*len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *len, n - *len, fmt, ap);
    va_end(ap);
    if (k > 0) *len = *len + (size_t)k < n ? *len + (size_t)k : n - 1;
}

/* The line in two parts: what runs ("[run 2/4] gpt bf16 dp1-tp4: forward block 3/28") and when
 * (", 1 min 10 s, about 3 min left"). */
static void format_parts(const eq_progress *p, double now, char *what, size_t n_what, char *when, size_t n_when)
{
    char elapsed[32], left[32];
    size_t len = 0;
    what[0] = when[0] = '\0';
    if (p->n_runs > 0 && p->run > 0) append(what, n_what, &len, "[run %d/%d] ", p->run, p->n_runs);
    append(what, n_what, &len, "%s", p->run_name[0] ? p->run_name : "equiv");
    if (p->phase[0]) {
        append(what, n_what, &len, ": %s", p->phase);
        if (p->n_items > 0) append(what, n_what, &len, " %d/%d", p->item, p->n_items);
    }
    len = 0;
    const double t = now - p->start;
    eq_progress_duration(t, elapsed, sizeof elapsed);
    append(when, n_when, &len, ", %s", elapsed);
    const double f = fraction_done(p, now);
    if (f >= 0.005 && t > 0.0) {
        eq_progress_duration(t * (1.0 - f) / f, left, sizeof left);
        append(when, n_when, &len, ", about %s left", left);
    }
}

int eq_progress_format(const eq_progress *p, double now, char *buf, size_t n)
{
    char what[256], when[96];
    if (n == 0) return 0;
    format_parts(p, now, what, sizeof what, when, sizeof when);
    return snprintf(buf, n, "%s%s", what, when) < (int)n ? (int)strlen(buf) : (int)n - 1;
}

static void spaces(FILE *out, int n)
{
    for (int i = 0; i < n; i++) fputc(' ', out);
}

/* Wipes a drawn line; the caller holds the lock. */
static void wipe(eq_progress *p)
{
    if (p->mode != EQ_PROGRESS_TTY || p->drawn == 0) return;
    fputc('\r', p->out);
    spaces(p->out, p->drawn);
    fputc('\r', p->out);
    fflush(p->out);
    p->drawn = 0;
}

void eq_progress_clear(eq_progress *p)
{
    if (p == NULL) return;
    pthread_mutex_lock(&p->lock);
    wipe(p);
    p->held = 1;
    pthread_mutex_unlock(&p->lock);
}

/* Writes the status line if the mode, the delay and the pace allow it now; the caller holds the lock. */
static void maybe_write(eq_progress *p)
{
    if (p->mode == EQ_PROGRESS_OFF) return;
    const double now = p->clock(p->clock_ctx);
    if (now - p->start < p->delay) return;
    char key[sizeof p->last_key];
    snprintf(key, sizeof key, "%s|%s", p->run_name, p->phase);
    const int changed = strcmp(key, p->last_key) != 0;
    const double since = p->last_output < 0.0 ? 1e30 : now - p->last_output;
    if (p->mode == EQ_PROGRESS_TTY && !changed && since < p->redraw_interval) return;
    if (p->mode == EQ_PROGRESS_LINES && since < (changed ? CHANGE_GAP_S : p->line_interval)) return;
    char what[256], when[96];
    format_parts(p, now, what, sizeof what, when, sizeof when);
    if (p->mode == EQ_PROGRESS_TTY) {
        /* one terminal line, no prefix: what runs is cut, never the times */
        int room = p->width - 1 - (int)strlen(when);
        if (room < 10) room = 10;
        if ((int)strlen(what) > room) what[room] = '\0';
        const int shown = (int)strlen(what) + (int)strlen(when);
        fprintf(p->out, "\r%s%s", what, when);
        if (p->drawn > shown) spaces(p->out, p->drawn - shown);
        p->drawn = shown > p->drawn ? shown : p->drawn;
    } else {
        fprintf(p->out, PREFIX "%s%s\n", what, when);
    }
    fflush(p->out);
    p->last_output = now;
    snprintf(p->last_key, sizeof p->last_key, "%s", key);
}

void eq_progress_run(eq_progress *p, const char *name)
{
    if (p == NULL) return;
    pthread_mutex_lock(&p->lock);
    p->held = 0;
    p->run++;
    p->run_start = p->clock(p->clock_ctx);
    snprintf(p->run_name, sizeof p->run_name, "%s", name);
    p->work_total = p->work_done = 0.0;
    p->phase[0] = '\0';
    p->item = p->n_items = 0;
    maybe_write(p);
    pthread_mutex_unlock(&p->lock);
}

void eq_progress_work(eq_progress *p, double total_units)
{
    if (p == NULL) return;
    pthread_mutex_lock(&p->lock);
    p->work_total = total_units > 0.0 ? total_units : 0.0;
    p->work_done = 0.0;
    pthread_mutex_unlock(&p->lock);
}

void eq_progress_phase(eq_progress *p, const char *phase, int item, int n_items, double work_done)
{
    if (p == NULL) return;
    pthread_mutex_lock(&p->lock);
    p->held = 0;
    snprintf(p->phase, sizeof p->phase, "%s", phase);
    p->item = item;
    p->n_items = n_items;
    if (work_done >= 0.0) p->work_done = work_done;
    maybe_write(p);
    pthread_mutex_unlock(&p->lock);
}

void eq_progress_note(eq_progress *p, const char *fmt, ...)
{
    if (p == NULL || p->mode == EQ_PROGRESS_OFF) return;
    pthread_mutex_lock(&p->lock);
    wipe(p);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->out, fmt, ap);
    va_end(ap);
    fputc('\n', p->out);
    fflush(p->out);
    p->last_key[0] = '\0'; /* the status line is drawn again at the next phase */
    pthread_mutex_unlock(&p->lock);
}
