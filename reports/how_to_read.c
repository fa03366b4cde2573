/* The glossary of the reports (how_to_read.h). */
#include "reports/how_to_read.h"

#include "reports/plot_svg.h"

const eq_glossary_entry eq_glossary[] = {
    {"verdict", "pass: the tensor shows what the case expects of it; FAIL: it does not. The first column of "
                "every table."},
    {"observed", "what the comparison saw, one word per state: bit-exact (every bit equal), within (differs, every "
                 "element inside the tolerance |d| <= atol + rtol |ref|), OUTSIDE (some element outside it), "
                 "NON-FINITE (NaN or Inf where the other run has none or another; a NaN in both runs; nothing finite in "
                 "either; Inf at the same places with a finite rest compares as equal there). Followed by (expected X) where the row fails "
                 "or the tensor has an expectation of its own: bit_exact, within, differs (must not be bit-exact), "
                 "must_fail (must be OUTSIDE or NON-FINITE)."},
    {"max |d|", "the largest |test - ref| over the elements finite in both runs, computed in fp64; mean |d| and "
                "median |d| are its mean and median. Numbers are printed with three significant digits."},
    {"%>1e-4", "the share of elements whose |d| exceeds 1e-4 (likewise %>1e-3, %>1e-2): seed 002's thresholds."},
    {"ULP@max", "the max |d| in units in the last place (ULPs) of the run's dtype (bf16: 8 significand bits, fp32: "
                "24, fp64: 53; a loss kept in fp64 counts its run's dtype), at the scale s = max(|ref|, rms(ref)) of "
                "its element: one ULP is one rounding step of the tensor's typical values."},
    {"max ULP", "the largest |d_i| / ulp(s_i) over the elements, s_i = max(|ref_i|, rms(ref)): a zero or near-zero "
                "reference, or a sign change, is measured at the tensor's typical magnitude rather than at the "
                "subnormal spacing (an all-zero reference uses rms(test))."},
    {"mean(dist/ref)", "the mean of test_i / ref_i over the elements with |ref_i| >= rms(ref), well above the "
                       "rounding noise (seed 001's grad-check line): about 1 when the runs agree, 1/8 or 16 for a "
                       "scaling bug; - when no element qualifies. It is not the fitted factor: that is ls."},
    {"worst rel", "max |d| / max |ref|: the error at the tensor's own scale."},
    {"ls", "(in a diagnosis) the least-squares scale <test, ref> / <ref, ref>: the uniform factor that best maps "
           "the reference onto the test run; a diagnosis names a factor when ls is off 1 by more than 1% and cos "
           "exceeds 0.999."},
    {"cos", "(in a diagnosis) the cosine <test, ref> / (||test|| ||ref||)."},
    {"rel", "(in a diagnosis) the relative Frobenius error ||test - ref|| / ||ref||."},
    {"x the tolerance", "(in the list of results not as expected) the largest |d_i| / (atol + rtol |ref_i|); "
                        "above 1 is OUTSIDE."},
    {"det bound", "the deterministic rounding-error bound of a GEMM output whose operands are bit-identical in both "
                  "runs (Higham's gamma_n, summed over both runs): no summation order exceeds it, so above it is a "
                  "bug. 'largest det bound' is its largest value over the elements."},
    {"99.9% bound", "Higham and Mary's probabilistic bound (gamma_n replaced by exp(lambda sqrt(n) u + n u^2/(1-u)) "
                    "- 1), with lambda chosen so that it fails at an element with probability at most 0.001 under "
                    "their model (rounding errors independent, of mean zero). 'largest 99.9% bound' is its largest "
                    "value over the elements; lambda is printed beside it."},
    {"max |d|/det", "the largest per-element ratio |d_i| / det bound_i (likewise max |d|/99.9%): not max |d| divided "
                    "by the largest bound. Above 1 for det: not rounding; above 1 for 99.9%: rounding, but rarer than "
                    "the model expects."},
    {"reading", "the verdict of the theory table (not rounding, bit-exact, rounding within or above the 99.9% bound) "
                "and of the fp64 truth table (as accurate, less accurate, more accurate, with the ratio of the two "
                "relative errors)."},
    {"ref rel", "(against the fp64 truth) ||run - truth|| / ||truth|| of the reference run; test rel likewise of the "
                "test run; ref max |d| and test max |d| the largest |run - truth|."},
    {"worst tensor", "(matrix) the cell's worst result not as expected, or when all are, the one nearest its "
                     "tolerance; expected lists the tensors with their own expectation (e.g. differs: 12 tensors), "
                     "and observed is the worst state among the others."},
    {"plots", "(HTML) max |d| (solid) and mean |d| (dashed) against layer, log scale; the tolerance as a grey line "
              "(per tensor, atol x rms(ref), where the tolerance scales with the reference); a red ring marks each "
              "point of a result not as expected."},
    {"drift", "(training curve, --steps N) ||p_layout - p_ref|| / ||p_ref - p_ref at step 0|| over every trained "
              "parameter's fp32 master weights after the step's update: how far apart the runs are in units of how "
              "far the reference trained; per parameter in the list of the parameters that diverged most."},
    {"grad norm ratio", "(training curve) ||g_layout|| / ||g_ref||, the L2 norms over every trained parameter's "
                        "gradient in fp64: 1 within rounding (8u: 3.1% in bf16), a bug's factor otherwise (0.5 for "
                        "grad_avg_twice at dp 2); |d loss|/loss the relative difference of the two runs' losses."},
    {"curve", "(training curve) identical (every step bit-identical), rounding (drift small, growing no faster than "
              "rounding allows), factor (a gradient norm ratio or a steady drift that a constant factor makes) or "
              "growing (drift past max(0.1, 4 sqrt(u)), or growing faster than step^1.5): README, \"Many steps\"."},
    {NULL, NULL},
};

void eq_how_to_read_html(FILE *out)
{
    fprintf(out, "<section id=\"how-to-read\">\n<h2>How to read this report</h2>\n<dl>\n");
    for (const eq_glossary_entry *e = eq_glossary; e->term != NULL; e++) {
        fprintf(out, "<dt>");
        eq_svg_escape(out, e->term);
        fprintf(out, "</dt><dd>");
        eq_svg_escape(out, e->definition);
        fprintf(out, "</dd>\n");
    }
    fprintf(out, "</dl>\n</section>\n");
}
