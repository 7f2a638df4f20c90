/* consumer.c: a C program built against an installed tailor runtime. It
 * checks the run-time version against the one it was built for, and that
 * the API answers misuse with statuses. Usage: consumer EXPECTED_VERSION */

#include <tailor/runtime.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2 || strcmp(tailor_version(), argv[1]) != 0) {
    fprintf(stderr, "consumer: runtime %s, expected %s\n", tailor_version(),
            argc == 2 ? argv[1] : "(none)");
    return 1;
  }
  tailor_plan *plan = NULL;
  if (tailor_plan_load("/nonexistent/plan.tplan", &plan) != TAILOR_ERROR_IO ||
      plan != NULL) {
    fprintf(stderr, "consumer: a missing plan file is not TAILOR_ERROR_IO\n");
    return 1;
  }
  int stray = 0;
  tailor_plan_free((tailor_plan *)&stray); /* refused, not freed */
  if (strstr(tailor_last_error(), "not a live tailor_plan") == NULL) {
    fprintf(stderr, "consumer: a stray handle was not refused: %s\n",
            tailor_last_error());
    return 1;
  }
  printf("consumer: tailor runtime %s installed and working\n",
         tailor_version());
  return 0;
}
