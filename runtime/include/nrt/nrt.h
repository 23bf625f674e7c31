/*
 * neuron-cc runtime: the core C API.
 *
 * Function names, argument order and types follow the public Neuron runtime
 * (libnrt) API so that a C program written against its documentation builds
 * with `cc app.c -I<runtime/include> -L<build>/lib -lnrt` and runs our NEFFs.
 * The NeuronCore is simulated on the host CPU: numerics are computed for real,
 * and a timing model assigns every instruction a device time (see
 * docs/runtime.md). Extensions that the public API lacks live in nrt_ext.h.
 *
 * Every function validates its arguments: NULL pointers, handles that are not
 * live, wrong sizes, unknown tensor names and corrupt NEFFs produce an error
 * status (never a crash), and nrt_get_last_error_message() (nrt_ext.h) then
 * says why (with NEURON_RT_LOG_LEVEL=ERROR, or WARN/INFO/DEBUG, it is also
 * printed to stderr). All functions are thread-safe: one runtime-wide lock
 * serializes them, executions included.
 */
#ifndef NRT_NRT_H
#define NRT_NRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ndl/neuron_driver_shared_tensor_batch_op.h"
#include "nrt/nrt_status.h"
#include "nrt/nrt_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_MAJOR_VERSION 2
#define NRT_MINOR_VERSION 0

typedef struct nrt_model nrt_model_t;
typedef struct nrt_tensor nrt_tensor_t;
/* Out-of-NEFF collectives (the public header's types; nrt_async.h's
 * nrta_cc_prepare takes them). */
typedef struct nrt_cc_context nrt_cc_context_t;

/* Reduction operators of collectives (values as in the public header). */
typedef enum nrt_op_type {
  NRT_OP_ADD = 0x0,
  NRT_OP_FMA = 0x1,
  NRT_OP_MAX = 0x2,
  NRT_OP_MIN = 0x3,
  NRT_OP_INVALID = 0xF
} nrt_op_type_t;

typedef enum nrt_cc_op_type { NRT_CC_ALLGATHER, NRT_CC_ALLREDUCE, NRT_CC_REDUCESCATTER } nrt_cc_op_type_t;

typedef struct nrt_cc_comm {
  uint32_t *replica_group; /* the participants */
  uint32_t rank;           /* this one's place in replica_group */
  uint32_t rank_n;         /* the size of replica_group */
  uint32_t ctx_device_id;
  uint32_t ctx_device_count;
  uint32_t vnc;
} nrt_cc_comm_t;

typedef struct nrt_tensor_list {
  nrt_tensor_t **tensors;
  size_t num_tensors;
} nrt_tensor_list_t;

/* Where a tensor's storage lives. On the simulator all three are host memory;
 * the value is recorded and otherwise has no effect. */
typedef enum {
  NRT_TENSOR_PLACEMENT_DEVICE,
  NRT_TENSOR_PLACEMENT_HOST,
  NRT_TENSOR_PLACEMENT_VIRTUAL
} nrt_tensor_placement_t;

typedef enum {
  NRT_FRAMEWORK_TYPE_INVALID = 0,
  NRT_FRAMEWORK_TYPE_NO_FW = 1,
  NRT_FRAMEWORK_TYPE_TENSORFLOW,
  NRT_FRAMEWORK_TYPE_PYTORCH,
  NRT_FRAMEWORK_TYPE_MXNET,
  NRT_FRAMEWORK_TYPE_PRECHECK
} nrt_framework_type_t;

/* Instance families (values as in the public header). */
enum {
  NRT_INSTANCE_UNKNOWN = 0,
  NRT_INSTANCE_INF1 = 1,
  NRT_INSTANCE_TRN1 = 2,
  NRT_INSTANCE_TRN1N = 3,
  NRT_INSTANCE_INF2 = 4,
  NRT_INSTANCE_TRN2 = 5,
  NRT_INSTANCE_TRN2N = 6,
  NRT_INSTANCE_INF2E = 7,
  NRT_INSTANCE_TRN2P = 8,
  NRT_INSTANCE_TRN2U = 9,
  NRT_INSTANCE_TRN2E = 10,
  NRT_INSTANCE_TRN2EU = 11,
  NRT_INSTANCE_TRN2AC = 12,
  NRT_INSTANCE_TRN2UAC = 13,
  NRT_INSTANCE_TRN3 = 14,
  NRT_INSTANCE_TRN3PDS98 = 15
};

/* Instance sizes (values as in the public header). The simulator reports
 * NRT_INSTANCE_SIZE_1XL: one chip's worth of NeuronCores is not modeled. */
enum {
  NRT_INSTANCE_SIZE_1XL,
  NRT_INSTANCE_SIZE_2XL,
  NRT_INSTANCE_SIZE_4XL,
  NRT_INSTANCE_SIZE_6XL,
  NRT_INSTANCE_SIZE_8XL,
  NRT_INSTANCE_SIZE_24XL,
  NRT_INSTANCE_SIZE_32XL,
  NRT_INSTANCE_SIZE_48XL,
  NRT_INSTANCE_SIZE_3XL,
  NRT_INSTANCE_SIZE_UNKNOWN,
  NRT_INSTANCE_SIZE_NUM = NRT_INSTANCE_SIZE_UNKNOWN
};

/* Element types (values as in the public header). The simulator's NEFFs use
 * FLOAT32, BFLOAT16 and FLOAT16. */
typedef enum nrt_dtype {
  NRT_DTYPE_UNKNOWN = 0x0,
  NRT_DTYPE_INVALID = 0x0,
  NRT_DTYPE_FP8_E3 = 0xD,
  NRT_DTYPE_FP8_E4 = 0xE,
  NRT_DTYPE_FP8_E5 = 0xF,
  NRT_DTYPE_FLOAT16 = 0x7,
  NRT_DTYPE_BFLOAT16 = 0x6,
  NRT_DTYPE_FLOAT32 = 0xA,
  NRT_DTYPE_FP32R = 0xB,
  NRT_DTYPE_UINT8 = 0x3,
  NRT_DTYPE_UINT16 = 0x5,
  NRT_DTYPE_UINT32 = 0x9,
  NRT_DTYPE_UINT64 = 0x1,
  NRT_DTYPE_INT8 = 0x2,
  NRT_DTYPE_INT16 = 0x4,
  NRT_DTYPE_INT32 = 0x8,
  NRT_DTYPE_INT64 = 0xC
} nrt_dtype_t;

typedef struct nrt_instance_info {
  uint32_t family; /* NRT_INSTANCE_TRN1 or NRT_INSTANCE_TRN2: the simulated target */
  uint32_t size;
  char arch_name[16];       /* "trn1", "trn2" */
  char device_revision[8];  /* "sim" */
} nrt_instance_info_t;

/* Fills `info` (instance_info_len must be at least sizeof(nrt_instance_info_t)).
 * Reports the simulated target chosen with nrt_set_simulated_target(), or trn1
 * when none was chosen. */
NRT_STATUS nrt_get_instance_info(nrt_instance_info_t *info, size_t instance_info_len);

/* Starts the runtime. Every other call except the nrt_get_*_count queries,
 * tensor-set handling, nrt_get_status_as_str and the extensions needs it
 * (otherwise NRT_UNINITIALIZED, or NRT_CLOSED after nrt_close()). Calling it
 * again after nrt_close() starts a fresh runtime. If the environment has
 * NEURON_RT_INSPECT_ENABLE=1, a profiling session (see nrt_profile.h) starts
 * here, writing to $NEURON_RT_INSPECT_OUTPUT_DIR (default ./output), and is
 * written out by nrt_close(). */
NRT_STATUS nrt_init(nrt_framework_type_t framework, const char *fw_version, const char *fal_version);

/* Unloads every model and stops the runtime. Tensors stay valid (they are
 * host memory) and must still be freed with nrt_tensor_free(). */
void nrt_close(void);

/* Verifies and loads a NEFF image (the bytes are copied; the caller may free
 * them on return). vnc: the NeuronCore, -1 for "first free"; only core 0 is
 * simulated, so any other value gives NRT_LOAD_NOT_ENOUGH_NC. vnc_count is
 * deprecated: pass -1 (1 is accepted too). A corrupt or unverifiable NEFF gives
 * NRT_INVALID, a NEFF of an unknown format version NRT_UNSUPPORTED_NEFF_VERSION,
 * a NEFF compiled for another target than the simulated one NRT_INVALID. */
NRT_STATUS nrt_load(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                    nrt_model_t **model);

/* Frees the model. The handle is dead afterwards (NRT_INVALID_HANDLE if reused). */
NRT_STATUS nrt_unload(nrt_model_t *model);

/* NeuronCores used by a model (always 1). */
NRT_STATUS nrt_get_model_nc_count(const nrt_model_t *model, uint32_t *vnc_count);
NRT_STATUS nrt_get_model_vnc_count(const nrt_model_t *model, uint32_t *vnc_count);

/* NeuronCores of the (simulated) instance: 1. No nrt_init() needed. */
NRT_STATUS nrt_get_total_nc_count(uint32_t *vnc_count);
NRT_STATUS nrt_get_total_vnc_count(uint32_t *vnc_count);
NRT_STATUS nrt_get_visible_nc_count(uint32_t *vnc_count);
NRT_STATUS nrt_get_visible_vnc_count(uint32_t *vnc_count);

/* A set of named tensors: the inputs or the outputs of one execution. */
typedef void nrt_tensor_set_t;

NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t **result);
/* Frees the set (not its tensors) and sets *tensor_set to NULL. */
void nrt_destroy_tensor_set(nrt_tensor_set_t **tensor_set);
/* Adds or replaces the tensor under `tensor_name`. The set refers to the
 * tensor; it must stay allocated while the set is used. */
NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t *tensor_set, const char *tensor_name,
                                        nrt_tensor_t *tensor);
/* NRT_INVALID if the set has no tensor of that name. */
NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t *tensor_set, const char *tensor_name,
                                          nrt_tensor_t **tensor);

/* Runs the model once. input_set must hold exactly the model's inputs and
 * output_set its outputs, by name (nrt_get_model_tensor_info), each tensor
 * exactly the model tensor's size in bytes; otherwise NRT_INVALID and nothing
 * runs. Input bytes are read, output bytes written, in the model's dtypes. */
NRT_STATUS nrt_execute(nrt_model_t *model, const nrt_tensor_set_t *input_set,
                       nrt_tensor_set_t *output_set);
/* nrt_execute() repeat_count times (at least 1). */
NRT_STATUS nrt_execute_repeat(nrt_model_t *model, const nrt_tensor_set_t *input_set,
                              nrt_tensor_set_t *output_set, int repeat_count);

/* Allocates a zero-filled tensor of `size` bytes (size 0 is NRT_INVALID).
 * vnc: -1 or 0. name is optional (NULL allowed). */
NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t tensor_placement, int vnc, size_t size,
                               const char *name, nrt_tensor_t **tensor);
/* Frees the tensor and sets *tensor to NULL; NULL or dead handles are ignored. */
void nrt_tensor_free(nrt_tensor_t **tensor);
/* Copy out of / into the tensor's bytes [offset, offset + size). A range past
 * the tensor's end is NRT_INVALID. */
NRT_STATUS nrt_tensor_read(const nrt_tensor_t *tensor, void *buf, size_t offset, size_t size);
NRT_STATUS nrt_tensor_write(nrt_tensor_t *tensor, const void *buf, size_t offset, size_t size);
NRT_STATUS nrt_tensor_copy(const nrt_tensor_t *src, size_t src_offset, nrt_tensor_t *dst,
                           size_t dst_offset, size_t size);
NRT_STATUS nrt_tensor_memset(nrt_tensor_t *tensor, uint64_t offset, int value, size_t size);

/* Several reads (writes) of one tensor: ops[i] copies ops[i].size bytes at
 * ops[i].offset of the tensor to (from) ops[i].buffer. */
typedef struct nrt_tensor_batch {
  const nrt_tensor_t *tensor;
  const nrt_tensor_batch_op_t *ops;
  uint32_t num_ops;
} nrt_tensor_batch_t;
/* Every batch's tensor and every operation's range are checked before any
 * byte moves: a bad one is NRT_INVALID (NRT_INVALID_HANDLE for a dead
 * tensor) and nothing is copied. `unsafe` is accepted and changes nothing
 * (the checks cost little next to the copies). */
NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t *batches, uint64_t num_batches, bool unsafe);
NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t *batches, uint64_t num_batches, bool unsafe);
/* Size in bytes; 0 for NULL or a dead handle. */
size_t nrt_tensor_get_size(const nrt_tensor_t *tensor);
/* The tensor's storage (host memory on the simulator); NULL for a dead handle
 * or an empty tensor. */
void *nrt_tensor_get_va(const nrt_tensor_t *tensor);

/* A tensor without storage (size 0) until nrt_tensor_attach_buffer gives it
 * some; freed with nrt_tensor_free. */
NRT_STATUS nrt_tensor_allocate_empty(const char *name, nrt_tensor_t **tensor);
/* Makes the caller's `buffer` of `size` bytes the tensor's storage; it must
 * outlive the tensor (and its slices). Storage the tensor had is released once
 * no slice points into it. */
NRT_STATUS nrt_tensor_attach_buffer(nrt_tensor_t *tensor, void *buffer, size_t size);
/* A tensor over bytes [offset, offset + size) of `tensor_source`'s storage,
 * no copy: writes through either are seen by both. The storage stays alive
 * until the source and every slice are freed. */
NRT_STATUS nrt_tensor_allocate_slice(const nrt_tensor_t *tensor_source, size_t offset, size_t size,
                                     const char *name, nrt_tensor_t **tensor_slice);
/* NRT_SUCCESS once `expected_completion_count` executions have written
 * `output_tensor` as an output (counted since allocation or the last reset).
 * Executions are synchronous here, so this only waits for other threads'
 * nrt_execute: up to `timeout` microseconds, forever if negative;
 * NRT_TIMEOUT if the count is not reached. */
NRT_STATUS nrt_tensor_check_output_completion(const nrt_tensor_t *output_tensor, int64_t timeout,
                                              uint64_t expected_completion_count);
NRT_STATUS nrt_tensor_reset_output_completion(nrt_tensor_t *output_tensor);

/* ---- The rest of the public surface, as far as one simulated core allows.
 * Where a call cannot apply to a simulator it returns NRT_INVALID (the
 * public headers' status for an interface that is not supported) with a
 * message naming the call, never a silent success. */

/* nrt_load for a NEFF with collectives: one simulated device, so only
 * ctx_device_id 0 of ctx_device_count 1 (a world of one) loads, as nrt_load. */
NRT_STATUS nrt_load_collectives(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                                uint32_t ctx_device_id, uint32_t ctx_device_count, nrt_model_t **model);
/* Global communicators: a world of one device (id 0 of 1, VNC -1 or 0)
 * succeeds and does nothing else; any larger world is NRT_INVALID. */
NRT_STATUS nrt_build_global_comm(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count);
NRT_STATUS nrt_cc_global_comm_init(uint32_t vnc, uint32_t g_device_id, uint32_t g_device_count);

typedef struct nrt_tensor_device_allocation_info {
  uint64_t physical_address; /* the simulator: the storage's host address */
  size_t size;               /* the tensor's size */
  int hbm_index;             /* always 0 */
} nrt_tensor_device_allocation_info_t;
/* For a tensor with storage; NRT_INVALID for an empty one. */
NRT_STATUS nrt_tensor_get_device_allocation_info(const nrt_tensor_t *tensor,
                                                 nrt_tensor_device_allocation_info_t *alloc_info);

typedef struct nrt_vnc_memory_stats {
  size_t bytes_used;  /* live device-placement tensors' own storage + loaded models' HBM (arena, constants) */
  size_t bytes_limit; /* one trn1 NeuronCore's share of HBM: 16 GiB */
} nrt_vnc_memory_stats_t;
/* VNC 0 only. Copies min(stats_size_in, sizeof) bytes; *stats_size_out gets that count. */
NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t *stats, size_t stats_size_in,
                                    size_t *stats_size_out);

/* Device 0 is host device 0, with routing id 0 (*count becomes 1). */
NRT_STATUS nrt_host_device_id_get(int neuron_dev, uint32_t *host_device_id);
NRT_STATUS nrt_host_device_id_rid_map_get(uint32_t *count, uint32_t *host_did_to_rid_map);

/* No device memory to export, map or attach to a network adapter: each is
 * NRT_INVALID with a message. */
NRT_STATUS nrt_get_dmabuf_fd(uint64_t va, uint64_t size, int *fd);
NRT_STATUS nrt_get_hbm_mmap_va(int device_id, int hbm_idx, void **addr, size_t *size);
NRT_STATUS nrt_get_attached_efa_bdf(const void *va, char *efa_bdf, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_H */
