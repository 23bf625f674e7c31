/*
 * neuron-cc runtime: the library version, as in the public libnrt header of
 * the same name.
 */
#ifndef NRT_NRT_VERSION_H
#define NRT_NRT_VERSION_H

#include <stddef.h>
#include <stdint.h>

#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RT_VERSION_DETAIL_LEN 128
#define GIT_HASH_LEN 64

typedef struct nrt_version {
  uint64_t rt_major; /* the libnrt API version this runtime follows (NRT_MAJOR_VERSION) */
  uint64_t rt_minor;
  uint64_t rt_patch;
  uint64_t rt_maintenance;
  char rt_detail[RT_VERSION_DETAIL_LEN]; /* "neuron-cc simulated NeuronCore runtime <version>" */
  char git_hash[GIT_HASH_LEN];           /* empty: builds are not tied to a revision */
} nrt_version_t;

/* Fills the first `size` bytes of *ver (pass sizeof(nrt_version_t)); callable
 * before nrt_init. */
NRT_STATUS nrt_get_version(nrt_version_t *ver, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_VERSION_H */
