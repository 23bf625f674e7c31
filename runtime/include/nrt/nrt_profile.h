/*
 * neuron-cc runtime: profiling, as in the public libnrt header of the same
 * name. Two ways to capture a device trace:
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
 *     session gets no files. Only the options below are supported.
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

typedef struct nrt_inspect_config nrt_inspect_config_t;

NRT_STATUS nrt_inspect_config_allocate(nrt_inspect_config_t **options);
/* Output directory "./output". */
NRT_STATUS nrt_inspect_config_set_defaults(nrt_inspect_config_t *options);
NRT_STATUS nrt_inspect_config_free(nrt_inspect_config_t *options);
/* Copied; created (with parents) when the session begins. */
NRT_STATUS nrt_inspect_config_set_output_dir(nrt_inspect_config_t *options, const char *output_dir);

/* Starts a session with the options (NULL: defaults). NRT_INVALID if one is
 * already running. */
NRT_STATUS nrt_inspect_begin_with_options(nrt_inspect_config_t *options);
/* Starts a session writing to $NEURON_RT_INSPECT_OUTPUT_DIR (default ./output). */
NRT_STATUS nrt_inspect_begin(void);
/* Writes the profile directory and ends the session. */
NRT_STATUS nrt_inspect_stop(void);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_PROFILE_H */
