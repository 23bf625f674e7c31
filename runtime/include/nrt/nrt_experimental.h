/*
 * neuron-cc runtime: model tensor introspection, as in the public libnrt
 * header of the same name.
 */
#ifndef NRT_NRT_EXPERIMENTAL_H
#define NRT_NRT_EXPERIMENTAL_H

#include <stdbool.h>
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

/* Legacy tracing: nrt_trace_start starts recording the events of a system
 * trace capture (nrt/nrt_sys_trace.h; trace_mem is accepted, no memory
 * events are recorded), nrt_trace_stop writes them to `filename` in
 * trace.json's format and ends it. NRT_INVALID: starting twice, stopping
 * with none running. Independent of nrt_sys_trace_start. */
NRT_STATUS nrt_trace_start(bool trace_mem);
NRT_STATUS nrt_trace_stop(const char *filename);

/* Copies `size` bytes to device memory: in this simulator, to the storage of
 * an allocated tensor (nrt_tensor_get_va); [dest, dest + size) must lie
 * within one, else NRT_INVALID and nothing is copied. */
NRT_STATUS nrt_memcpy_to_device(void *dest, const void *src, size_t size);

/* Executions are synchronous here (there is no asynchronous execution
 * mode), so a registered callback is kept but never called, and nothing is
 * ever queued for nrt_async_drain_queued_execs to wait for (it returns at
 * once for VNC 0; NRT_INVALID for another). */
typedef void (*NRT_ASYNC_EXEC_STATUS_CALLBACK)(void *params, uint32_t model_id, uint32_t vnc, uint64_t job_id,
                                               NRT_STATUS status);
NRT_STATUS nrt_register_async_exec_callback(NRT_ASYNC_EXEC_STATUS_CALLBACK callback, void *params);
NRT_STATUS nrt_async_drain_queued_execs(int32_t vnc);

/* Collectives over a world of one device (device 0 of 1, VNC 0 or -1):
 * the barrier returns at once, the all-gather copies the rank's input to
 * the output. Any other world is NRT_INVALID. */
NRT_STATUS nrt_barrier(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count);
NRT_STATUS nrt_all_gather(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count, uint32_t rank_input_size,
                          void *input, void *output);

/* Hooks of the real runtime's internals, not available here: no pooling
 * engine microcode is loaded (NRT_INVALID), and there is no libnccl network
 * plugin (NULL, *err set to 1 and err_msg to the reason). */
typedef struct nrt_ucode_img {
  uint8_t *bin;
  size_t size;
} nrt_ucode_img;

typedef struct nrt_ucode_info {
  nrt_ucode_img iram;
  nrt_ucode_img dram;
} nrt_ucode_info;

NRT_STATUS nrt_set_pool_eng_ucode(const nrt_ucode_info *ucode_info);
void *nrt_get_libnccl_net(int *err, char *err_msg, size_t err_msg_size);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_EXPERIMENTAL_H */
