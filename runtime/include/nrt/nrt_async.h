/*
 * neuron-cc runtime: the asynchronous request API of the public libnrt
 * header of the same name (marked early release upstream; these are the
 * SDK 2.28 declarations).
 *
 * In this runtime every request runs to completion before the call that
 * schedules it returns: a request's sequence id is complete as soon as it
 * is handed out, nrta_get_sequence returns the last request scheduled on an
 * execution unit queue, and a completion handle is an eventfd that is
 * readable from the start. A request whose arguments are wrong is refused
 * with the error status and no sequence id; one that fails while running
 * (NRT_EXEC_* statuses, an out-of-range gather index) gets its sequence id,
 * returns NRT_SUCCESS and leaves (seq_id, status) in the error tracker it
 * was given. Collectives span a world of one device: rank 0 of 1.
 */
#ifndef NRT_NRT_ASYNC_H
#define NRT_NRT_ASYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Execution units (values as in the public header). */
typedef enum {
  NRTA_XU_TENSOR_READ = 0,
  NRTA_XU_TENSOR_WRITE,
  NRTA_XU_TENSOR_OP, /* tensor ops other than reads and writes */
  NRTA_XU_COMPUTE,
  NRTA_XU_COLLECTIVES,
  NRTA_XU_TYPE_NUM
} nrta_xu_t;

/* A sequence id: the execution unit id in the top 16 bits, a strictly
 * increasing sequence number (from 1) in the low 48. */
typedef uint64_t nrta_seq_t;
typedef uint16_t nrta_xu_id_t;

#define NRTA_SEQ_NUM_MAX ((1ull << 48) - 1)
#define NRTA_SEQ_NUM_MASK NRTA_SEQ_NUM_MAX
#define NRTA_SEQ_GET_SEQ_NUM(seq_id) ((seq_id) & NRTA_SEQ_NUM_MASK)
#define NRTA_SEQ_GET_XU_ID(seq_id) ((seq_id) >> 48)

typedef struct nrta_error {
  nrta_seq_t seq_id;
  uint64_t error_code; /* an NRT_STATUS */
} nrta_error_t;

typedef struct nrta_error_tracker nrta_error_tracker_t;

/* Copies between a host buffer and a tensor (TENSOR_WRITE / TENSOR_READ),
 * and between two tensors (TENSOR_OP). queue: 0 to 255. err may be NULL. */
NRT_STATUS nrta_tensor_write(nrt_tensor_t *tensor, const void *buf, uint64_t offset, uint64_t size, int queue,
                             nrta_error_tracker_t *err, nrta_seq_t *req_sequence);
NRT_STATUS nrta_tensor_read(void *buf, nrt_tensor_t *tensor, uint64_t offset, uint64_t size, int queue,
                            nrta_error_tracker_t *err, nrta_seq_t *req_sequence);
NRT_STATUS nrta_tensor_copy(nrt_tensor_t *src, uint64_t src_offset, nrt_tensor_t *dst, uint64_t dst_offset,
                            uint64_t size, int queue, nrta_error_tracker_t *err, nrta_seq_t *req_sequence);
/* nrt_execute as a request of the COMPUTE unit; queue must be 0. */
NRT_STATUS nrta_execute_schedule(nrt_model_t *model, const nrt_tensor_set_t *input, nrt_tensor_set_t *output,
                                 int queue, nrta_error_tracker_t *err, nrta_seq_t *req_sequence);
/* A collective over `comm` (one rank: replica group {0}, device 0 of 1, VNC
 * 0): input and output lists of the same length, each output as large as
 * its input, whose bytes it receives (all-gather, all-reduce and
 * reduce-scatter of one rank). The context is freed by nrta_cc_schedule,
 * which sets *cc_ctx to NULL; queue must be 0. */
NRT_STATUS nrta_cc_prepare(nrt_cc_comm_t *comm, nrt_tensor_list_t *input, nrt_tensor_list_t *output,
                           nrt_dtype_t dtype, nrt_op_type_t op, nrt_cc_op_type_t cc_op, nrt_cc_context_t **cc_ctx);
NRT_STATUS nrta_cc_schedule(nrt_cc_context_t **cc_ctx, int queue, nrta_error_tracker_t *err,
                            nrta_seq_t *req_sequence);

/* NRT_INVALID for a sequence id never handed out. */
NRT_STATUS nrta_is_completed(nrta_seq_t seq, bool *is_completed);
/* The last request scheduled (and so completed) on the unit's queue; its
 * sequence number is 0 when there was none. lnc must be 0. */
NRT_STATUS nrta_get_sequence(uint32_t lnc, nrta_xu_t xu, int queue, nrta_seq_t *seq);
/* A file descriptor, readable once the request is complete (at once here);
 * close() it when done. */
NRT_STATUS nrta_get_completion_handle(nrta_seq_t seq, int *fd);

/* The errors of failed requests, in the order they ran. lnc_idx must be 0.
 * The list stays valid until the tracker's next request or its destruction. */
NRT_STATUS nrta_error_tracker_create(uint32_t lnc_idx, nrta_error_tracker_t **error_tracker);
void nrta_error_tracker_destroy(nrta_error_tracker_t *error_tracker);
NRT_STATUS nrta_error_tracker_get_list(nrta_error_tracker_t *error_tracker, const nrta_error_t **list,
                                       size_t *error_count);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_ASYNC_H */
