/* commands.c — the subcommand table: the one list --help prints and main() dispatches on. */
#include "commands.h"

const fp_command_t fp_commands[] = {
    {"devices", "show the CPU features and the GPU this binary can use", cmd_devices},
    {"ls", "list the sessions and runs of a database", cmd_ls},
    {"export", "write one table of a run as CSV", cmd_export},
    {"report", "write a session as a self-contained HTML report and CSV files", cmd_report},
    {"gate", "CI gate: compare a candidate session with a baseline and thresholds", cmd_gate},
    {"formats", "show the number-format facts (fp16, bf16, tf32, fp8)", cmd_formats},
    {"models", "list the models with parameter counts and FLOPs per image", cmd_models},
    {"train", "train one model under one precision policy on the CPU and record the run", cmd_train},
    {"compare", "train a model in fp32 and fp16/bf16 side by side and summarise (also: fp16probe <model>)", cmd_compare},
    {"tui", "the live dashboard of a session (ncurses; --headless WxH prints a frame)", cmd_tui},
};
const size_t fp_command_count = sizeof fp_commands / sizeof fp_commands[0];
