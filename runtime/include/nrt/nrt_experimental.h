/*
 * neuron-cc runtime: model tensor introspection, as in the public libnrt
 * header of the same name.
 */
#ifndef NRT_NRT_EXPERIMENTAL_H
#define NRT_NRT_EXPERIMENTAL_H

#include <stddef.h>
#include <stdint.h>

#include "nrt/nrt.h"
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_tensor_usage {
  NRT_TENSOR_USAGE_INPUT = 0,
  NRT_TENSOR_USAGE_OUTPUT
} nrt_tensor_usage_t;

#define NRT_TENSOR_NAME_MAX 256

typedef struct nrt_tensor_info {
  char name[NRT_TENSOR_NAME_MAX]; /* NUL-terminated */
  nrt_tensor_usage_t usage;
  size_t size;       /* bytes */
  nrt_dtype_t dtype;
  uint32_t *shape;   /* ndim entries, owned by the array */
  uint32_t ndim;
} nrt_tensor_info_t;

typedef struct nrt_tensor_info_array {
  uint64_t tensor_count;
  nrt_tensor_info_t tensor_array[];
} nrt_tensor_info_array_t;

/* Describes the model's inputs (in graph input order) followed by its
 * outputs (in graph output order). Free with nrt_free_model_tensor_info(). */
NRT_STATUS nrt_get_model_tensor_info(nrt_model_t *model, nrt_tensor_info_array_t **tensor_info);
NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t *tensor_info);

/* Always 1: executions of one model are serialized. */
NRT_STATUS nrt_get_model_instance_count(nrt_model_t *model, uint32_t *instance_count);

typedef struct nrt_model_info {
  uint32_t vnc;
} nrt_model_info_t;

/* info_size_in: the caller's sizeof(nrt_model_info_t); *info_size_out: bytes written. */
NRT_STATUS nrt_get_model_info(const nrt_model_t *model, nrt_model_info_t *info, size_t info_size_in,
                              size_t *info_size_out);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_EXPERIMENTAL_H */
