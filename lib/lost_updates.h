/* lost_updates.h — the parameter pass's lost-update events as their readers take them (the summary and the
 * gate in reports/, the dashboard in tui/): "lost updates at step N: X% of the weights ..." (written by
 * trainer/run/compare_probes.c) gives X. One reading, so no two readers disagree. */
#ifndef FP_LIB_LOST_UPDATES_H
#define FP_LIB_LOST_UPDATES_H

/* X of "lost updates at step N: X% ..." (0 <= X <= 100); NaN when text is no such event. */
double fp_lost_updates_pct(const char *text);

#endif
