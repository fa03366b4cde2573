/* libFuzzer harness: the JSON reports `equiv diff` reads (reports/report_diff.h).
 *
 * The input is diffed against itself and, in both directions, against a small valid report whose
 * cells match the seed corpus's (row_parallel bf16/fp32 dp1-tp2): a mutated report then pairs
 * cells and tensors with a real one, so the classification, the tables and the charts run, not
 * only the loader. The comment goes to memory, and the promise in report_diff.h is checked: it
 * stays under GitHub's 65536-character limit whatever the reports hold. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_file.h"
#include "reports/report_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Also fuzz/corpus/diff_json/minimal.json. Its bf16 cell holds the paths of the seeds' row_parallel
 * reports with worse values (an input no longer bit-exact, the block output outside its tolerance,
 * a second layer's output infinite and only here), so that either way round a seed's cell has
 * regressions, fixes and tensors on one side only, and the blocks and charts are written; the text
 * needs escaping. */
static const char fixed_report[] =
    "{\"equiv_report\": 1, \"comparisons\": ["
    "{\"test\": {\"case\": \"row_parallel\", \"dtype\": \"bf16\", \"dp\": 1, \"tp\": 2, \"algorithm\": \"ring\","
    " \"grads\": \"avg\", \"size\": \"ci\"}, \"results\": ["
    "{\"path\": \"layers/00/input\", \"layer\": 0, \"name\": \"input\", \"observed\": \"within\","
    " \"as_expected\": false, \"diagnosis\": \"differs\", \"metrics\": {\"max_abs\": 0.001, \"mean_abs\": 0.0001}},"
    "{\"path\": \"layers/00/out\", \"layer\": 0, \"name\": \"out\", \"observed\": \"OUTSIDE\","
    " \"as_expected\": false, \"diagnosis\": \"x4 <b>|`&\", \"metrics\": {\"max_abs\": 0.5, \"mean_abs\": 0.01}},"
    "{\"path\": \"layers/01/out\", \"layer\": 1, \"name\": \"out\", \"observed\": \"NON-FINITE\","
    " \"as_expected\": false, \"diagnosis\": \"inf\", \"metrics\": {\"max_abs\": \"Infinity\", \"mean_abs\": 0.5}}]},"
    "{\"test\": {\"case\": \"row_parallel\", \"dtype\": \"fp32\", \"dp\": 1, \"tp\": 2, \"algorithm\": \"ring\","
    " \"grads\": \"avg\", \"size\": \"ci\"}, \"results\": ["
    "{\"path\": \"layers/00/out\", \"layer\": 0, \"name\": \"out\", \"observed\": \"within\","
    " \"as_expected\": true, \"diagnosis\": \"rounding\", \"metrics\": {\"max_abs\": 3e-08, \"mean_abs\": 1e-09}}]}]}\n";

/* One diff into memory; traps when the comment breaks the size promise. */
static eq_status diff(const char *base, const char *head, const eq_diff_options *opt)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL) abort();
    int regressions = 0;
    eq_status st = eq_report_diff(base, head, opt, out, &regressions);
    fclose(out);
    if (st == EQ_OK && len >= 65536) __builtin_trap(); /* bytes >= characters: stricter still */
    if (st != EQ_OK && regressions != 0) __builtin_trap(); /* 0 on an error, report_diff.h says */
    free(text);
    eq_error_clear(); /* the first error is kept until cleared: each diff starts clean */
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *fixed = NULL;
    if (fixed == NULL) fixed = eq_fuzz_file(1, "fixed.json", (const uint8_t *)fixed_report, strlen(fixed_report));
    const char *input = eq_fuzz_file(0, "input.json", data, size);
    /* Growth 1 and floor 0: every rise is growth and nothing is noise, the other edge of the rules. */
    const eq_diff_options strict = {.growth = 1.0, .floor = 0.0};
    if (diff(input, input, NULL) != EQ_OK) return 0; /* not a report: the other two fail alike */
    diff(input, fixed, NULL);
    diff(fixed, input, &strict);
    return 0;
}
