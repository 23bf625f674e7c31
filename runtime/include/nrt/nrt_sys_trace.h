/*
 * neuron-cc runtime: system trace capture, as in the public libnrt header of
 * the same name. Between nrt_sys_trace_start() and nrt_sys_trace_stop() the
 * runtime records the events an inspect session's trace.json holds (host
 * calls, dispatches, their instructions and kernels: see
 * nrt_sys_trace_get_event_types) in memory, per NeuronCore, keeping the
 * newest max_events_per_nc of each. nrt_sys_trace_fetch_events() hands out
 * the events not fetched before as one JSON document in trace.json's format
 * (Chrome trace events, times in microseconds on the capture's clock: host
 * time since the capture started, each execution lasting its modeled device
 * time) and forgets them. The capture may run with or without an inspect
 * session, before or after nrt_init().
 */
#ifndef NRT_NRT_SYS_TRACE_H
#define NRT_NRT_SYS_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nrt_sys_trace_config nrt_sys_trace_config_t;

/* A configuration with the defaults: every event type and NeuronCore
 * enabled, 2^20 events kept per NeuronCore. */
NRT_STATUS nrt_sys_trace_config_allocate(nrt_sys_trace_config_t **options);
void nrt_sys_trace_config_set_defaults(nrt_sys_trace_config_t *options);
void nrt_sys_trace_config_free(nrt_sys_trace_config_t *options);
/* The newest events kept per NeuronCore (0: the default). */
void nrt_sys_trace_config_set_max_events_per_nc(nrt_sys_trace_config_t *options, uint64_t max_events_per_nc);
void nrt_sys_trace_config_set_capture_enabled_for_nc(nrt_sys_trace_config_t *options, uint32_t nc_idx, bool enabled);
/* NRT_INVALID for a name nrt_sys_trace_get_event_types does not list. */
NRT_STATUS nrt_sys_trace_config_set_capture_enabled_for_event_type(nrt_sys_trace_config_t *options,
                                                                  const char *event_type, bool enabled);

/* The event types: "nrt_load", "nrt_unload", "nrt_execute" (host calls),
 * "nrta_execute_schedule" (a dispatch, launch cost included),
 * "nc_exec_running" (a dispatch's instructions), "kernel" (one kernel's
 * slice of them). Lists allocated with malloc (each string too): free them
 * with nrt_sys_trace_free_event_types or free(). */
NRT_STATUS nrt_sys_trace_get_event_types(const char ***event_types, size_t *count);
void nrt_sys_trace_free_event_types(const char **event_types, size_t count);
NRT_STATUS nrt_sys_trace_config_get_enabled_event_types(nrt_sys_trace_config_t *options, const char ***event_types,
                                                       size_t *count);

/* Starts capturing with the configuration (NULL: the defaults); NRT_INVALID
 * if a capture is already running. */
NRT_STATUS nrt_sys_trace_start(nrt_sys_trace_config_t *options);
/* Ends the capture and drops the events not fetched; NRT_INVALID if none is
 * running. */
NRT_STATUS nrt_sys_trace_stop(void);

typedef struct nrt_sys_trace_fetch_options nrt_sys_trace_fetch_options_t;

/* Defaults: every NeuronCore, every event held. */
NRT_STATUS nrt_sys_trace_fetch_options_allocate(nrt_sys_trace_fetch_options_t **options);
void nrt_sys_trace_fetch_options_set_defaults(nrt_sys_trace_fetch_options_t *options);
void nrt_sys_trace_fetch_options_free(nrt_sys_trace_fetch_options_t *options);
/* At most this many events of each NeuronCore, the oldest first. */
void nrt_sys_trace_fetch_options_set_max_events_per_nc(nrt_sys_trace_fetch_options_t *options,
                                                       uint64_t max_events_per_nc);
/* The events of this NeuronCore only. */
void nrt_sys_trace_fetch_options_set_nc_idx(nrt_sys_trace_fetch_options_t *options, uint64_t nc_idx);

/* *buffer: a NUL-terminated JSON document allocated by the runtime (free it
 * with nrt_sys_trace_buffer_free); *written_size: its length without the
 * NUL. Fetched events are not handed out again. options NULL: the defaults.
 * NRT_INVALID if no capture is running. */
NRT_STATUS nrt_sys_trace_fetch_events(char **buffer, size_t *written_size,
                                      const nrt_sys_trace_fetch_options_t *options);
void nrt_sys_trace_buffer_free(char *buffer);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_SYS_TRACE_H */
