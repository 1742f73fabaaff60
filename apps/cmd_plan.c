/* gradsync plan: placeholder, being written. */
#include "cli.h"
int cmd_plan(int argc, char **argv) {
  (void)argc;
  (void)argv;
  cli_error("plan", "not implemented yet");
  return 2;
}
