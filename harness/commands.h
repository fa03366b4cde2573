/* The commands behind the CLI. Each returns a status (errors: one line printed by main) and, for
 * commands that compare, the number of results not as expected (exit 1 when > 0). */
#ifndef EQUIV_HARNESS_COMMANDS_H
#define EQUIV_HARNESS_COMMANDS_H

#include "harness/cli.h"

eq_status eq_cmd_run(const eq_cli *cli, int *n_unexpected);
eq_status eq_cmd_compare(const eq_cli *cli, int *n_unexpected);
eq_status eq_cmd_list(const eq_cli *cli);

#endif
