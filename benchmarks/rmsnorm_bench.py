#!/usr/bin/env python3
"""RMSNorm benchmark: fusion's effect on modeled device time, the fused
kernel against its roofline, and host execution time next to PyTorch eager.

For each shape it prints:
  - kernel count at -O0 and -O2 (naive six-op graph),
  - modeled device time at each and the ratio -O0 / -O2,
  - the -O2 kernel's modeled time over its roofline, where
        roofline = HBM bytes it moves / modeled HBM bandwidth + launch overhead,
  - host wall time of executing the -O2 NEFF through the C API (libnrt,
    via ctypes, in this process), PyTorch eager naive RMSNorm and
    F.layer_norm on the same shape, all measured here as medians.

Usage: benchmarks/rmsnorm_bench.py [--repeats N] [--shapes 4x512:bf16,...]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "python"))
from neuroncc import toolchain  # noqa: E402
from neuroncc.nrt import NeffRunner, median_time  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# trn1 HBM share of one NeuronCore: 820 GB/s per chip, 2 cores per chip (AWS
# trn1 documentation); the same figure the runtime's device model uses
# (runtime/neff/device_model.cc, hbm_gbps_per_core).
HBM_BYTES_PER_SECOND = 820e9 / 2

DEFAULT_SHAPES = "4x512:bf16,4096x4096:f32,1x128:bf16,300x1000:f32"


def device_bytes(array, dtype):
    if dtype == "bf16":
        return (toolchain.bf16_round(array).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return np.ascontiguousarray(array, dtype=np.float32).tobytes()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shapes", default=DEFAULT_SHAPES)
    args = parser.parse_args()
    runner = NeffRunner(os.path.join(toolchain.BUILD, "lib", "libnrt.so"))
    work = tempfile.mkdtemp(prefix="neuroncc-bench-")
    header = ("%-16s %6s %6s %12s %12s %8s %10s %12s %12s %12s" %
              ("shape", "k -O0", "k -O2", "dev -O0 us", "dev -O2 us", "O0/O2", "O2/roofl",
               "host nrt ms", "eager ms", "layer_norm ms"))
    print(header)
    print("-" * len(header))
    for spec in args.shapes.split(","):
        dims, dtype = spec.split(":")
        rows, cols = (int(v) for v in dims.split("x"))
        x, w = toolchain.fixed_inputs(rows, cols, dtype)
        graph = os.path.join(work, "naive_%s_%s.mlir" % (dims, dtype))
        with open(graph, "w") as f:
            f.write(toolchain.rmsnorm_graph("naive", rows, cols, dtype))
        summaries = {}
        for opt in (0, 2):
            neff = os.path.join(work, "naive_%s_%s_O%d.neff" % (dims, dtype, opt))
            toolchain.compile_graph(graph, neff, opt=opt)
            profile = os.path.join(work, "profile_%s_%s_O%d" % (dims, dtype, opt))
            toolchain.run_neff(neff, {"x": x, "weight": w}, os.path.join(work, "out"), profile)
            summaries[opt] = toolchain.profile_summary(profile)
        s0, s2 = summaries[0], summaries[2]
        overhead = s2["launch_overhead_time"] / max(1, s2["dispatch_count"])
        roofline = (s2["hbm_read_bytes"] + s2["hbm_write_bytes"]) / HBM_BYTES_PER_SECOND + overhead
        elem = 2 if dtype == "bf16" else 4
        host = runner.time_execute(
            os.path.join(work, "naive_%s_%s_O2.neff" % (dims, dtype)),
            {"x": device_bytes(x, dtype), "weight": device_bytes(w, dtype)},
            {"output0": rows * cols * elem}, args.repeats)
        tdtype = torch.bfloat16 if dtype == "bf16" else torch.float32
        xt, wt = torch.from_numpy(x).to(tdtype), torch.from_numpy(w).to(tdtype)
        eps = torch.tensor(1e-6)
        eager = median_time(lambda: xt * torch.rsqrt((xt * xt).mean(-1, keepdim=True) + eps) * wt, args.repeats)
        layer_norm = median_time(lambda: F.layer_norm(xt, (cols,), wt, None, 1e-6), args.repeats)
        print("%-16s %6d %6d %12.1f %12.1f %8.2f %10.3f %12.3f %12.3f %12.3f" % (
            "%s %s" % (dims, dtype), s0["kernel_count"], s2["kernel_count"], s0["total_time"] * 1e6,
            s2["total_time"] * 1e6, s0["total_time"] / s2["total_time"], s2["total_time"] / roofline,
            host * 1e3, eager * 1e3, layer_norm * 1e3))
    print("\nroofline = HBM bytes moved / %.0f GB/s + the launch overhead per dispatch" % (HBM_BYTES_PER_SECOND / 1e9))
    print("host times: medians of %d runs after one warm-up, this process" % args.repeats)


if __name__ == "__main__":
    main()
