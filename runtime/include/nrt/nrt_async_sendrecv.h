/*
 * neuron-cc runtime: point-to-point tensor transfers between hosts, as in the
 * public libnrt header of the same name. The simulated device has no
 * network: both limits are 0, and every other call returns NRT_INVALID with
 * a message naming it (nrt_get_last_error_message).
 */
#ifndef NRT_NRT_ASYNC_SENDRECV_H
#define NRT_NRT_ASYNC_SENDRECV_H

#include <stdbool.h>
#include <stddef.h>

#include "nrt/nrt.h"
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nrt_async_sendrecv_comm nrt_async_sendrecv_comm_t;
typedef struct nrt_async_sendrecv_request nrt_async_sendrecv_request_t;

NRT_STATUS nrt_async_sendrecv_get_max_num_communicators_per_lnc(int *num);
NRT_STATUS nrt_async_sendrecv_get_max_num_pending_request(int *num);
NRT_STATUS nrt_async_sendrecv_init(int lnc);
NRT_STATUS nrt_async_sendrecv_close(int lnc);
NRT_STATUS nrt_async_sendrecv_connect(const char *peer_ip, int peer_lnc, int lnc, nrt_async_sendrecv_comm_t **send_comm);
NRT_STATUS nrt_async_sendrecv_accept(const char *peer_ip, int peer_lnc, int lnc, nrt_async_sendrecv_comm_t **recv_comm);
NRT_STATUS nrt_async_sendrecv_test_comm(nrt_async_sendrecv_comm_t *comm, bool *done);
NRT_STATUS nrt_async_sendrecv_send_tensor(nrt_tensor_t *tensor, size_t offset, size_t length,
                                          nrt_async_sendrecv_comm_t *send_comm, nrt_async_sendrecv_request_t **request);
NRT_STATUS nrt_async_sendrecv_recv_tensor(nrt_tensor_t *tensor, size_t offset, size_t length,
                                          nrt_async_sendrecv_comm_t *recv_comm, nrt_async_sendrecv_request_t **request);
NRT_STATUS nrt_async_sendrecv_test_request(nrt_async_sendrecv_request_t *request, bool *done, size_t *size);
NRT_STATUS nrt_async_sendrecv_flush(int lnc);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_ASYNC_SENDRECV_H */
