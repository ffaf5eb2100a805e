# lib/store.mk — the run store (issue 3): schema, open/migrate, writer, reader, CSV export, their
# tests and the store benchmark. The `ls` / `export` commands are in cli/store_cli.mk (it appends to
# fp16probe_SOURCES, so it must be included after cli/cli.mk).
lib_libfp_a_SOURCES += lib/store.h lib/store_reader.h lib/store_db.h lib/store_queue.h \
	lib/store_schema.c lib/store_open.c lib/store_queue.c lib/store_writer.c lib/store_signal.c \
	lib/store_reader.c lib/store_csv.c

STORE_TEST_UTIL = tests/test_store_util.c tests/test_store_util.h
check_PROGRAMS += tests/test_store_open
TESTS += tests/test_store_open
tests_test_store_open_SOURCES = tests/test_store_open.c $(STORE_TEST_UTIL)
tests_test_store_open_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/test_store_writer
TESTS += tests/test_store_writer
tests_test_store_writer_SOURCES = tests/test_store_writer.c $(STORE_TEST_UTIL)
tests_test_store_writer_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/test_store_reader
TESTS += tests/test_store_reader
tests_test_store_reader_SOURCES = tests/test_store_reader.c $(STORE_TEST_UTIL)
tests_test_store_reader_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/test_store_concurrency
TESTS += tests/test_store_concurrency
tests_test_store_concurrency_SOURCES = tests/test_store_concurrency.c $(STORE_TEST_UTIL)
tests_test_store_concurrency_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/test_store_crash
TESTS += tests/test_store_crash
tests_test_store_crash_SOURCES = tests/test_store_crash.c $(STORE_TEST_UTIL)
tests_test_store_crash_LDADD = $(TEST_LDADD)
