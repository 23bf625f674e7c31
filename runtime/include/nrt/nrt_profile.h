/*
 * neuron-cc runtime: profiling, as in the public libnrt header of the same
 * name. Three ways to capture a device trace (the third, continuous
 * profiling, is described with its functions below):
 *
 *  1. nrt_profile_start(model, file) ... executions ... nrt_profile_stop(file):
 *     writes one NTFF (runtime/neff/ntff.proto) holding every execution of
 *     `model` in between.
 *
 *  2. An inspect session, nrt_inspect_begin*() ... nrt_inspect_stop(): writes
 *     a whole profile directory:
 *       neff_<H>.neff                  byte-identical copy of each loaded NEFF
 *       <H>_instid_<i>_vnc_<n>.ntff    its device trace (i: the i-th load of
 *                                      that NEFF in this process, n: core)
 *       trace.json                     Chrome trace events (open in Perfetto):
 *                                      framework, runtime and hardware lanes
 *     where H is the NEFF's profile hash (first 8 bytes of its header SHA-256,
 *     little-endian, decimal). Models loaded before the session started are
 *     included once they execute; a model that never executes during the
 *     session gets no files.
 *
 * A session started by nrt_inspect_begin*() is written only by
 * nrt_inspect_stop(); nrt_close() drops it unwritten. A session started by
 * NEURON_RT_INSPECT_ENABLE=1 at nrt_init() is written by nrt_close().
 *
 * All files are written atomically (temporary file + rename).
 */
#ifndef NRT_NRT_PROFILE_H
#define NRT_NRT_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Captures executions of `model` until nrt_profile_stop(filename) with the
 * same filename. A model is profiled by at most one such capture at a time. */
NRT_STATUS nrt_profile_start(nrt_model_t *model, const char *filename);
/* Writes the NTFF to `filename` and ends that capture. The capture holds its
 * own copy of what it needs, so the model may have been unloaded. A capture
 * with no execution in it ends without writing anything and returns
 * NRT_INVALID (an empty trace is not a profile). */
NRT_STATUS nrt_profile_stop(const char *filename);

/* Continuous profiling: while it runs, each NeuronCore's latest execution
 * is kept, and nrt_profile_continuous_save(vnc, options) writes it to the
 * options' output directory (default ./output) as
 * <H>_instid_<i>_vnc_<vnc>.ntff (i: the first index not taken there) beside
 * neff_<H>.neff, the NEFF it ran. NRT_INVALID: starting twice or while an
 * inspect session captures device profiles, saving a NeuronCore with no
 * execution since the start, saving or stopping when not running. */
typedef struct nrt_profile_continuous_options nrt_profile_continuous_options_t;
NRT_STATUS nrt_profile_continuous_options_allocate(nrt_profile_continuous_options_t **options);
NRT_STATUS nrt_profile_continuous_options_free(nrt_profile_continuous_options_t *options);
NRT_STATUS nrt_profile_continuous_options_set_output_dir(nrt_profile_continuous_options_t *options,
                                                         const char *output_dir);
NRT_STATUS nrt_profile_continuous_start(nrt_profile_continuous_options_t *options);
NRT_STATUS nrt_profile_continuous_save(uint32_t vnc, nrt_profile_continuous_options_t *options);
NRT_STATUS nrt_profile_continuous_stop(void);

typedef struct nrt_inspect_config nrt_inspect_config_t;

NRT_STATUS nrt_inspect_config_allocate(nrt_inspect_config_t **options);
/* The defaults of the public header: output directory "./output", session
 * id 1, every activity and every system trace event type and NeuronCore
 * enabled, and inspect mode OFF: a session begun with these options
 * captures nothing until nrt_inspect_config_set_enable_inspect(options,
 * true). */
NRT_STATUS nrt_inspect_config_set_defaults(nrt_inspect_config_t *options);
NRT_STATUS nrt_inspect_config_free(nrt_inspect_config_t *options);
/* Copied; created (with parents) when the session begins. */
NRT_STATUS nrt_inspect_config_set_output_dir(nrt_inspect_config_t *options, const char *output_dir);
/* Written to trace.json's "otherData" as "session_id". */
NRT_STATUS nrt_inspect_config_set_session_id(nrt_inspect_config_t *options, int session_id);
/* Capture on (profiles of every execution) or off (the default). */
NRT_STATUS nrt_inspect_config_set_enable_inspect(nrt_inspect_config_t *options, bool enable_inspect);
/* Accepted and kept. A failed execution leaves no device trace in this
 * simulator (its timeline is not modeled), so on its own this option writes
 * no profile. */
NRT_STATUS nrt_inspect_config_set_enable_inspect_on_fail(nrt_inspect_config_t *options, bool enable_inspect_on_fail);
/* trace.json keeps at most this many events per NeuronCore, the newest (0:
 * the default, 2^20). */
NRT_STATUS nrt_inspect_config_set_sys_trace_max_events_per_nc(nrt_inspect_config_t *options,
                                                              uint64_t sys_trace_max_events_per_nc);
/* trace.json leaves out the events of a disabled NeuronCore. */
NRT_STATUS nrt_inspect_config_set_capture_enabled_for_nc(nrt_inspect_config_t *options, uint32_t nc_idx, bool enabled);
/* trace.json leaves out events of a disabled type (a name that
 * nrt_sys_trace_get_event_types lists; NRT_INVALID for any other). */
NRT_STATUS nrt_inspect_config_set_capture_enabled_for_event_type_string(nrt_inspect_config_t *options,
                                                                      const char *event_type, bool enabled);
/* Activities: "system_profile" (trace.json), "device_profile" (the NEFF
 * copies and NTFFs), "host_memory" and "cpu_util" (accepted; this runtime
 * writes no such profile), or "all". NRT_INVALID for any other name. */
NRT_STATUS nrt_inspect_config_set_activity(nrt_inspect_config_t *options, const char *activity_type, bool enabled);
/* Lists allocated with malloc (each string too): free them with
 * nrt_inspect_config_free_activity_types or free(). */
NRT_STATUS nrt_inspect_config_get_all_activity_types(const char ***activity_types, size_t *count);
NRT_STATUS nrt_inspect_config_get_enabled_activity_types(nrt_inspect_config_t *options, const char ***activity_types,
                                                        size_t *count);
void nrt_inspect_config_free_activity_types(const char **activity_types, size_t count);

/* Starts a session with the options (NULL: the defaults, which capture
 * nothing). NRT_INVALID if one is already running. */
NRT_STATUS nrt_inspect_begin_with_options(nrt_inspect_config_t *options);
/* Starts a capturing session with the options of the environment:
 * $NEURON_RT_INSPECT_OUTPUT_DIR (default ./output); the system profile
 * (trace.json) is left out when NEURON_RT_INSPECT_SYSTEM_PROFILE=0, the
 * device profiles when NEURON_RT_INSPECT_DEVICE_PROFILE=0. */
NRT_STATUS nrt_inspect_begin(void);
/* Writes the profile directory and ends the session (a session that
 * captures nothing writes nothing). */
NRT_STATUS nrt_inspect_stop(void);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_PROFILE_H */
