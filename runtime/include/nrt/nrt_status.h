/*
 * neuron-cc runtime: status codes.
 *
 * The names and numeric values follow the public Neuron runtime (libnrt)
 * header of the same name, so that programs written against the public
 * documentation compile and interpret results the same way. Values are part
 * of the ABI: never renumber, only append.
 */
#ifndef NRT_NRT_STATUS_H
#define NRT_NRT_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  NRT_SUCCESS = 0,
  NRT_FAILURE = 1,             /* failure with no more specific code */
  NRT_INVALID = 2,             /* bad argument: corrupt NEFF, tensor name/size mismatch, NULL... */
  NRT_INVALID_HANDLE = 3,      /* a model/tensor/tensor-set handle that is not live */
  NRT_RESOURCE = 4,            /* memory could not be allocated */
  NRT_TIMEOUT = 5,
  NRT_HW_ERROR = 6,
  NRT_QUEUE_FULL = 7,
  NRT_LOAD_NOT_ENOUGH_NC = 9,  /* the requested NeuronCores do not exist */
  NRT_UNSUPPORTED_NEFF_VERSION = 10,
  NRT_FAIL_HOST_MEM_ALLOC = 11, /* kept for compatibility; NRT_RESOURCE is used instead */
  NRT_UNINITIALIZED = 13,      /* called before nrt_init() */
  NRT_CLOSED = 14,             /* called after nrt_close() */
  NRT_QUEUE_EMPTY = 15,
  NRT_EXEC_UNIT_UNRECOVERABLE = 101, /* the name in current public headers */
  NRT_EXEC_UNIT_DISABLED = 101,      /* its older name */
  NRT_EXEC_BAD_INPUT = 1002,
  NRT_EXEC_COMPLETED_WITH_NUM_ERR = 1003,
  NRT_EXEC_COMPLETED_WITH_ERR = 1004,
  NRT_EXEC_NC_BUSY = 1005,
  NRT_EXEC_OOB = 1006,
  NRT_COLL_PENDING = 1100,
  NRT_EXEC_HW_ERR_COLLECTIVES = 1200,
  NRT_EXEC_HW_ERR_HBM_UE = 1201,
  NRT_EXEC_HW_ERR_NC_UE = 1202,
  NRT_EXEC_HW_ERR_DMA_ABORT = 1203,
  NRT_EXEC_SW_NQ_OVERFLOW = 1204,
  NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE = 1205,
  NRT_NETWORK_PROXY_FAILURE = 1206
} NRT_STATUS;

/* The enumerator's name ("NRT_INVALID"), or "NRT_UNKNOWN_STATUS". The string
 * is static; never free it. */
const char *nrt_get_status_as_str(NRT_STATUS status);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_STATUS_H */
