/* A stand-in for libcudart's page-locking calls, for the feed's pinning
 * tests on machines without CUDA: it records what the library asked for.
 * Loaded through A2PACK_CUDART=<path of this module>. With FAKE_CUDART_FAIL
 * set, cudaHostRegister fails as a runtime without a device would. */
#include <stddef.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int fake_cudart_registers = 0;
EXPORT int fake_cudart_unregisters = 0;
EXPORT void *fake_cudart_last_ptr = NULL;
EXPORT size_t fake_cudart_last_size = 0;
EXPORT unsigned fake_cudart_last_flags = 0;
EXPORT void *fake_cudart_last_unregistered = NULL;

EXPORT int cudaHostRegister(void *ptr, size_t size, unsigned flags) {
  if (getenv("FAKE_CUDART_FAIL")) return 100; /* cudaErrorNoDevice */
  fake_cudart_registers++;
  fake_cudart_last_ptr = ptr;
  fake_cudart_last_size = size;
  fake_cudart_last_flags = flags;
  return 0;
}

EXPORT int cudaHostUnregister(void *ptr) {
  fake_cudart_unregisters++;
  fake_cudart_last_unregistered = ptr;
  return 0;
}

EXPORT const char *cudaGetErrorString(int error) {
  return error == 100 ? "no CUDA-capable device is detected (fake)" : "unknown error (fake)";
}
