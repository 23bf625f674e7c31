/*
 * neuron-cc runtime: one operation of a batched tensor read or write
 * (nrt_tensor_read_batch / nrt_tensor_write_batch in nrt.h). The path, names
 * and layout follow the public Neuron headers, so that programs written
 * against them compile unchanged.
 */
#ifndef NDL_NEURON_DRIVER_SHARED_TENSOR_BATCH_OP_H
#define NDL_NEURON_DRIVER_SHARED_TENSOR_BATCH_OP_H

#include <stdint.h>

typedef uint64_t nrt_tensor_batch_offset_t;
typedef uint64_t nrt_tensor_batch_size_t;

/* `size` bytes at `offset` in the tensor, to or from `buffer`. */
typedef struct nrt_tensor_batch_op {
  nrt_tensor_batch_offset_t offset;
  nrt_tensor_batch_size_t size;
  void *buffer;
} nrt_tensor_batch_op_t;

#endif /* NDL_NEURON_DRIVER_SHARED_TENSOR_BATCH_OP_H */
