/* A host that loads liba2pack by absolute path with dlopen() and uses it only
 * through a2pack_api(): no link-time dependency, no LD_LIBRARY_PATH, no
 * LD_PRELOAD. Usage: dlopen_host /abs/path/liba2pack.so.0 FIXTURE */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "a2pack.h"

static int fail(const char *what) {
  fprintf(stderr, "dlopen_host: %s\n", what);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3) return fail("usage: dlopen_host LIBRARY FIXTURE");
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) return fail(dlerror());
  const a2pack_api_table *(*get)(uint32_t) =
      (const a2pack_api_table *(*)(uint32_t))dlsym(h, "a2pack_api");
  if (!get) return fail("no a2pack_api symbol");
  const a2pack_api_table *api = get(A2PACK_ABI_VERSION);
  if (!api || api->size < sizeof(a2pack_api_table)) return fail("no table for this ABI");
  printf("loaded a2pack %s (ABI %u)\n", api->version(), api->abi_version_fn());

  FILE *f = fopen(argv[2], "rb");
  if (!f) return fail("cannot open fixture");
  static uint8_t buf[1 << 20];
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);

  a2pack_run *run = NULL;
  if (api->run_decode(buf, len, &run) != A2PACK_OK) return fail(api->last_error());
  a2pack_run_meta m;
  m.size = sizeof m;
  if (api->run_get_meta(run, &m) != A2PACK_OK) return fail(api->last_error());
  printf("fixture: %u steps, max_score %llu, final board %#llx\n", m.steps,
         (unsigned long long)m.max_score, (unsigned long long)api->run_final_board(run));
  if (m.steps != 959 || m.max_score != 20504 || api->run_final_board(run) != 0x100100010232001bull)
    return fail("fixture decoded to the wrong values");

  uint8_t *out = NULL;
  size_t out_len = 0;
  if (api->run_encode(run, A2PACK_RUN_V2, 0, &out, &out_len) != A2PACK_OK)
    return fail(api->last_error());
  int same = out_len == len;
  for (size_t i = 0; same && i < len; ++i) same = out[i] == buf[i];
  api->free(out);
  api->run_close(run);
  if (!same) return fail("re-encoding differs");

  /* An error travels as a status plus message. */
  if (api->run_decode(buf, 3, &run) != A2PACK_E_CORRUPT || run != NULL)
    return fail("truncated input was not refused");
  printf("error path: %s: %s\n", api->status_name(api->last_status()), api->last_error());
  dlclose(h);
  printf("dlopen host OK\n");
  return 0;
}
