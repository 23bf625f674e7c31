/*
 * neuron-cc runtime: extensions that the public libnrt API does not have.
 * They exist because the runtime is a simulator: a program needs to choose
 * what it simulates and to read the modeled device time. Everything here is
 * specific to neuron-cc; portable programs should not depend on it.
 */
#ifndef NRT_NRT_EXT_H
#define NRT_NRT_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why the most recent failed nrt_* call on this thread failed, in one line
 * (for example "input 'x': tensor is 64 bytes, model expects 2048"). The
 * message stays until the next failure on the thread; "" if none yet. The
 * pointer is valid until the thread's next nrt_* call. */
const char *nrt_get_last_error_message(void);

/* Chooses the simulated instance: "trn1" or "trn2". NULL or "" (the default)
 * simulates whatever target each NEFF was compiled for. With a target set,
 * nrt_load refuses NEFFs compiled for another one, as real hardware would.
 * Only valid while the runtime is not initialized (before nrt_init or after
 * nrt_close); NRT_INVALID otherwise or for an unknown name. */
NRT_STATUS nrt_set_simulated_target(const char *target);

/* The target ("trn1", "trn2") and name a model's NEFF was compiled with,
 * copied NUL-terminated into buffers of `len` bytes (NRT_RESOURCE if too
 * small). Either buffer may be NULL. */
NRT_STATUS nrt_get_model_target(const nrt_model_t *model, char *target, char *name, size_t len);

/* Whether the model's input or output tensor `name` holds PyTorch bools (one
 * byte each, 0 or 1). nrt_get_model_tensor_info reports both bool and uint8
 * tensors as NRT_DTYPE_UINT8, as the public API has no bool dtype; a tool
 * that reads or writes .npy files tells them apart here. NRT_INVALID for a
 * name the model does not have. */
NRT_STATUS nrt_get_model_tensor_is_bool(const nrt_model_t *model, const char *name, bool *is_bool);

/* Modeled device time of the model's most recent execution (nrt_execute or
 * nrt_execute_timing_only). */
typedef struct nrt_execution_stats {
  uint64_t device_time_ps;     /* all dispatches, launch overhead included */
  uint64_t launch_overhead_ps; /* the part that is the fixed per-dispatch cost */
  uint64_t kernel_count;       /* kernels (a dispatch runs one or more) */
  uint64_t instruction_count;
  uint64_t hbm_read_bytes;     /* bytes read by DMA loads and gathers (rows and indices) */
  uint64_t hbm_write_bytes;    /* bytes moved by DMA stores */
  uint64_t profile_hash;       /* the <H> of the model's profile files */
  uint64_t dispatch_count;     /* dispatches: 1 for a NEFF compiled at -O1/-O2 */
  uint64_t timing_only;        /* 1 if that execution was nrt_execute_timing_only */
  /* New fields are only ever appended. */
} nrt_execution_stats_t;

/* stats_size_in: the caller's sizeof(nrt_execution_stats_t); *stats_size_out
 * (may be NULL): bytes written. NRT_INVALID if the model has not executed. */
NRT_STATUS nrt_get_last_execution_stats(const nrt_model_t *model, nrt_execution_stats_t *stats,
                                        size_t stats_size_in, size_t *stats_size_out);

/* Runs the model's timing `repeat_count` times without computing any value:
 * the modeled timeline, profiles (nrt_profile_start, inspect sessions),
 * execution stats and trace.json are exactly those of nrt_execute, to the
 * tick, because the timing model never depends on tensor values (a
 * dma_gather's cost does not depend on the rows it looks up). Nothing is read
 * from the inputs or written to the outputs, and the simulated SBUF, PSUM and
 * HBM arena are not allocated, so a model far larger than host memory can be
 * timed. Either set may be NULL; a set that is given is checked as
 * nrt_execute checks it (every tensor present, sizes right). A gather index
 * outside its table is therefore not detected. */
NRT_STATUS nrt_execute_timing_only(nrt_model_t *model, const nrt_tensor_set_t *input_set,
                                   nrt_tensor_set_t *output_set, int repeat_count);

/* A profiling session (nrt_inspect_begin*, or NEURON_RT_INSPECT_ENABLE=1)
 * places every trace.json event on one clock, in picoseconds since the
 * session began: host time, except that each execution lasts its modeled
 * device time rather than the host time its simulation took. These two calls
 * let an application put its own work on the framework lane beside the
 * runtime's calls (a framework's model call, its input and output copies). */

/* The session clock now. NRT_INVALID when no session is running. */
NRT_STATUS nrt_inspect_get_time(uint64_t *session_ps);

/* Adds the slice [start_ps, end_ps] (session clock, start <= end) named
 * `name` to the framework lane, with `arg_count` key/value strings shown as
 * its arguments. Every string must be non-empty (values may be empty),
 * well-formed UTF-8 and at most 4096 bytes; at most 64 arguments.
 * NRT_INVALID otherwise, or when no session is running. */
NRT_STATUS nrt_inspect_add_framework_event(const char *name, uint64_t start_ps, uint64_t end_ps,
                                           const char *const *arg_keys, const char *const *arg_values,
                                           size_t arg_count);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_EXT_H */
