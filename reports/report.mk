# reports/report.mk — reports and the CI gate (issue 8): the HTML / CSV report, the Chrome trace, the
# gate with its statistics and outputs (reports/libfpreport.a), the `report` and `gate` commands and
# `export --chrome-trace`, their tests and the report benchmark. Included after cli/cli.mk.
noinst_LIBRARIES += reports/libfpreport.a
reports_libfpreport_a_SOURCES = reports/report.h reports/summary.h reports/summary.c reports/summary_internal.h \
	reports/summary_arm.c reports/summary_numerics.c reports/summary_kernels.c reports/summary_fmt.c reports/summary_print.c \
	reports/sha256.h reports/sha256.c \
	reports/html_writer.h reports/html_writer.c reports/units.h reports/units.c \
	reports/svg_chart.h reports/svg_chart.c reports/report_html.c reports/report_html_internal.h \
	reports/report_html_common.c reports/report_html_summary.c reports/report_html_training.c \
	reports/report_html_dist.c reports/report_html_layers.c reports/report_html_numerics.c \
	reports/report_html_precision.c reports/report_html_kernels.c reports/report_html_events.c \
	reports/report_html_env.c reports/report_csv.c reports/report_write.c \
	reports/trace_chrome.c reports/gate.h reports/gate_stats.c reports/gate.c reports/gate_checks.h \
	reports/gate_result.c reports/gate_derive.c reports/gate_checks_cand.c reports/gate_checks_base.c reports/gate_output.c \
	reports/gate_load.c reports/gate_config.c reports/dist_report.h reports/dist_report.c
REPORT_LDADD = reports/libfpreport.a $(FP_LDADD)

fp16probe_SOURCES += cli/cmd_report.c cli/cmd_gate.c cli/cmd_trace.c
fp16probe_LDADD += reports/libfpreport.a $(FP_LDADD)

REPORT_TEST_UTIL = tests/report_testutil.c tests/report_testutil.h
REPORT_TESTS = tests/test_report_html tests/test_gate tests/test_report_dist
check_PROGRAMS += $(REPORT_TESTS) tests/test_report_fixture
TESTS += $(REPORT_TESTS)
tests_test_report_html_SOURCES = tests/test_report_html.c $(REPORT_TEST_UTIL) $(STORE_TEST_UTIL)
tests_test_report_html_LDADD = tests/libtap.a $(REPORT_LDADD)
GATE_TEST_UTIL = tests/gate_testutil.c tests/gate_testutil.h
# the data-parallel figures of the report and the gate (issue 23), on sessions written through the store writer
tests_test_report_dist_SOURCES = tests/test_report_dist.c
tests_test_report_dist_LDADD = tests/libtap.a $(REPORT_LDADD)
tests_test_gate_SOURCES = tests/test_gate.c $(GATE_TEST_UTIL) $(REPORT_TEST_UTIL) $(STORE_TEST_UTIL)
tests_test_gate_LDADD = tests/libtap.a $(REPORT_LDADD)
# writes recorded gate sessions for tests/test_gate_cli.sh
check_PROGRAMS += tests/test_gate_fixture
tests_test_gate_fixture_SOURCES = tests/test_gate_fixture.c $(GATE_TEST_UTIL) $(REPORT_TEST_UTIL) $(STORE_TEST_UTIL)
tests_test_gate_fixture_LDADD = tests/libtap.a $(REPORT_LDADD)
# writes generated sessions for tests/test_report_cli.sh
tests_test_report_fixture_SOURCES = tests/test_report_fixture.c $(REPORT_TEST_UTIL)
tests_test_report_fixture_LDADD = $(REPORT_LDADD)

dist_check_SCRIPTS += tests/test_report_cli.sh tests/test_gate_cli.sh tests/test_gate_readme.sh
TESTS += tests/test_report_cli.sh tests/test_gate_cli.sh tests/test_gate_readme.sh

BENCHMARKS += bench/bench_report
bench_bench_report_SOURCES = bench/bench_report.c $(BENCH_COMMON) $(REPORT_TEST_UTIL)
bench_bench_report_LDADD = $(REPORT_LDADD)
