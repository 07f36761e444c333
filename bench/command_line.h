// trainbench's command line: its subcommands (list, info, run, compare, check, ab, summary,
// plan, history, report), their options, and the checks of every option before anything runs.
#pragma once

#include "dist/world.h"

namespace tb {

enum class CommandLineMode {
  run,         // parse, check and run the subcommand
  check_only,  // parse and check what the subcommand would check before it starts; run nothing
};

// Runs `trainbench <argv...>` and returns its exit code. Throws UsageError for bad input (exit
// 2); other exceptions are failures (exit 1).
int run_command_line(int argc, char** argv, World& world,
                     CommandLineMode mode = CommandLineMode::run);

}  // namespace tb
