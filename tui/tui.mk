# tui/tui.mk — the live dashboard (issue 7): its sources in the core library, the `tui` command, its
# tests (headless screens, tmux sessions, bad input) and its benchmark. Appends to fp16probe_SOURCES,
# so Makefile.am includes it after cli/cli.mk.
lib_libfp_a_SOURCES += lib/store_reader_tui.h lib/store_reader_tui.c \
	tui/tui.h tui/tui_internal.h tui/grid.c tui/tui_model.c tui/tui_series.c tui/tui_derived.c tui/chart_braille.c tui/layout.c \
	tui/keys.c tui/render.c tui/panels_charts.c tui/panels_layers.c tui/panels_hist.c \
	tui/panels_events.c tui/screen_text.c tui/tui.c
fp16probe_SOURCES += cli/cmd_tui.c

TUI_TEST_UTIL = tests/tui_testutil.c tests/tui_testutil.h
TUI_SCREEN_TEST_UTIL = tests/tui_screen_testutil.c tests/tui_screen_testutil.h
TUI_TESTS = tests/test_tui_screen tests/test_tui_units tests/test_tui_bad_input tests/test_tui_live \
	tests/test_tui_truth tests/test_tui_dist
check_PROGRAMS += $(TUI_TESTS) tests/test_tui_fixture
TESTS += $(TUI_TESTS)
tests_test_tui_screen_SOURCES = tests/test_tui_screen.c $(TUI_TEST_UTIL) $(TUI_SCREEN_TEST_UTIL)
tests_test_tui_screen_LDADD = $(TEST_LDADD)
tests_test_tui_units_SOURCES = tests/test_tui_units.c $(TUI_TEST_UTIL)
tests_test_tui_units_LDADD = $(TEST_LDADD)
tests_test_tui_bad_input_SOURCES = tests/test_tui_bad_input.c $(TUI_TEST_UTIL)
tests_test_tui_bad_input_LDADD = $(TEST_LDADD)
tests_test_tui_live_SOURCES = tests/test_tui_live.c $(TUI_TEST_UTIL)
tests_test_tui_live_LDADD = $(TEST_LDADD)
# issue 19: the newest rows, one throughput figure, N arms and the compared arm, the verdict lines
tests_test_tui_truth_SOURCES = tests/test_tui_truth.c $(TUI_SCREEN_TEST_UTIL)
tests_test_tui_truth_LDADD = $(TEST_LDADD)
# issue 23: the data-parallel line of the header (ranks, comm share per arm, slowest rank)
tests_test_tui_dist_SOURCES = tests/test_tui_dist.c $(TUI_SCREEN_TEST_UTIL)
tests_test_tui_dist_LDADD = $(TEST_LDADD)
# the dashboard's speedup is the end-of-run summary's (lib/step_time.h)
check_PROGRAMS += tests/test_tui_speedup
TESTS += tests/test_tui_speedup
tests_test_tui_speedup_SOURCES = tests/test_tui_speedup.c $(STORE_TEST_UTIL)
tests_test_tui_speedup_LDADD = tests/libtap.a $(REPORT_LDADD)
# writes the fixture database for the shell tests
tests_test_tui_fixture_SOURCES = tests/test_tui_fixture.c $(TUI_TEST_UTIL)
tests_test_tui_fixture_LDADD = $(TEST_LDADD)

dist_check_SCRIPTS += tests/test_tui_tmux.sh tests/test_tui_cli.sh tests/test_tui_signals.sh
TESTS += tests/test_tui_tmux.sh tests/test_tui_cli.sh tests/test_tui_signals.sh
EXTRA_DIST += tests/fixtures/tui/screen_80x24.txt

BENCHMARKS += bench/bench_tui
bench_bench_tui_SOURCES = bench/bench_tui.c $(BENCH_COMMON)
bench_bench_tui_LDADD = $(FP_LDADD)
