/* Significant-digit formatting (number_format.h) on planted values: a gradient difference of
 * 6.1e-06 keeps its digits (fixed decimals printed 0.000006), 0.03125 and 1234.5 keep three, zero
 * is "0", non-finite values are named. */
#include <math.h>
#include <string.h>

#include "harness/base/testing.h"
#include "reports/number_format.h"

static void expect_format(double v, int digits, const char *want)
{
    char buf[32];
    eq_format_sig(v, digits, buf, sizeof buf);
    EQ_EXPECT(strcmp(buf, want) == 0, "%.17g at %d digits: '%s', want '%s'", v, digits, buf, want);
}

int main(void)
{
    expect_format(6.1e-6, 3, "6.10e-06");
    expect_format(0.03125, 3, "0.0312"); /* round half to even, as printf */
    expect_format(0.118, 3, "0.118");
    expect_format(0.000125, 2, "0.00013");
    expect_format(9.9e-5, 2, "9.9e-05");
    expect_format(1234.5, 3, "1.23e+03");
    expect_format(1.7e9, 2, "1.7e+09");
    expect_format(-0.5, 3, "-0.5");
    expect_format(0.0, 3, "0");
    expect_format(-0.0, 3, "0");
    expect_format(NAN, 3, "NaN");
    expect_format(-INFINITY, 3, "-Inf");
    expect_format(1.0 / 3.0, 0, "0.3"); /* digits clamped to 1 */
    return eq_test_finish("number_format_test");
}
