# cli/store_cli.mk — the `ls` and `export` commands of the run store (issue 3). Appends to
# fp16probe_SOURCES, so Makefile.am must include it after cli/cli.mk.
fp16probe_SOURCES += cli/store_cli.c cli/store_cli.h cli/cmd_ls.c cli/cmd_export.c

dist_check_SCRIPTS += tests/test_store_cli.sh
TESTS += tests/test_store_cli.sh
