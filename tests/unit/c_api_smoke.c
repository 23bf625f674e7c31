/* A C program written against the public-style API, as an application
 * would: compiled by the test with nothing but
 *     cc c_api_smoke.c -I runtime/include -L build/lib -lnrt
 * Usage: c_api_smoke ADD.neff OUT.ntff
 * ADD.neff computes z = x + y over float32 [4, 8] (tests/unit/make_test_neffs). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nrt/nrt.h"
#include "nrt/nrt_async.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_ext.h"
#include "nrt/nrt_profile.h"
#include "nrt/nrt_sys_trace.h"

static int failures = 0;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, \
              #cond, nrt_get_last_error_message());                                   \
      ++failures;                                                                     \
    }                                                                                 \
  } while (0)

static char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  char *buf;
  long n;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = (char *)malloc((size_t)n);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return buf;
}

int main(int argc, char **argv) {
  size_t size = 0, i;
  char *neff;
  nrt_model_t *model = NULL;
  nrt_tensor_info_array_t *info = NULL;
  nrt_tensor_set_t *in = NULL, *out = NULL;
  nrt_tensor_t *x = NULL, *y = NULL, *z = NULL;
  float xv[32], yv[32], zv[32];
  char magic[5] = {0};
  FILE *f;

  if (argc != 3) {
    fprintf(stderr, "usage: c_api_smoke ADD.neff OUT.ntff\n");
    return 2;
  }
  neff = read_file(argv[1], &size);
  if (!neff) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }

  CHECK(nrt_load(neff, size, -1, -1, &model) == NRT_UNINITIALIZED);
  CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_SUCCESS);
  CHECK(nrt_load(neff, 100, -1, -1, &model) == NRT_INVALID);
  CHECK(strstr(nrt_get_last_error_message(), "header") != NULL);
  CHECK(nrt_load(neff, size, -1, -1, &model) == NRT_SUCCESS);

  CHECK(nrt_get_model_tensor_info(model, &info) == NRT_SUCCESS);
  CHECK(info != NULL && info->tensor_count == 3);
  if (info && info->tensor_count == 3) {
    CHECK(strcmp(info->tensor_array[0].name, "x") == 0);
    CHECK(info->tensor_array[2].usage == NRT_TENSOR_USAGE_OUTPUT);
    CHECK(info->tensor_array[2].dtype == NRT_DTYPE_FLOAT32);
    CHECK(info->tensor_array[2].ndim == 2 && info->tensor_array[2].shape[1] == 8);
  }
  nrt_free_model_tensor_info(info);

  for (i = 0; i < 32; ++i) {
    xv[i] = (float)i;
    yv[i] = 0.25f * (float)i;
  }
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, sizeof xv, "x", &x) == NRT_SUCCESS);
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, sizeof yv, "y", &y) == NRT_SUCCESS);
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, sizeof zv, "z", &z) == NRT_SUCCESS);
  CHECK(nrt_tensor_write(x, xv, 0, sizeof xv) == NRT_SUCCESS);
  CHECK(nrt_tensor_write(y, yv, 0, sizeof yv) == NRT_SUCCESS);
  CHECK(nrt_tensor_write(y, yv, 4, sizeof yv) == NRT_INVALID);
  CHECK(nrt_allocate_tensor_set(&in) == NRT_SUCCESS);
  CHECK(nrt_allocate_tensor_set(&out) == NRT_SUCCESS);
  CHECK(nrt_add_tensor_to_tensor_set(in, "x", x) == NRT_SUCCESS);
  CHECK(nrt_add_tensor_to_tensor_set(out, "z", z) == NRT_SUCCESS);
  CHECK(nrt_execute(model, in, out) == NRT_INVALID); /* y is missing */
  CHECK(strstr(nrt_get_last_error_message(), "'y'") != NULL);
  CHECK(nrt_add_tensor_to_tensor_set(in, "y", y) == NRT_SUCCESS);

  CHECK(nrt_profile_start(model, argv[2]) == NRT_SUCCESS);
  CHECK(nrt_execute(model, in, out) == NRT_SUCCESS);
  CHECK(nrt_profile_stop(argv[2]) == NRT_SUCCESS);
  CHECK(nrt_tensor_read(z, zv, 0, sizeof zv) == NRT_SUCCESS);
  for (i = 0; i < 32; ++i) CHECK(zv[i] == 1.25f * (float)i);

  f = fopen(argv[2], "rb");
  CHECK(f != NULL);
  if (f) {
    CHECK(fread(magic, 1, 4, f) == 4);
    CHECK(strcmp(magic, "NTFF") == 0);
    fclose(f);
  }

  /* Completion counts: z was written by the execution above. */
  CHECK(nrt_tensor_check_output_completion(z, 0, 1) == NRT_SUCCESS);
  CHECK(nrt_tensor_check_output_completion(z, 1000, 2) == NRT_TIMEOUT);
  CHECK(nrt_tensor_reset_output_completion(z) == NRT_SUCCESS);
  CHECK(nrt_tensor_check_output_completion(z, 0, 1) == NRT_TIMEOUT);

  /* The same model on tensors over the caller's buffers: x as a slice of a
     larger tensor, y and z attached to arrays of ours. */
  {
    nrt_tensor_t *big = NULL, *xs = NULL, *ye = NULL, *ze = NULL;
    nrt_tensor_set_t *in2 = NULL, *out2 = NULL;
    float zmine[32];
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 2 * sizeof xv, "big", &big) == NRT_SUCCESS);
    CHECK(nrt_tensor_write(big, xv, sizeof xv, sizeof xv) == NRT_SUCCESS);
    CHECK(nrt_tensor_allocate_slice(big, sizeof xv, sizeof xv, "x", &xs) == NRT_SUCCESS);
    CHECK(nrt_tensor_allocate_slice(big, sizeof xv + 4, sizeof xv, "x", &ye) == NRT_INVALID); /* past the end */
    CHECK(nrt_tensor_get_size(xs) == sizeof xv);
    CHECK((char *)nrt_tensor_get_va(xs) == (char *)nrt_tensor_get_va(big) + sizeof xv);
    CHECK(nrt_tensor_allocate_empty("y", &ye) == NRT_SUCCESS);
    CHECK(nrt_tensor_get_size(ye) == 0);
    CHECK(nrt_tensor_attach_buffer(ye, yv, sizeof yv) == NRT_SUCCESS);
    CHECK(nrt_tensor_allocate_empty("z", &ze) == NRT_SUCCESS);
    CHECK(nrt_tensor_attach_buffer(ze, zmine, sizeof zmine) == NRT_SUCCESS);
    CHECK(nrt_tensor_attach_buffer(ze, NULL, 4) == NRT_INVALID);
    CHECK(nrt_allocate_tensor_set(&in2) == NRT_SUCCESS);
    CHECK(nrt_allocate_tensor_set(&out2) == NRT_SUCCESS);
    CHECK(nrt_add_tensor_to_tensor_set(in2, "x", xs) == NRT_SUCCESS);
    CHECK(nrt_add_tensor_to_tensor_set(in2, "y", ye) == NRT_SUCCESS);
    CHECK(nrt_add_tensor_to_tensor_set(out2, "z", ze) == NRT_SUCCESS);
    nrt_tensor_free(&big); /* the slice keeps the storage alive */
    CHECK(nrt_execute(model, in2, out2) == NRT_SUCCESS);
    for (i = 0; i < 32; ++i) CHECK(zmine[i] == 1.25f * (float)i);
    nrt_destroy_tensor_set(&in2);
    nrt_destroy_tensor_set(&out2);
    nrt_tensor_free(&xs);
    nrt_tensor_free(&ye);
    nrt_tensor_free(&ze);
  }
  {
    nrt_version_t v;
    memset(&v, 0, sizeof v);
    CHECK(nrt_get_version(&v, sizeof v) == NRT_SUCCESS);
    CHECK(v.rt_major == NRT_MAJOR_VERSION);
    CHECK(strstr(v.rt_detail, "neuron-cc") != NULL);
    CHECK(nrt_get_version(NULL, sizeof v) == NRT_INVALID);
  }
  /* The rest of the public surface: a world of one simulated device. */
  {
    nrt_model_t *m2 = NULL;
    nrt_vnc_memory_stats_t stats;
    nrt_tensor_device_allocation_info_t alloc;
    size_t written = 0, len = 0;
    uint32_t id = 7, count = 4, rids[4] = {9, 9, 9, 9};
    int fd = 0;
    void *va = &fd;
    char bdf[32];
    CHECK(nrt_load_collectives(neff, size, -1, -1, 0, 1, &m2) == NRT_SUCCESS);
    CHECK(m2 != NULL);
    CHECK(nrt_unload(m2) == NRT_SUCCESS);
    CHECK(nrt_load_collectives(neff, size, -1, -1, 1, 2, &m2) == NRT_INVALID);
    CHECK(m2 == NULL);
    CHECK(strstr(nrt_get_last_error_message(), "world of one") != NULL);
    CHECK(nrt_build_global_comm(-1, 0, 1) == NRT_SUCCESS);
    CHECK(nrt_build_global_comm(0, 0, 8) == NRT_INVALID);
    CHECK(nrt_cc_global_comm_init(0, 0, 1) == NRT_SUCCESS);
    CHECK(nrt_cc_global_comm_init(3, 0, 1) == NRT_INVALID);
    CHECK(nrt_get_vnc_memory_stats(0, &stats, sizeof stats, &written) == NRT_SUCCESS);
    CHECK(written == sizeof stats);
    CHECK(stats.bytes_used >= 3 * sizeof xv); /* x, y and z are live */
    CHECK(stats.bytes_limit == (size_t)16 << 30);
    CHECK(nrt_get_vnc_memory_stats(1, &stats, sizeof stats, &written) == NRT_INVALID);
    CHECK(nrt_tensor_get_device_allocation_info(x, &alloc) == NRT_SUCCESS);
    CHECK(alloc.size == sizeof xv && alloc.hbm_index == 0);
    CHECK(alloc.physical_address == (uint64_t)(uintptr_t)nrt_tensor_get_va(x));
    CHECK(nrt_host_device_id_get(0, &id) == NRT_SUCCESS && id == 0);
    CHECK(nrt_host_device_id_get(1, &id) == NRT_INVALID);
    CHECK(nrt_host_device_id_rid_map_get(&count, rids) == NRT_SUCCESS && count == 1 && rids[0] == 0);
    CHECK(nrt_get_dmabuf_fd(0, 64, &fd) == NRT_INVALID && fd == -1);
    CHECK(strstr(nrt_get_last_error_message(), "not supported") != NULL);
    CHECK(nrt_get_hbm_mmap_va(0, 0, &va, &len) == NRT_INVALID && va == NULL);
    len = sizeof bdf;
    CHECK(nrt_get_attached_efa_bdf(nrt_tensor_get_va(x), bdf, &len) == NRT_INVALID);
  }
  /* System trace capture and fetch, as a C client of the public header uses them. */
  {
    nrt_sys_trace_config_t *cfg = NULL;
    nrt_sys_trace_fetch_options_t *fetch = NULL;
    const char **types = NULL;
    size_t ntypes = 0, written = 0;
    char *events = NULL;
    CHECK(nrt_sys_trace_config_allocate(&cfg) == NRT_SUCCESS);
    nrt_sys_trace_config_set_max_events_per_nc(cfg, 1000);
    nrt_sys_trace_config_set_capture_enabled_for_nc(cfg, 0, true);
    CHECK(nrt_sys_trace_get_event_types(&types, &ntypes) == NRT_SUCCESS && ntypes > 0);
    CHECK(nrt_sys_trace_config_set_capture_enabled_for_event_type(cfg, types[0], true) == NRT_SUCCESS);
    nrt_sys_trace_free_event_types(types, ntypes);
    CHECK(nrt_sys_trace_start(cfg) == NRT_SUCCESS);
    nrt_sys_trace_config_free(cfg);
    CHECK(nrt_execute(model, in, out) == NRT_SUCCESS);
    CHECK(nrt_sys_trace_fetch_options_allocate(&fetch) == NRT_SUCCESS);
    nrt_sys_trace_fetch_options_set_nc_idx(fetch, 0);
    nrt_sys_trace_fetch_options_set_max_events_per_nc(fetch, 10000);
    CHECK(nrt_sys_trace_fetch_events(&events, &written, fetch) == NRT_SUCCESS);
    CHECK(events != NULL && written == strlen(events));
    CHECK(events != NULL && strstr(events, "\"nc_exec_running\"") != NULL);
    nrt_sys_trace_buffer_free(events);
    nrt_sys_trace_fetch_options_free(fetch);
    CHECK(nrt_sys_trace_stop() == NRT_SUCCESS);
  }
  /* Asynchronous requests (run when scheduled). */
  {
    nrta_error_tracker_t *tracker = NULL;
    nrta_seq_t seq = 0, last = 0;
    const nrta_error_t *errors = NULL;
    size_t nerrors = 1;
    bool done = false;
    CHECK(nrta_error_tracker_create(0, &tracker) == NRT_SUCCESS);
    CHECK(nrta_execute_schedule(model, in, out, 0, tracker, &seq) == NRT_SUCCESS);
    CHECK(nrta_is_completed(seq, &done) == NRT_SUCCESS && done);
    CHECK(nrta_get_sequence(0, NRTA_XU_COMPUTE, 0, &last) == NRT_SUCCESS && last == seq);
    CHECK(nrta_error_tracker_get_list(tracker, &errors, &nerrors) == NRT_SUCCESS && nerrors == 0);
    nrta_error_tracker_destroy(tracker);
  }
  /* Batched reads and writes: checked whole before any byte moves. */
  {
    float head[4] = {-1, -2, -3, -4}, tail[2] = {0, 0}, got[4] = {0, 0, 0, 0};
    nrt_tensor_batch_op_t wops[2], rops[2];
    nrt_tensor_batch_t wb, rb;
    wops[0].offset = 0;
    wops[0].size = sizeof head;
    wops[0].buffer = head;
    wops[1].offset = sizeof xv - sizeof tail;
    wops[1].size = sizeof tail;
    wops[1].buffer = tail;
    wb.tensor = x;
    wb.ops = wops;
    wb.num_ops = 2;
    CHECK(nrt_tensor_write_batch(&wb, 1, false) == NRT_SUCCESS);
    rops[0].offset = 0;
    rops[0].size = sizeof got;
    rops[0].buffer = got;
    rops[1] = rops[0];
    rops[1].offset = sizeof xv; /* past the end: the whole batch is refused */
    rb.tensor = x;
    rb.ops = rops;
    rb.num_ops = 2;
    CHECK(nrt_tensor_read_batch(&rb, 1, true) == NRT_INVALID);
    CHECK(got[0] == 0.0f);
    rb.num_ops = 1;
    CHECK(nrt_tensor_read_batch(&rb, 1, false) == NRT_SUCCESS);
    CHECK(got[0] == -1.0f && got[3] == -4.0f);
    CHECK(nrt_tensor_write(x, xv, 0, sizeof xv) == NRT_SUCCESS); /* as it was */
  }

  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
  nrt_tensor_free(&x);
  nrt_tensor_free(&y);
  nrt_tensor_free(&z);
  CHECK(z == NULL);
  CHECK(nrt_unload(model) == NRT_SUCCESS);
  CHECK(nrt_unload(model) == NRT_INVALID_HANDLE);
  nrt_close();
  free(neff);
  if (failures) {
    fprintf(stderr, "c_api_smoke: %d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_smoke: OK\n");
  return 0;
}
