#!/usr/bin/env python3
"""Copy kernels (broadcasts, permutes, pixel shuffles) against their HBM bound.

Each graph below is exported (bf16, weights as constants), compiled at -O2 for
trn1 and profiled timing-only, as benchmarks/roofline_bench.py measures its
rows; the script prints the kernels, T_exec (us, without the fixed
per-dispatch cost) and the roofline bound B (the graph's HBM bytes over the
core's bandwidth). `--permutes SEED,N` adds N random permutes (ranks 2 to 6,
a fifth of them of a sliced input), the same for a seed on every run.
`--reference DIR` measures every graph with that build's tools too (a build
directory of an earlier commit, say) and prints the ratio. Nothing here
asserts on time.

  /usr/bin/python3 benchmarks/copy_kernels_bench.py --permutes 1,80 --reference /tmp/old-build
"""
import argparse
from math import prod
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools", "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def heads(k, n):
    b, h, s, d = k.shape
    return k[:, :, None].expand(b, h, n, s, d).reshape(b, h * n, s, d)


def nearest(x, factor=2):
    return F.interpolate(x, scale_factor=factor, mode="nearest")


# name: (function, input shapes)
GRAPHS = {
    "upsample x2 [4,128,32,32]": (nearest, [(4, 128, 32, 32)]),
    "upsample x2 [1,64,128,128]": (nearest, [(1, 64, 128, 128)]),
    "upsample x2 3-d [1,32,16,16,16]": (nearest, [(1, 32, 16, 16, 16)]),
    "upsample x2 1-d [8,256,512]": (nearest, [(8, 256, 512)]),
    "upsample x2 + skip [4,128,32,32]": (lambda x, y: nearest(x) + y, [(4, 128, 32, 32), (4, 128, 64, 64)]),
    "kv heads x4 [1,8,2048,128]": (lambda k: heads(k, 4), [(1, 8, 2048, 128)]),
    "repeat_interleave(2, 1) [64,128,64]": (lambda x: x.repeat_interleave(2, dim=1), [(64, 128, 64)]),
    "repeat(1, 2, 2) [64,32,32]": (lambda x: x.repeat(1, 2, 2), [(64, 32, 32)]),
    "im2col 16x16 [8,3,224,224]": (lambda x: x.reshape(8, 3, 14, 16, 14, 16).permute(0, 2, 4, 1, 3, 5)
                                   .reshape(1568, 768), [(8, 3, 224, 224)]),
    "window partition [8,56,56,96]": (lambda x: x.view(8, 8, 7, 8, 7, 96).permute(0, 1, 3, 2, 4, 5)
                                      .reshape(-1, 49, 96), [(8, 56, 56, 96)]),
    "window merge [512,49,96]": (lambda x: x.view(8, 8, 8, 7, 7, 96).permute(0, 1, 3, 2, 4, 5)
                                 .reshape(8, 56, 56, 96), [(512, 49, 96)]),
    "head merge [4,12,512,64]": (lambda x: x.transpose(1, 2).reshape(4, 512, 768), [(4, 12, 512, 64)]),
    "head split [4,512,768]": (lambda x: x.view(4, 512, 12, 64).transpose(1, 2).contiguous(), [(4, 512, 768)]),
    "pixel_shuffle 2 [8,256,64,64]": (lambda x: F.pixel_shuffle(x, 2), [(8, 256, 64, 64)]),
    "pixel_unshuffle 2 [8,64,128,128]": (lambda x: F.pixel_unshuffle(x, 2), [(8, 64, 128, 128)]),
    "NCHW to NHWC [8,64,56,56]": (lambda x: x.permute(0, 2, 3, 1).contiguous(), [(8, 64, 56, 56)]),
}


def random_shape(rng, max_rank, sizes, max_elements):
    """A shape of rank 2 to max_rank drawn from `sizes`, its largest dims halved while over max_elements."""
    rank = rng.randint(2, max_rank)
    shape = [rng.choice(sizes) for _ in range(rank)]
    while prod(shape) > max_elements:
        shape[shape.index(max(shape))] //= 2
    return shape


def random_permutes(seed, n):
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        shape = random_shape(rng, 6, [1, 2, 3, 4, 5, 7, 8, 12, 16, 32], 2_000_000)
        rank = len(shape)
        perm = list(range(rank))
        rng.shuffle(perm)
        sliced = rng.random() < 0.2
        if sliced:
            shape[-1] += 1

        def f(x, perm=tuple(perm), sliced=sliced):
            if sliced:
                x = x[..., 1:]
            return x.permute(*perm).contiguous()
        out["permute %d %s %s%s" % (i, tuple(shape), tuple(perm), " sliced" if sliced else "")] = (f, [tuple(shape)])
    return out


def measure_all(graphs, build, workdir, script):
    """T_exec and bound per graph, each measured in a child process (`script --one NAME`) with `build`'s tools."""
    env = dict(os.environ, NEURONCC_BUILD_DIR=build)
    env["LD_LIBRARY_PATH"] = os.path.join(build, "lib") + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    results = {}
    for name in graphs:
        proc = subprocess.run([sys.executable, script, "--one", name, "--workdir", workdir] + sys.argv[1:],
                              env=env, capture_output=True, text=True)
        fields = proc.stdout.strip().split()
        results[name] = tuple(float(v) for v in fields) if len(fields) == 3 else None
    return results


def measure_one(name, graphs, workdir):
    import roofline_bench as rb
    from neuroncc import export as ex
    fn, shapes = graphs[name]
    gen = torch.Generator().manual_seed(0)
    inputs = tuple(torch.randn(*s, generator=gen).to(torch.bfloat16) for s in shapes)
    r = rb.measure("graph", lambda path: ex.export_aten(fn, inputs, path, params="constants"), "trn1", workdir)
    if "error" in r:
        return
    print(r["kernels"], r["exec_us"], r["bound_us"])


def run(doc, graphs, script, random_option, random_graphs):
    """The command line of a bench of named graphs (`graphs`) and seeded random ones
    (`random_option SEED,N`: random_graphs(seed, n)), measured by `script`."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(random_option, dest="random", help="SEED,N: add N random graphs")
    ap.add_argument("--reference", help="a build directory to measure with as well")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args, _ = ap.parse_known_args()
    graphs = dict(graphs)
    if args.random:
        seed, n = (int(v) for v in args.random.split(","))
        graphs.update(random_graphs(seed, n))
    if args.one:
        measure_one(args.one, graphs, args.workdir)
        return
    build = os.environ.get("NEURONCC_BUILD_DIR", os.path.join(HERE, "..", "build"))
    workdir = tempfile.mkdtemp(prefix="neuroncc-bench-")
    now = measure_all(graphs, build, workdir, script)
    ref = measure_all(graphs, args.reference, workdir, script) if args.reference else {}
    print("%-52s %7s %10s %9s %10s %7s" % ("graph", "kernels", "T_exec us", "bound us", "reference", "ratio"))
    faster = slower = 0
    for name in graphs:
        r, o = now[name], ref.get(name)
        if r is None:
            print("%-52s failed" % name)
            continue
        line = "%-52s %7d %10.1f %9.1f" % (name[:52], r[0], r[1], r[2])
        if o:
            line += " %10.1f %7.2f" % (o[1], r[1] / o[1])
            faster += r[1] < o[1] * 0.999
            slower += r[1] > o[1] * 1.001
        print(line, flush=True)
    if ref:
        print("against the reference: %d faster, %d slower, %d unchanged" %
              (faster, slower, len(graphs) - faster - slower))


if __name__ == "__main__":
    run(__doc__, GRAPHS, __file__, "--permutes", random_permutes)
