/* Progress on standard error for runs that take more than a few seconds: which run (case, dtype,
 * layout), which phase or layer, how far, and an estimate of the time left.
 *
 *     [run 2/2] gpt bf16 dp1-tp4: forward block 12/28, 1 min 10 s, about 1 min 35 s left
 *
 * Modes (eq_progress_mode_for): standard error a terminal: that line, redrawn in place ('\r') and
 * cut to the terminal's width from the end of the phase (the times stay). Not a terminal: nothing,
 * unless -v; then lines "equiv progress: <that line>", one when the run or phase changes (at most
 * one a second) and otherwise one every `line_interval` seconds at most. Nothing is written before
 * `delay` seconds have passed since eq_progress_init (EQUIV_PROGRESS_AFTER_S, default 2), so that
 * short runs stay quiet.
 *
 * The estimate: the command's work is `n_runs` runs of equal cost (a run's comparison counted in
 * it); a run that declares its work (eq_progress_work) reports the units done with each phase, so
 * the fraction done is f = (finished runs + units done / units) / n_runs, and the time left
 * elapsed x (1 - f) / f. A run that declares none counts its time over the finished runs' mean
 * instead, and shows no estimate once it has run longer than that mean.
 *
 * On the real clock, a ticker thread redraws the line (a quarter of a second) or writes the
 * interval's line while a phase runs long (one GEMM of the docs size): the elapsed time and the
 * estimate move even when the model does not call. Every function holds the struct's lock.
 *
 * Every function takes NULL as "no progress": models call eq_progress_phase(step->progress, ...)
 * whether or not anyone listens. eq_progress_clear must be called before anything is printed on
 * standard output or as an error line, so that the two never share a line: it wipes the line and
 * keeps the ticker quiet until the next run or phase. */
#ifndef EQUIV_HARNESS_PROGRESS_H
#define EQUIV_HARNESS_PROGRESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

typedef enum {
    EQ_PROGRESS_OFF = 0, /* silent */
    EQ_PROGRESS_TTY,     /* one line, redrawn in place */
    EQ_PROGRESS_LINES,   /* a line per phase change, at most one per line_interval */
} eq_progress_mode;

/* Seconds on a monotonic clock; ctx is the clock's own (tests pass a fake one). */
typedef double (*eq_progress_clock)(void *ctx);

typedef struct {
    FILE *out;
    eq_progress_mode mode;
    eq_progress_clock clock;
    void *clock_ctx;
    double delay;           /* seconds from init before the first output */
    double line_interval;   /* LINES: seconds between lines within one phase */
    double redraw_interval; /* TTY: seconds between redraws within one phase */
    int width;              /* TTY: the line is cut to width - 1 characters */
    double start;           /* clock at init */
    int n_runs, run;        /* the command's runs; the current one, 1-based (0: none yet) */
    char run_name[96];      /* "gpt bf16 dp1-tp4" */
    double run_start;       /* clock when the current run started */
    double work_total;      /* the current run's units (0: not declared) */
    double work_done;
    char phase[96];         /* "forward block" */
    int item, n_items;      /* item of n_items within the phase (n_items 0: none) */
    double last_output;     /* clock at the last line or redraw (-1: none yet) */
    char last_key[200];     /* run and phase of the last output, to see a change */
    int drawn;              /* TTY: characters on the line now */
    int held;               /* cleared: the ticker writes nothing until the next run or phase */
    pthread_mutex_t lock;   /* every function, and the ticker */
    pthread_cond_t wake;    /* ends the ticker's wait */
    pthread_t ticker;
    int ticking, stop;      /* the ticker runs; it is asked to end */
} eq_progress;

/* TTY when `stream` is a terminal, else LINES with verbose, else OFF. */
eq_progress_mode eq_progress_mode_for(FILE *stream, int verbose);

/* Starts the clock (a NULL clock: the monotonic clock, and a ticker thread unless the mode is OFF);
 * delay from EQUIV_PROGRESS_AFTER_S when it holds a number >= 0, else 2 s; the terminal's width.
 * Without a ticker (no thread could start, or a test's clock) the line moves at the calls only. */
void eq_progress_init(eq_progress *p, FILE *out, eq_progress_mode mode, eq_progress_clock clock, void *clock_ctx);

/* Ends the ticker, wipes the line, releases the lock. */
void eq_progress_free(eq_progress *p);

/* The command runs n_runs runs (the estimate's denominator). */
void eq_progress_plan(eq_progress *p, int n_runs);

/* The next run starts: its name ("gpt bf16 dp1-tp4"); its work is undeclared until eq_progress_work. */
void eq_progress_run(eq_progress *p, const char *name);

/* The current run's work, in the units its phases report done. */
void eq_progress_work(eq_progress *p, double total_units);

/* Where the run is: `phase` ("forward block"), item of n_items within it (n_items 0: no count),
 * and the units done so far (negative: unchanged). Writes when the mode and the clock say so. */
void eq_progress_phase(eq_progress *p, const char *phase, int item, int n_items, double work_done);

/* A line of its own on p->out (the -v notes): clears a drawn line first. Printed at once, whatever
 * the delay, unless the mode is OFF. */
void eq_progress_note(eq_progress *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Wipes a drawn line (TTY) so that what follows starts at column 0. */
void eq_progress_clear(eq_progress *p);

/* The status line at clock time `now` into buf (no prefix, no newline); its length. */
int eq_progress_format(const eq_progress *p, double now, char *buf, size_t n);

/* "42 s", "3 min 05 s", "2 h 07 min". */
void eq_progress_duration(double seconds, char *buf, size_t n);

#endif
