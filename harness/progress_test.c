/* harness/progress.h on a fake clock and an in-memory stream: the line's wording and estimate,
 * the delay, the pace of lines and redraws, the terminal's in-place line and its clearing, and
 * silence when off. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/progress.h"
#include "harness/base/testing.h"

/* The fake clock: the test sets the time. */
static double now_s;
static double fake_clock(void *ctx)
{
    (void)ctx;
    return now_s;
}

typedef struct {
    FILE *fp;
    char *text;
    size_t size;
} sink;

static void sink_open(sink *s)
{
    memset(s, 0, sizeof *s);
    s->fp = open_memstream(&s->text, &s->size);
    if (s->fp == NULL) {
        fprintf(stderr, "progress_test: no memory for a stream\n");
        exit(1);
    }
}

/* What was written so far (the stream stays open). */
static const char *sink_text(sink *s)
{
    fflush(s->fp);
    return s->text ? s->text : "";
}

static void sink_close(sink *s)
{
    fclose(s->fp);
    free(s->text);
}

static void start(eq_progress *p, sink *s, eq_progress_mode mode)
{
    sink_open(s);
    now_s = 100.0;
    eq_progress_init(p, s->fp, mode, fake_clock, NULL);
    p->delay = 2.0;
    p->width = 100;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

static void check_durations(void)
{
    static const struct {
        double s;
        const char *want;
    } cases[] = {{0, "0 s"}, {0.4, "0 s"}, {42.4, "42 s"}, {59.6, "1 min 00 s"}, {185, "3 min 05 s"},
                 {3599, "59 min 59 s"}, {7620, "2 h 07 min"}, {-3, "0 s"}};
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eq_progress_duration(cases[i].s, buf, sizeof buf);
        EQ_EXPECT(strcmp(buf, cases[i].want) == 0, "%g s -> '%s', want '%s'", cases[i].s, buf, cases[i].want);
    }
}

/* The estimate: 2 runs of equal cost; run 1 half done after 10 s is a quarter of the work, so 30 s
 * are left; run 2 at 3/4 of its 8 units after 35 s: (1 + 0.75) / 2 = 0.875 done, 5 s left. */
static void check_format_and_estimate(void)
{
    eq_progress p;
    sink s;
    start(&p, &s, EQ_PROGRESS_OFF);
    char line[256];
    eq_progress_format(&p, now_s, line, sizeof line);
    EQ_EXPECT(strcmp(line, "equiv, 0 s") == 0, "before any run: '%s'", line);
    eq_progress_plan(&p, 2);
    eq_progress_run(&p, "gpt bf16 dp1-tp1");
    eq_progress_format(&p, now_s + 1, line, sizeof line);
    EQ_EXPECT(strcmp(line, "[run 1/2] gpt bf16 dp1-tp1, 1 s") == 0, "no work declared, no estimate: '%s'", line);
    eq_progress_work(&p, 28);
    eq_progress_phase(&p, "forward block", 14, 28, 14);
    eq_progress_format(&p, now_s + 10, line, sizeof line);
    EQ_EXPECT(strcmp(line, "[run 1/2] gpt bf16 dp1-tp1: forward block 14/28, 10 s, about 30 s left") == 0, "'%s'",
              line);
    eq_progress_run(&p, "gpt bf16 dp1-tp4");
    EQ_EXPECT(p.work_total == 0 && p.phase[0] == '\0', "a new run keeps the old one's work or phase");
    eq_progress_work(&p, 8);
    eq_progress_phase(&p, "reduce", 0, 0, 6);
    eq_progress_format(&p, now_s + 35, line, sizeof line);
    EQ_EXPECT(strcmp(line, "[run 2/2] gpt bf16 dp1-tp4: reduce, 35 s, about 5 s left") == 0, "'%s'", line);
    eq_progress_phase(&p, "capture", 0, 0, -1); /* units unchanged */
    EQ_EXPECT(p.work_done == 6, "work_done %g after a phase with -1", p.work_done);
    eq_progress_phase(&p, "capture", 0, 0, 80); /* more than declared: done, not past it */
    eq_progress_format(&p, now_s + 40, line, sizeof line);
    EQ_EXPECT(strcmp(line, "[run 2/2] gpt bf16 dp1-tp4: capture, 40 s, about 0 s left") == 0, "'%s'", line);
    /* a run that declares no work: its time over the finished runs' mean (2 runs of 10 s) */
    eq_progress_plan(&p, 4);
    now_s = 120.0;
    eq_progress_run(&p, "row_parallel bf16 dp1-tp4"); /* run 3 of 4, at 20 s */
    eq_progress_format(&p, 125.0, line, sizeof line);
    EQ_EXPECT(strcmp(line, "[run 3/4] row_parallel bf16 dp1-tp4, 25 s, about 15 s left") == 0, "'%s'", line);
    eq_progress_format(&p, 131.0, line, sizeof line);
    EQ_EXPECT(strcmp(line, "[run 3/4] row_parallel bf16 dp1-tp4, 31 s") == 0, "outlasted the mean: '%s'", line);
    eq_progress_run(&p, "gpt bf16 dp1-tp4");
    eq_progress_work(&p, 8);
    now_s = 100.0;
    /* an unplanned command: the run's own fraction */
    eq_progress_plan(&p, 0);
    eq_progress_phase(&p, "x", 0, 0, 2);
    eq_progress_format(&p, now_s + 60, line, sizeof line);
    EQ_EXPECT(strcmp(line, "gpt bf16 dp1-tp4: x, 1 min 00 s, about 3 min 00 s left") == 0, "'%s'", line);
    EQ_EXPECT(sink_text(&s)[0] == '\0', "OFF wrote '%s'", sink_text(&s));
    eq_progress_note(&p, "equiv: ran %s", "x");
    eq_progress_clear(&p);
    EQ_EXPECT(sink_text(&s)[0] == '\0', "OFF wrote a note or a clear: '%s'", sink_text(&s));
    eq_progress_free(&p);
    sink_close(&s);
}

/* -v, not a terminal: nothing before the delay; a line per change of run or phase (an item alone
 * is no change) at most one a second; within a phase a line every line_interval. */
static void check_lines(void)
{
    eq_progress p;
    sink s;
    start(&p, &s, EQ_PROGRESS_LINES);
    eq_progress_plan(&p, 1);
    eq_progress_run(&p, "mlp_stack bf16 dp1-tp4");
    eq_progress_work(&p, 16);
    for (int l = 0; l < 16; l++) {
        now_s = 100.0 + 0.1 * l; /* 1.5 s in all: under the delay */
        eq_progress_phase(&p, "layer", l + 1, 16, l);
    }
    EQ_EXPECT(sink_text(&s)[0] == '\0', "written before the delay: '%s'", sink_text(&s));
    now_s = 102.4;
    eq_progress_phase(&p, "layer", 1, 16, 0);
    EQ_EXPECT(strcmp(sink_text(&s), "equiv progress: [run 1/1] mlp_stack bf16 dp1-tp4: layer 1/16, 2 s\n") == 0,
              "first line: '%s'", sink_text(&s));
    now_s = 104.0; /* the same phase, 1.5 s later: under line_interval */
    eq_progress_phase(&p, "layer", 2, 16, 1);
    EQ_EXPECT(count(sink_text(&s), "\n") == 1, "a line within line_interval: '%s'", sink_text(&s));
    now_s = 107.6; /* 5.1 s after the first line */
    eq_progress_phase(&p, "layer", 3, 16, 2);
    EQ_EXPECT(count(sink_text(&s), "\n") == 2 && strstr(sink_text(&s), "layer 3/16, 8 s, about ") != NULL,
              "no line after line_interval: '%s'", sink_text(&s));
    now_s = 107.9; /* a new phase 0.3 s later: waits for the 1 s gap */
    eq_progress_phase(&p, "capture", 0, 0, 16);
    EQ_EXPECT(count(sink_text(&s), "\n") == 2, "a change within a second: '%s'", sink_text(&s));
    now_s = 108.7;
    eq_progress_phase(&p, "capture", 0, 0, 16);
    EQ_EXPECT(count(sink_text(&s), "\n") == 3 && strstr(sink_text(&s), ": capture, 9 s, about 0 s left\n") != NULL,
              "the change not shown a second later: '%s'", sink_text(&s));
    EQ_EXPECT(strchr(sink_text(&s), '\r') == NULL, "a carriage return in lines mode");
    eq_progress_note(&p, "equiv: ran %s in %.2f s", "mlp_stack", 8.5);
    EQ_EXPECT(strstr(sink_text(&s), "\nequiv: ran mlp_stack in 8.50 s\n") != NULL, "note: '%s'", sink_text(&s));
    eq_progress_free(&p);
    sink_close(&s);
}

/* A terminal: one line redrawn in place after '\r', padded over a longer previous line, cut to the
 * width from the phase's end, and wiped by eq_progress_clear. */
static void check_terminal(void)
{
    eq_progress p;
    sink s;
    start(&p, &s, EQ_PROGRESS_TTY);
    eq_progress_plan(&p, 2);
    eq_progress_run(&p, "gpt fp32 dp1-tp1");
    EQ_EXPECT(sink_text(&s)[0] == '\0', "drawn before the delay");
    now_s = 103.0;
    eq_progress_work(&p, 4);
    eq_progress_phase(&p, "replica 1/8, backward block", 2, 4, 2);
    const char *first = "\r[run 1/2] gpt fp32 dp1-tp1: replica 1/8, backward block 2/4, 3 s, about 9 s left";
    EQ_EXPECT(strcmp(sink_text(&s), first) == 0, "first draw: '%s'", sink_text(&s));
    now_s = 103.1; /* same phase, 0.1 s later: under redraw_interval */
    eq_progress_phase(&p, "replica 1/8, backward block", 3, 4, 3);
    EQ_EXPECT(strcmp(sink_text(&s), first) == 0, "redrawn too soon: '%s'", sink_text(&s));
    now_s = 103.5;
    eq_progress_phase(&p, "capture", 0, 0, 4);
    const char *second = "\r[run 1/2] gpt fp32 dp1-tp1: capture, 4 s, about 4 s left";
    size_t first_len = strlen(first) - 1, second_len = strlen(second) - 1;
    const char *text = sink_text(&s);
    EQ_EXPECT(strncmp(text + strlen(first), second, strlen(second)) == 0, "second draw: '%s'", text);
    /* the rest of the longer first line blanked */
    size_t pad = strspn(text + strlen(first) + strlen(second), " ");
    EQ_EXPECT(pad == first_len - second_len && strlen(text) == strlen(first) + strlen(second) + pad,
              "padding %zu, want %zu: '%s'", pad, first_len - second_len, text);
    EQ_EXPECT(strchr(text, '\n') == NULL, "a newline on the terminal line");
    size_t before = strlen(text);
    eq_progress_clear(&p);
    text = sink_text(&s);
    EQ_EXPECT(text[before] == '\r' && strspn(text + before + 1, " ") == first_len && text[before + 1 + first_len] == '\r' &&
                  text[before + 2 + first_len] == '\0',
              "clear: '%s'", text + before);
    before = strlen(text);
    eq_progress_clear(&p); /* nothing drawn: nothing to wipe */
    EQ_EXPECT(strlen(sink_text(&s)) == before, "a second clear wrote");
    /* a narrow terminal: the phase is cut, the times stay */
    p.width = 40;
    now_s = 110.0;
    eq_progress_run(&p, "gpt fp32 dp1-tp4");
    text = sink_text(&s) + before;
    EQ_EXPECT(text[0] == '\r' && strlen(text) == 40 && strstr(text, ", 10 s, about ") != NULL &&
                  strcmp(text + strlen(text) - 5, " left") == 0,
              "narrow: '%s' (%zu)", text, strlen(text));
    /* a note on a terminal: the line wiped, the note on its own line, the status line drawn again next */
    before = strlen(sink_text(&s));
    eq_progress_note(&p, "equiv: ran x");
    text = sink_text(&s) + before;
    EQ_EXPECT(text[0] == '\r' && strstr(text, "\requiv: ran x\n") != NULL, "note: '%s'", text);
    before = strlen(sink_text(&s));
    now_s = 110.05;
    eq_progress_phase(&p, "forward block", 1, 4, 0.0);
    EQ_EXPECT(sink_text(&s)[before] == '\r', "not drawn again after a note");
    eq_progress_free(&p);
    sink_close(&s);
}

/* The ticker (the real clock): a phase that runs long without a call still gets its lines; after
 * eq_progress_clear nothing more is written until the next phase; eq_progress_free ends it. */
static void check_ticker(void)
{
    eq_progress p;
    sink s;
    sink_open(&s);
    eq_progress_init(&p, s.fp, EQ_PROGRESS_LINES, NULL, NULL);
    EQ_EXPECT(p.ticking, "no ticker thread on the real clock");
    pthread_mutex_lock(&p.lock);
    p.delay = 0.0;
    p.line_interval = 0.1;
    pthread_mutex_unlock(&p.lock);
    eq_progress_run(&p, "row_parallel bf16 dp1-tp4");
    eq_progress_phase(&p, "one long GEMM", 0, 0, -1);
    /* up to 10 s for the ticker's second line, though it comes after a quarter of a second */
    int lines = 0;
    for (int i = 0; i < 1000 && lines < 2; i++) {
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
        pthread_mutex_lock(&p.lock);
        lines = count(sink_text(&s), ": one long GEMM, ");
        pthread_mutex_unlock(&p.lock);
    }
    EQ_EXPECT(lines >= 2, "the ticker wrote %d lines in 10 s: '%s'", lines, sink_text(&s));
    eq_progress_clear(&p);
    pthread_mutex_lock(&p.lock);
    size_t before = strlen(sink_text(&s));
    pthread_mutex_unlock(&p.lock);
    nanosleep(&(struct timespec){0, 600000000L}, NULL);
    pthread_mutex_lock(&p.lock);
    EQ_EXPECT(strlen(sink_text(&s)) == before, "written after clear: '%s'", sink_text(&s) + before);
    pthread_mutex_unlock(&p.lock);
    eq_progress_free(&p);
    EQ_EXPECT(!p.ticking, "the ticker still marked running after free");
    sink_close(&s);
}

int main(void)
{
    check_durations();
    check_format_and_estimate();
    check_lines();
    check_terminal();
    check_ticker();
    EQ_EXPECT(eq_progress_mode_for(NULL, 0) == EQ_PROGRESS_OFF, "no stream: off");
    EQ_EXPECT(eq_progress_phase != NULL, "linked");
    eq_progress_phase(NULL, "x", 1, 2, 3); /* NULL is no progress */
    eq_progress_run(NULL, "x");
    eq_progress_clear(NULL);
    eq_progress_note(NULL, "x");
    return eq_test_finish("progress_test");
}
