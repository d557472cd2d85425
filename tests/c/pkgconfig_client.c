/* Compiled and linked only with `pkg-config --cflags --libs a2pack` against
 * the installed prefix. Usage: pkgconfig_client FIXTURE */
#include <stdio.h>

#include <a2pack.h>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  a2pack_run *run = NULL;
  if (a2pack_run_load(argv[1], &run) != A2PACK_OK) {
    fprintf(stderr, "load failed: %s\n", a2pack_last_error());
    return 1;
  }
  size_t n = a2pack_run_step_count(run);
  a2pack_run_close(run);
  printf("pkg-config client: a2pack %s, fixture has %zu steps\n", a2pack_version(), n);
  return n == 959 ? 0 : 1;
}
