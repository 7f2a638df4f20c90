/* c_api_smoke.c: the runtime header compiles as C and links from a C program. */

#include "tailor/runtime.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  int count = -1;
  tailor_status status = tailor_cuda_device_count(&count);
  if (status != TAILOR_OK && status != TAILOR_ERROR_UNAVAILABLE) {
    fprintf(stderr, "c_api_smoke: device count failed: %s\n", tailor_last_error());
    return 1;
  }
  if (count < 0 || strlen(tailor_version()) == 0) {
    fprintf(stderr, "c_api_smoke: bad answers (count %d)\n", count);
    return 1;
  }
  printf("tailor runtime %s from C: %d GPU(s)%s%s\n", tailor_version(), count,
         status == TAILOR_OK ? "" : "; ", status == TAILOR_OK ? "" : tailor_last_error());
  return 0;
}
