/* nrt-exec-bench: the host cost of nrt_execute as a C application sees it.
 *
 *   nrt-exec-bench MODEL.neff [--iterations N] [--load-repeats N]
 *
 * Loads the NEFF through the public API (printing nrt_load's median time),
 * binds a zero-filled tensor to every model input and output, executes it N
 * times (default 100000) after min(N, 1000) warm-up calls, and prints the
 * minimum, median, 99th and 99.9th percentiles and maximum of one nrt_execute in
 * microseconds. Exit status: 0, or 2 with a message for bad arguments and 1
 * for a runtime error. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nrt/nrt.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_ext.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double percentile(const double *sorted, size_t n, double q) {
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return sorted[i < n ? i : n - 1];
}

static int parse_count(const char *flag, const char *text, long *value) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || !end || *end || v < 1 || v > 100000000) {
    fprintf(stderr, "nrt-exec-bench: %s takes a count from 1 to 100000000, not '%s'\n", flag, text);
    return 0;
  }
  *value = v;
  return 1;
}

static int fail(const char *what) {
  fprintf(stderr, "nrt-exec-bench: %s: %s\n", what, nrt_get_last_error_message());
  return 1;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  long iterations = 100000, load_repeats = 20;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
      if (!parse_count("--iterations", argv[++i], &iterations)) return 2;
    } else if (!strcmp(argv[i], "--load-repeats") && i + 1 < argc) {
      if (!parse_count("--load-repeats", argv[++i], &load_repeats)) return 2;
    } else if (argv[i][0] == '-' || path) {
      fprintf(stderr, "usage: nrt-exec-bench MODEL.neff [--iterations N] [--load-repeats N]\n");
      return 2;
    } else {
      path = argv[i];
    }
  }
  if (!path) {
    fprintf(stderr, "usage: nrt-exec-bench MODEL.neff [--iterations N] [--load-repeats N]\n");
    return 2;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "nrt-exec-bench: cannot open %s: %s\n", path, strerror(errno));
    return 2;
  }
  size_t cap = 1 << 16, size = 0, got;
  char *neff = malloc(cap);
  while (neff && (got = fread(neff + size, 1, cap - size, f)) > 0) {
    size += got;
    if (size == cap) neff = realloc(neff, cap *= 2);
  }
  fclose(f);
  if (!neff) {
    fprintf(stderr, "nrt-exec-bench: out of memory reading %s\n", path);
    return 1;
  }
  if (nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_SUCCESS) return fail("nrt_init");

  double *load_us = malloc(sizeof(double) * (size_t)load_repeats);
  nrt_model_t *model = NULL;
  for (long r = 0; r < load_repeats; ++r) {
    double t = now_us();
    if (nrt_load(neff, size, -1, -1, &model) != NRT_SUCCESS) return fail("nrt_load");
    load_us[r] = now_us() - t;
    if (r + 1 < load_repeats) nrt_unload(model);
  }
  qsort(load_us, (size_t)load_repeats, sizeof(double), compare_doubles);
  printf("nrt_load   %zu bytes: median %.1f us (%ld loads)\n", size,
         percentile(load_us, (size_t)load_repeats, 0.5), load_repeats);

  nrt_tensor_info_array_t *info = NULL;
  nrt_tensor_set_t *sets[2] = {NULL, NULL};
  if (nrt_get_model_tensor_info(model, &info) != NRT_SUCCESS) return fail("nrt_get_model_tensor_info");
  if (nrt_allocate_tensor_set(&sets[0]) != NRT_SUCCESS || nrt_allocate_tensor_set(&sets[1]) != NRT_SUCCESS)
    return fail("nrt_allocate_tensor_set");
  for (uint64_t i = 0; i < info->tensor_count; ++i) {
    nrt_tensor_info_t *t = &info->tensor_array[i];
    nrt_tensor_t *tensor = NULL;
    if (nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, t->size, t->name, &tensor) != NRT_SUCCESS)
      return fail("nrt_tensor_allocate");
    int output = t->usage == NRT_TENSOR_USAGE_OUTPUT;
    if (nrt_add_tensor_to_tensor_set(sets[output], t->name, tensor) != NRT_SUCCESS)
      return fail("nrt_add_tensor_to_tensor_set");
  }
  for (long i = 0; i < (iterations < 1000 ? iterations : 1000); ++i)
    if (nrt_execute(model, sets[0], sets[1]) != NRT_SUCCESS) return fail("nrt_execute");
  double *us = malloc(sizeof(double) * (size_t)iterations);
  if (!us) return fail("malloc");
  for (long i = 0; i < iterations; ++i) {
    double t = now_us();
    NRT_STATUS s = nrt_execute(model, sets[0], sets[1]);
    us[i] = now_us() - t;
    if (s != NRT_SUCCESS) return fail("nrt_execute");
  }
  qsort(us, (size_t)iterations, sizeof(double), compare_doubles);
  printf("nrt_execute %ld calls: min %.2f us, median %.2f us, p99 %.2f us, p99.9 %.2f us, max %.1f us\n",
         iterations, us[0], percentile(us, (size_t)iterations, 0.5), percentile(us, (size_t)iterations, 0.99),
         percentile(us, (size_t)iterations, 0.999), us[iterations - 1]);
  nrt_free_model_tensor_info(info);
  nrt_unload(model);
  nrt_close();
  free(us);
  free(load_us);
  free(neff);
  return 0;
}
