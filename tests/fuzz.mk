# tests/fuzz.mk — hostile input, kept hostile (issue 21): fuzz targets for every parser of outside input
# and fault injection for the store.
#
# Fuzz targets (tests/fuzz/fuzz_<name>.c, libFuzzer's entry point; seed corpus in tests/fuzz/<name>/):
#   json          lib/json_min.c                 safetensors   lib/safetensors.c (header, layout, reads)
#   checkpoint    trainer/run/checkpoint.c's open, settings check and restore (a --resume file)
#   cifar10       trainer/data/data_cifar10.c through the dataset API
#   image         JPEG / PNG decoding (libjpeg-turbo, libpng) and the imagefolder transform
#   store_reader  the store readers on a damaged copy of tests/fuzz/store_reader.base.sqlite
# Each is built twice:
#   - replay_<name> in every build, a `make check` test: the committed corpus replayed once (with the
#     ASan + UBSan build of tools/check, under the sanitizers);
#   - fuzz_<name> with libFuzzer, only by `make fuzz`, which needs a clang build configured with
#       ../configure CC=clang --enable-sanitizers --without-cuda \
#           CFLAGS="-g -O1 -fsanitize=fuzzer-no-link -include SRCDIR/tests/fuzz/clang_compat.h"
#     (clang_compat.h: clang 14 lacks __builtin_cpu_supports("f16c"))
#     In any other build `make fuzz` configures one in $(FUZZ_BUILDDIR) (under this build directory) and
#     runs there. It runs each target of FUZZ_TARGETS for FUZZ_SECONDS (default 60) on a working corpus
#     (fuzz-corpus/<name>, kept between runs) plus the committed seeds, and prints one line per target:
#     "fuzz PASS <name>: ..." or "fuzz FAIL <name>: ... reproducer <file>" (crashing inputs under
#     fuzz-artifacts/<name>/, logs under fuzz-logs/); exit status 1 when any target failed.
#     Reproduce a finding: ./tests/fuzz/fuzz_<name> FILE (or ./tests/fuzz/replay_<name> FILE in any build).
# Fault injection: tests/test_store_faults (a TAP test) fails the store's writes, syncs and locks through
# a VFS shim at every point of a short recorded run.
FUZZ_NAMES = json safetensors checkpoint cifar10 image store_reader
FUZZ_TARGETS = $(FUZZ_NAMES)
FUZZ_SECONDS = 60
FUZZ_CC = clang
FUZZ_BUILDDIR = fuzz-build
FUZZ_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_SRCDIR='"$(abs_top_srcdir)"'
FUZZ_COMMON = tests/fuzz/fuzz.h tests/fuzz/fuzz_util.c
FUZZ_REPLAY = $(FUZZ_COMMON) tests/fuzz/replay_main.c
FUZZ_ENGINE = $(AM_LDFLAGS) -fsanitize=fuzzer

FUZZ_REPLAY_TESTS = tests/fuzz/replay_json tests/fuzz/replay_safetensors tests/fuzz/replay_checkpoint \
	tests/fuzz/replay_cifar10 tests/fuzz/replay_image tests/fuzz/replay_store_reader
check_PROGRAMS += $(FUZZ_REPLAY_TESTS) tests/test_store_faults
TESTS += $(FUZZ_REPLAY_TESTS) tests/test_store_faults
EXTRA_PROGRAMS = tests/fuzz/fuzz_json tests/fuzz/fuzz_safetensors tests/fuzz/fuzz_checkpoint \
	tests/fuzz/fuzz_cifar10 tests/fuzz/fuzz_image tests/fuzz/fuzz_store_reader tests/fuzz/make_seeds

tests_fuzz_replay_json_SOURCES = tests/fuzz/fuzz_json.c $(FUZZ_REPLAY)
tests_fuzz_replay_json_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_replay_json_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_json_SOURCES = tests/fuzz/fuzz_json.c $(FUZZ_COMMON)
tests_fuzz_fuzz_json_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_json_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_json_LDFLAGS = $(FUZZ_ENGINE)

tests_fuzz_replay_safetensors_SOURCES = tests/fuzz/fuzz_safetensors.c $(FUZZ_REPLAY)
tests_fuzz_replay_safetensors_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_replay_safetensors_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_safetensors_SOURCES = tests/fuzz/fuzz_safetensors.c $(FUZZ_COMMON)
tests_fuzz_fuzz_safetensors_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_safetensors_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_safetensors_LDFLAGS = $(FUZZ_ENGINE)

tests_fuzz_replay_checkpoint_SOURCES = tests/fuzz/fuzz_checkpoint.c tests/fuzz/tinyarm.h $(FUZZ_REPLAY)
tests_fuzz_replay_checkpoint_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_replay_checkpoint_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_checkpoint_SOURCES = tests/fuzz/fuzz_checkpoint.c tests/fuzz/tinyarm.h $(FUZZ_COMMON)
tests_fuzz_fuzz_checkpoint_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_checkpoint_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_checkpoint_LDFLAGS = $(FUZZ_ENGINE)

tests_fuzz_replay_cifar10_SOURCES = tests/fuzz/fuzz_cifar10.c $(FUZZ_REPLAY)
tests_fuzz_replay_cifar10_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_replay_cifar10_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_cifar10_SOURCES = tests/fuzz/fuzz_cifar10.c $(FUZZ_COMMON)
tests_fuzz_fuzz_cifar10_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_cifar10_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_cifar10_LDFLAGS = $(FUZZ_ENGINE)

tests_fuzz_replay_image_SOURCES = tests/fuzz/fuzz_image.c $(FUZZ_REPLAY)
tests_fuzz_replay_image_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_replay_image_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_image_SOURCES = tests/fuzz/fuzz_image.c $(FUZZ_COMMON)
tests_fuzz_fuzz_image_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_image_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_image_LDFLAGS = $(FUZZ_ENGINE)

tests_fuzz_replay_store_reader_SOURCES = tests/fuzz/fuzz_store_reader.c $(FUZZ_REPLAY)
tests_fuzz_replay_store_reader_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_replay_store_reader_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_store_reader_SOURCES = tests/fuzz/fuzz_store_reader.c $(FUZZ_COMMON)
tests_fuzz_fuzz_store_reader_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_store_reader_LDADD = $(FP_LDADD)
tests_fuzz_fuzz_store_reader_LDFLAGS = $(FUZZ_ENGINE)

# the generated seeds (tests/fuzz/make-seeds; not needed to fuzz: the corpus is committed)
tests_fuzz_make_seeds_SOURCES = tests/fuzz/make_seeds.c tests/fuzz/tinyarm.h $(FUZZ_COMMON) $(STORE_TEST_UTIL)
tests_fuzz_make_seeds_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_make_seeds_LDADD = $(TEST_LDADD)

tests_test_store_faults_SOURCES = tests/test_store_faults.c $(STORE_TEST_UTIL)
tests_test_store_faults_LDADD = $(TEST_LDADD)

EXTRA_DIST += tests/fuzz/run-fuzzers tests/fuzz/make-seeds tests/fuzz/clang_compat.h tests/fuzz/store_reader.base.sqlite \
	tests/fuzz/json tests/fuzz/safetensors tests/fuzz/checkpoint tests/fuzz/cifar10 tests/fuzz/image \
	tests/fuzz/store_reader tests/fuzz/json.dict tests/fuzz/safetensors.dict tests/fuzz/checkpoint.dict

fuzz:
	@case " $(CFLAGS) " in \
	*-fsanitize=fuzzer-no-link*) \
	    progs=; for t in $(FUZZ_TARGETS); do progs="$$progs tests/fuzz/fuzz_$$t$(EXEEXT)"; done; \
	    $(MAKE) $(AM_MAKEFLAGS) $$progs || exit 1; \
	    $(SHELL) $(top_srcdir)/tests/fuzz/run-fuzzers $(top_srcdir) $(FUZZ_SECONDS) $(FUZZ_TARGETS) ;; \
	*) \
	    echo "make fuzz: this build is not a libFuzzer build; using $(FUZZ_BUILDDIR) (CC=$(FUZZ_CC))"; \
	    $(MKDIR_P) $(FUZZ_BUILDDIR) && cd $(FUZZ_BUILDDIR) && \
	    { test -f Makefile || $(abs_top_srcdir)/configure CC='$(FUZZ_CC)' \
	        CFLAGS='-g -O1 -fsanitize=fuzzer-no-link -include $(abs_top_srcdir)/tests/fuzz/clang_compat.h' \
	        --enable-sanitizers --without-cuda >configure.out 2>&1 || \
	      { cat configure.out; exit 1; }; } && \
	    $(MAKE) fuzz FUZZ_SECONDS='$(FUZZ_SECONDS)' FUZZ_TARGETS='$(FUZZ_TARGETS)' ;; \
	esac
.PHONY: fuzz
distclean-local: fuzz-clean
fuzz-clean:
	-rm -rf $(FUZZ_BUILDDIR) fuzz-corpus fuzz-artifacts fuzz-logs
.PHONY: fuzz-clean
