# cli/cli.mk — the fp16probe command.
bin_PROGRAMS += fp16probe
fp16probe_SOURCES = cli/main.c cli/commands.c cli/commands.h cli/cmd_info.c
fp16probe_LDADD = $(FP_LDADD)

dist_check_SCRIPTS += tests/test_cli.sh
TESTS += tests/test_cli.sh
