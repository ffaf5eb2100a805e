/* lost_updates.c — the percentage of a lost-update event (lost_updates.h). Promise: any other text, or a
 * figure that is no percentage in [0, 100], reads NaN, never 0. */
#include "lost_updates.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

double fp_lost_updates_pct(const char *text)
{
    static const char head[] = "lost updates at step";
    if (strncmp(text, head, sizeof head - 1) != 0)
        return NAN;
    const char *colon = strchr(text, ':');
    if (!colon)
        return NAN;
    char *end;
    double v = strtod(colon + 1, &end);
    return end != colon + 1 && *end == '%' && v >= 0 && v <= 100 ? v : NAN;
}
