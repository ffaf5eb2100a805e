/* commands.c — the subcommand table: the one list --help prints and main() dispatches on. */
#include "commands.h"

const fp_command_t fp_commands[] = {
    {"devices", "show the CPU features and the GPU this binary can use", cmd_devices},
    {"formats", "show the number-format facts (fp16, bf16, tf32, fp8)", cmd_formats},
};
const size_t fp_command_count = sizeof fp_commands / sizeof fp_commands[0];
