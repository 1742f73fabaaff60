/* gradsync run: placeholder, being written. */
#include "cli.h"
int cmd_run(int argc, char **argv) {
  (void)argc;
  (void)argv;
  cli_error("run", "not implemented yet");
  return 2;
}
