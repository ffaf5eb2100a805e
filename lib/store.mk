# lib/store.mk — the run store (issue 3): schema, open/migrate, writer, reader (and a validation's image
# count as it records it), CSV export, their tests and the store benchmark. The `ls` / `export` commands
# are in cli/store_cli.mk (it appends to fp16probe_SOURCES, so it must be included after cli/cli.mk).
lib_libfp_a_SOURCES += lib/store.h lib/store_reader.h lib/store_db.h lib/store_queue.h \
	lib/store_schema.c lib/store_open.c lib/store_queue.c lib/store_signal.c \
	lib/store_writer_internal.h lib/store_writer.c lib/store_statements.c lib/store_rows.c lib/store_records.c \
	lib/store_lifecycle.c lib/store_intern.c \
	lib/store_reader.c lib/store_reader_internal.h lib/store_reader_steps.c lib/store_reader_stats.c \
	lib/store_reader_layers.c lib/store_reader_hist.c lib/store_reader_kernels.c \
	lib/store_csv.c lib/store_reader_report.c \
	lib/store_reader_dist.c lib/store_reader_dist.h \
	lib/store_columns.c lib/store_columns.h \
	lib/step_time.c lib/step_time.h lib/val_images.c lib/val_images.h

STORE_TEST_UTIL = tests/store_testutil.c tests/store_testutil.h
STORE_TESTS = tests/test_store_open tests/test_store_writer tests/test_store_reader \
	tests/test_store_concurrency tests/test_store_crash tests/test_store_busy tests/test_store_dist
check_PROGRAMS += $(STORE_TESTS)
TESTS += $(STORE_TESTS)
tests_test_store_open_SOURCES = tests/test_store_open.c $(STORE_TEST_UTIL)
tests_test_store_open_LDADD = $(TEST_LDADD)
tests_test_store_writer_SOURCES = tests/test_store_writer.c $(STORE_TEST_UTIL)
tests_test_store_writer_LDADD = $(TEST_LDADD)
tests_test_store_reader_SOURCES = tests/test_store_reader.c $(STORE_TEST_UTIL)
tests_test_store_reader_LDADD = $(TEST_LDADD)
tests_test_store_concurrency_SOURCES = tests/test_store_concurrency.c $(STORE_TEST_UTIL)
tests_test_store_concurrency_LDADD = $(TEST_LDADD)
tests_test_store_crash_SOURCES = tests/test_store_crash.c $(STORE_TEST_UTIL)
tests_test_store_crash_LDADD = $(TEST_LDADD)
tests_test_store_busy_SOURCES = tests/test_store_busy.c $(STORE_TEST_UTIL)
tests_test_store_busy_LDADD = $(TEST_LDADD)
tests_test_store_dist_SOURCES = tests/test_store_dist.c $(STORE_TEST_UTIL)
tests_test_store_dist_LDADD = $(TEST_LDADD)
# the fixture writer for tests/test_store_cli.sh (cli/store_cli.mk)
check_PROGRAMS += tests/test_store_fixture
tests_test_store_fixture_SOURCES = tests/test_store_fixture.c $(STORE_TEST_UTIL)
tests_test_store_fixture_LDADD = $(TEST_LDADD)

BENCHMARKS += bench/bench_store
bench_bench_store_SOURCES = bench/bench_store.c $(BENCH_COMMON)
bench_bench_store_LDADD = $(FP_LDADD)

EXTRA_DIST += docs/schema.md
