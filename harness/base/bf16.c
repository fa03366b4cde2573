#include "harness/base/bf16.h"

#include <math.h>

uint16_t eq_f64_to_bf16(double d)
{
    float f = (float)d;
    if (!isnan(d) && (double)f != d) {
        /* Round to odd: truncate toward zero, then set the last bit. 16 spare bits below bf16's
         * last bit make the following round-to-nearest-even give the correctly rounded result. */
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        /* one step toward zero (nextafterf(f, 0)): |f| > |d| >= 0, so f is not zero and the
         * magnitude bits just drop by one (Inf becomes the largest finite float, as there) */
        if (fabs((double)f) > fabs(d)) u -= 1u;
        u |= 1u;
        memcpy(&f, &u, sizeof f);
    }
    return eq_f32_to_bf16(f);
}
