#!/usr/bin/env python3
"""Host speed of the simulated NeuronCore: how long users wait on the CPU.

Every figure is measured here, in one process, side by side:

  kernels    nrt_execute of an -O2 NEFF (libnrt through ctypes, tensors
             already written) against PyTorch eager on the same inputs, and
             against the memory-bandwidth roofline: the time a numpy copy
             takes to read and write as many bytes as the graph must
             (inputs + outputs). Samples of the three alternate, so that
             the copy runs under the same load as the kernel (on a shared
             host the copy bandwidth alone varies by a third from one
             minute to the next). nrt and eager figures are medians; the
             roofline (the goal's ratio, nrt/roofl) is the fastest copy, the
             peak bandwidth; nrt/copy puts the median nrt time over the
             median copy, both under the same conditions.
  matmul     the same for a matmul, against OpenBLAS's sgemm with the same
             thread count (libopenblas through ctypes), as GFLOP/s; the two
             alternate in blocks of half the samples, half a second apart.
  nrt_load   a small NEFF (1x128 graph) and a large one (constants), in ms
             and GB/s of NEFF size.
  overhead   nrt_execute of a 1x128 graph from C (build/bin/nrt-exec-bench):
             median, 99.9th percentile and maximum.

Goals (issue 14) are printed beside each row. Threads: NEURONCC_RT_THREADS
(default: the machine's cores) for libnrt, the same count for OpenBLAS.

Usage: benchmarks/host_bench.py [--repeats N] [--only kernels,matmul,load,overhead]
"""
import argparse
import ctypes
import ctypes.util
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "python"))
import neuroncc  # noqa: E402
from neuroncc import nrt, toolchain  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def rms_norm_naive(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


KERNELS = [
    # name, function, makes the inputs from (rows, cols, dtype)
    ("rmsnorm (naive)", rms_norm_naive, lambda r, c, dt: (torch.randn(r, c, dtype=dt), torch.rand(c, dtype=dt) + 0.5)),
    ("softmax", lambda x: torch.softmax(x, -1), lambda r, c, dt: (torch.randn(r, c, dtype=dt),)),
    ("gelu (tanh)", lambda x: F.gelu(x, approximate="tanh"), lambda r, c, dt: (torch.randn(r, c, dtype=dt),)),
    ("silu", F.silu, lambda r, c, dt: (torch.randn(r, c, dtype=dt),)),
    ("layer_norm", layer_norm,
     lambda r, c, dt: (torch.randn(r, c, dtype=dt), torch.ones(c, dtype=dt), torch.zeros(c, dtype=dt))),
]


def copy_bandwidth():
    """Bytes per second of a large numpy copy (read + write counted)."""
    src = np.ones(64 << 20 >> 2, dtype=np.float32)
    dst = np.empty_like(src)
    samples = []
    for _ in range(7):
        t = time.perf_counter()
        np.copyto(dst, src)
        samples.append(time.perf_counter() - t)
    return 2 * src.nbytes / min(samples)


def copier(moved):
    """A numpy copy that reads and writes `moved` bytes in all."""
    src = np.ones(max(1, moved // 8), dtype=np.float32)
    dst = np.empty_like(src)
    return lambda: np.copyto(dst, src)


def alternate(fns, repeats, settle, block=1, samples_out=None):
    """Median seconds of each fn, after one warm-up each (every sample in
    `samples_out`, when a list is given). Samples are taken
    in turns of `block` calls per fn, with `settle` seconds before each turn:
    OpenMP's and OpenBLAS's idle threads keep spinning for a while after a
    call and would otherwise take the cores from whichever side runs next
    (OpenBLAS's for longer: its turns are blocks)."""
    for fn in fns:
        fn()
    samples = [[] for _ in fns]
    while len(samples[0]) < repeats:
        for s, fn in zip(samples, fns):
            time.sleep(settle)
            for _ in range(block):
                t = time.perf_counter()
                fn()
                s.append(time.perf_counter() - t)
    if samples_out is not None:
        samples_out.extend(samples)
    return [statistics.median(s) for s in samples]


def nrt_call(compiled, inputs):
    """Writes the inputs once; returns a callable that only runs nrt_execute."""
    for (i, name, device_dtype, tensor, size), x in zip(compiled._inputs, inputs):
        x = x.to(device_dtype).contiguous()
        compiled._rt.write(tensor, x.data_ptr(), size)
    return lambda: compiled._rt.execute(compiled._model, compiled._in_set, compiled._out_set)


def kernels(args):
    rows, cols = args.rows, args.cols
    print("\n== elementwise and reduction kernels, %dx%d (goal: <= 3x roofline, faster than eager) ==" %
          (rows, cols))
    header = "%-18s %5s %10s %10s %10s %9s %9s %9s" % ("kernel", "dtype", "nrt ms", "eager ms", "roofl ms",
                                                        "nrt/eager", "nrt/roofl", "nrt/copy")
    print(header)
    print("-" * len(header))
    for name, fn, make in KERNELS:
        for dt, dname in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            torch.manual_seed(0)
            inputs = make(rows, cols, dt)
            compiled = neuroncc.trace(fn, inputs, opt=2)
            run = nrt_call(compiled, inputs)
            out = fn(*inputs)
            moved = sum(x.numel() * x.element_size() for x in inputs) + out.numel() * out.element_size()
            samples = []
            nrt_s, eager_s, copy_s = alternate([run, lambda: fn(*inputs), copier(moved)], args.repeats, 0.05,
                                               samples_out=samples)
            roof = min(samples[2])
            print("%-18s %5s %10.2f %10.2f %10.2f %9.2f %9.2f %9.2f" % (name, dname, nrt_s * 1e3, eager_s * 1e3,
                                                                        roof * 1e3, nrt_s / eager_s, nrt_s / roof,
                                                                        nrt_s / copy_s))
            sys.stdout.flush()
            del compiled


def openblas(threads):
    paths = sorted(glob.glob("/usr/lib/*/openblas-pthread/libopenblas.so.0")) + [ctypes.util.find_library("openblas")]
    for p in paths:
        if p:
            try:
                lib = ctypes.CDLL(p)
                lib.openblas_set_num_threads(threads)
                return lib
            except OSError:
                continue
    return None


def matmul(args, threads):
    n = args.matmul
    print("\n== matmul %d^3 (goal: >= 0.5x OpenBLAS sgemm, %d threads) ==" % (n, threads))
    blas = openblas(threads)
    header = "%-6s %10s %10s %12s %12s %10s" % ("dtype", "nrt ms", "nrt GF/s", "openblas ms", "openblas GF/s",
                                                "nrt/blas")
    print(header)
    print("-" * len(header))
    flops = 2.0 * n ** 3
    torch.manual_seed(0)
    for dt, dname in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
        compiled = neuroncc.trace(lambda x, y: x @ y, (a, b), opt=2)
        run = nrt_call(compiled, (a, b))
        fns = [run]
        if blas is not None:
            af, bf = a.float().contiguous(), b.float().contiguous()
            cf = torch.empty(n, n)
            pa, pb, pc = (ctypes.c_void_p(t.data_ptr()) for t in (af, bf, cf))
            # cblas_sgemm(RowMajor=101, NoTrans=111, NoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
            sgemm = blas.cblas_sgemm
            sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                                   ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
            fns.append(lambda: sgemm(101, 111, 111, n, n, n, 1.0, pa, n, pb, n, 0.0, pc, n))
        times = alternate(fns, args.repeats, 0.5, block=max(1, args.repeats // 2))
        nrt_s = times[0]
        if blas is not None:
            blas_s = times[1]
            print("%-6s %10.2f %10.1f %12.2f %12.1f %10.2f" % (dname, nrt_s * 1e3, flops / nrt_s / 1e9, blas_s * 1e3,
                                                             flops / blas_s / 1e9, blas_s / nrt_s))
        else:
            print("%-6s %10.2f %10.1f %12s %12s %10s" % (dname, nrt_s * 1e3, flops / nrt_s / 1e9, "-", "-",
                                                       "(no libopenblas)"))
        sys.stdout.flush()
        del compiled


def compile_neff(fn, inputs, work, name):
    compiled = neuroncc.trace(fn, inputs, opt=2, cache_dir=None)
    path = os.path.join(work, name + ".neff")
    with open(path, "wb") as f:
        f.write(compiled.neff)
    return compiled.neff, path


def load(args, work):
    print("\n== nrt_load (goals: <= 0.2 ms small, >= 1 GB/s large) ==")
    rt = nrt.runtime()
    small, _ = compile_neff(lambda x: torch.relu(x) * 2, (torch.randn(1, 128),), work, "small")
    lin = torch.nn.Linear(args.large_features, args.large_features)
    with torch.no_grad():
        large, _ = compile_neff(lin, (torch.randn(16, args.large_features),), work, "large")
    header = "%-28s %12s %10s %10s" % ("neff", "bytes", "load ms", "GB/s")
    print(header)
    print("-" * len(header))
    for name, neff in (("small (relu 1x128)", small), ("large (linear %d^2 f32)" % args.large_features, large)):
        samples = []
        for _ in range(max(args.repeats, 5)):
            t = time.perf_counter()
            model = rt.load(neff)
            samples.append(time.perf_counter() - t)
            rt.unload(model)
        s = statistics.median(samples)
        print("%-28s %12d %10.3f %10.2f" % (name, len(neff), s * 1e3, len(neff) / s / 1e9))


def overhead(args, work):
    print("\n== nrt_execute overhead from C, 1x128 graph (goal: <= 1 us median, no ms stalls at p99.9) ==")
    tool = os.path.join(toolchain.BUILD, "bin", "nrt-exec-bench")
    if not os.path.exists(tool):
        print("(missing %s: build the project first)" % tool)
        return
    _, path = compile_neff(lambda x: x + 1, (torch.randn(1, 128),), work, "tiny")
    out = subprocess.run([tool, path, "--iterations", str(args.iterations)], capture_output=True, text=True)
    sys.stdout.write(out.stdout + out.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--matmul", type=int, default=1024)
    parser.add_argument("--large-features", type=int, default=4096)
    parser.add_argument("--iterations", type=int, default=200000)
    parser.add_argument("--only", default="kernels,matmul,load,overhead")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    threads = int(os.environ.get("NEURONCC_RT_THREADS", os.cpu_count() or 1))
    torch.set_num_threads(threads)
    bandwidth = copy_bandwidth()
    print("host: %d cores, copy bandwidth %.1f GB/s now (numpy, read + write), torch %s with %d threads" %
          (os.cpu_count(), bandwidth / 1e9, torch.__version__, torch.get_num_threads()))
    work = tempfile.mkdtemp(prefix="neuroncc-host-bench-")
    if "kernels" in parts:
        kernels(args)
    if "matmul" in parts:
        matmul(args, threads)
    if "load" in parts:
        load(args, work)
    if "overhead" in parts:
        overhead(args, work)


if __name__ == "__main__":
    main()
