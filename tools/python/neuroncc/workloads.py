"""Production-size workloads: bf16 graphs at the sizes real models run at,
exported with fake tracing and the weights as graph inputs, so that nothing of
model size is allocated, computed or embedded in the graph or the NEFF.

  matmul            a @ b, 4096x4096 by 4096x4096 (aten::mm).
  swiglu_ffn        (silu(x @ w_gate) * (x @ w_up)) @ w_down on 2048 tokens,
                    dim 4096, hidden 11008 (weights stored (in, out)).
  rmsnorm           models.NaiveRMSNorm (six ATen ops) on 8192x4096.
  softmax           softmax over the last dim of 32x2048x2048 (aten::_softmax).
  llama7b_s2048     models.LlamaDecoderLayer at LLaMA-2-7B sizes (dim 4096,
                    32 heads, FFN 11008, rotary, causal mask), batch 1, prefill
                    of 2048 tokens; max_seq 2048.
  llama7b_s16       the same layer (max_seq 2048) on 16 tokens.
  gpt2_medium       models.GPT2Block at GPT-2-medium sizes (dim 1024, 16 heads)
                    on 1x1024 tokens.

Every workload's module parameters or function weights are graph inputs. The
LLaMA layer is exported with params="weights": its parameters are inputs and
its buffers (rotary cos/sin tables, 2048x128 each, and the 2048x2048 boolean
causal mask, 5 MiB together) stay constants, as a deployed layer would hold
them. The other workloads have no buffers.

Python API
----------
    from neuroncc import workloads
    w = workloads.WORKLOADS["llama7b_s2048"]
    fn, inputs = w.build()            # device="meta": no storage at all
    exp = w.export("layer.pb")        # fake tracing, returns AtenExport
    fn, inputs = w.build(device="cpu", dim=64, heads=4, ffn=128, seq=8)  # small, real values

`build(device="meta", **sizes)` returns (module or function, example inputs).
With device="meta" the module's parameters and the inputs are meta tensors
(buffers are real, computed on the CPU); device="cpu" gives real values
(random, from a fixed seed), for small sizes: the keyword sizes (listed in
`w.sizes` with their production values) scale a workload down, which the tests
use to compare fake and real tracing of the same code.

Command line
------------
    python3 -m neuroncc.workloads list
    python3 -m neuroncc.workloads export NAME -o NAME.pb [--size KEY=VALUE ...]
    python3 -m neuroncc.workloads measure [NAME ...] [--dir DIR] [--opt 2]
        [--timeout 180] [--max-rss-mb 8192] [--mlir-timing] [--json FILE]

`measure` exports every workload (in this process, timed), compiles it with
`neuron-cc compile -O2` in a child process (wall time; peak RSS as GNU time's
%M; killed past --timeout seconds or --max-rss-mb MiB of RSS), and reads
kernel and instruction counts and the HBM arena from `neuron-packager info`.
NEURONCC_BUILD_DIR selects the tools (default build/).
"""
import argparse
import collections
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from . import export as ex
from . import models

BF16 = torch.bfloat16


def _tensor(shape, device, gen, weight=False):
    """A bf16 meta tensor, or standard normal values (a weight (in, out): / sqrt(in))."""
    if device == "meta":
        return torch.empty(shape, dtype=BF16, device="meta")
    return (torch.randn(shape, generator=gen) / (math.sqrt(shape[0]) if weight else 1.0)).to(BF16)


def _seeded(device):
    return torch.Generator().manual_seed(0) if device != "meta" else None


# ---------------------------------------------------------------------------
# Builders: (device, **sizes) -> (module or function, example inputs)

def matmul(a, b):
    return torch.matmul(a, b)


def swiglu_ffn(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down


def softmax(x):
    return F.softmax(x, dim=-1)


def _build_matmul(device, m=4096, k=4096, n=4096):
    gen = _seeded(device)
    return matmul, (_tensor((m, k), device, gen), _tensor((k, n), device, gen, weight=True))


def _build_swiglu(device, tokens=2048, dim=4096, hidden=11008):
    gen = _seeded(device)
    return swiglu_ffn, (_tensor((tokens, dim), device, gen), _tensor((dim, hidden), device, gen, weight=True),
                        _tensor((dim, hidden), device, gen, weight=True),
                        _tensor((hidden, dim), device, gen, weight=True))


def _build_softmax(device, batch=32, rows=2048, cols=2048):
    gen = _seeded(device)
    return softmax, (_tensor((batch, rows, cols), device, gen),)


def _module(make, device, seed):
    if device == "meta":
        return make("meta").eval().to(BF16)
    torch.manual_seed(seed)
    return models._randomize(make(None), seed).eval().to(BF16)


def _build_rmsnorm(device, rows=8192, dim=4096):
    module = _module(lambda d: models.NaiveRMSNorm(dim, device=d), device, 6)
    return module, (_tensor((rows, dim), device, _seeded(device)),)


def _build_llama(device, seq=2048, dim=4096, heads=32, ffn=11008, max_seq=2048, batch=1):
    module = _module(lambda d: models.LlamaDecoderLayer(hidden=dim, heads=heads, intermediate=ffn,
                                                        max_seq=max_seq, device=d), device, 1)
    return module, (_tensor((batch, seq, dim), device, _seeded(device)),)


def _build_gpt2(device, seq=1024, dim=1024, heads=16, batch=1):
    module = _module(lambda d: models.GPT2Block(hidden=dim, heads=heads, device=d), device, 2)
    return module, (_tensor((batch, seq, dim), device, _seeded(device)),)


class Workload:
    def __init__(self, name, builder, input_names, params, description, **sizes):
        self.name = name
        self.builder = builder
        self.input_names = input_names  # user inputs; module state is named by the exporter
        self.params = params            # export_aten's params= ("inputs" or "weights")
        self.description = description
        self.sizes = sizes              # the production sizes (builder keyword arguments)

    def build(self, device="meta", **sizes):
        """(module or function, example inputs); see the module docstring."""
        unknown = set(sizes) - set(self.sizes)
        if unknown:
            raise ValueError("%s: unknown sizes %s (known: %s)" % (self.name, sorted(unknown), sorted(self.sizes)))
        return self.builder(device, **dict(self.sizes, **sizes))

    def export(self, path=None, device="meta", tracing_mode="fake", **sizes):
        fn, inputs = self.build(device, **sizes)
        return ex.export_aten(fn, inputs, path, params=self.params, input_names=self.input_names,
                              tracing_mode=tracing_mode)


WORKLOADS = collections.OrderedDict((w.name, w) for w in [
    Workload("matmul", _build_matmul, ["a", "b"], "inputs", "matmul 4096x4096x4096",
             m=4096, k=4096, n=4096),
    Workload("swiglu_ffn", _build_swiglu, ["x", "w_gate", "w_up", "w_down"], "inputs",
             "SwiGLU FFN, 2048 tokens, dim 4096, hidden 11008", tokens=2048, dim=4096, hidden=11008),
    Workload("rmsnorm", _build_rmsnorm, ["x"], "inputs", "naive RMSNorm (six ops), 8192x4096",
             rows=8192, dim=4096),
    Workload("softmax", _build_softmax, ["x"], "inputs", "softmax over the last dim of 32x2048x2048",
             batch=32, rows=2048, cols=2048),
    Workload("llama7b_s2048", _build_llama, ["x"], "weights",
             "LLaMA-2-7B decoder layer, batch 1, seq 2048 (prefill)",
             seq=2048, dim=4096, heads=32, ffn=11008, max_seq=2048, batch=1),
    Workload("llama7b_s16", _build_llama, ["x"], "weights", "LLaMA-2-7B decoder layer, batch 1, seq 16",
             seq=16, dim=4096, heads=32, ffn=11008, max_seq=2048, batch=1),
    Workload("gpt2_medium", _build_gpt2, ["x"], "inputs", "GPT-2-medium block, batch 1, seq 1024",
             seq=1024, dim=1024, heads=16, batch=1),
])


# ---------------------------------------------------------------------------
# Measuring

def _tool(name):
    from . import toolchain
    return toolchain.tool(name)


def _rss_mib(pid):
    """VmRSS of `pid` and its descendants, MiB (0 for processes already gone)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/status" % p) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024.0
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            pass
    return total


def run_limited(cmd, timeout_s, max_rss_mb, stdout=None, stderr=None):
    """Runs cmd; returns (returncode, wall seconds, peak RSS MiB, killed reason or None, CPU seconds or None).

    The peak RSS is GNU time's %M (the command's own ru_maxrss: measured from
    a small parent, since a child forked from this Python process would count
    the interpreter's pages in its maximum); without /usr/bin/time, the
    largest RSS seen by polling. The RSS is polled every 0.1 s either way and
    the command is killed once past max_rss_mb or timeout_s. CPU seconds
    (user + system, GNU time's %U + %S) say less about other load on the
    machine than the wall time does."""
    import tempfile
    gnu_time = os.path.exists("/usr/bin/time")
    fd, time_file = tempfile.mkstemp(prefix="neuroncc-time-")
    os.close(fd)
    full = (["/usr/bin/time", "-f", "%M %U %S", "-o", time_file] if gnu_time else []) + list(cmd)
    start = time.time()
    proc = subprocess.Popen(full, stdout=stdout, stderr=stderr, start_new_session=True)
    killed, polled = None, 0.0
    try:
        while proc.poll() is None:
            rss = _rss_mib(proc.pid)
            polled = max(polled, rss)
            if killed is None and rss > max_rss_mb:
                killed = "RSS %.0f MiB > %d MiB" % (rss, max_rss_mb)
            elif killed is None and time.time() - start > timeout_s:
                killed = "wall time > %d s" % timeout_s
            if killed:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.1)
        wall = time.time() - start
        peak, cpu = polled, None
        if gnu_time and not killed:
            with open(time_file) as f:
                last = f.read().strip().split("\n")[-1].split()  # after any "Command exited with..." line
            if len(last) == 3:
                peak, cpu = int(last[0]) / 1024.0, float(last[1]) + float(last[2])
    finally:
        os.unlink(time_file)
    return proc.returncode, wall, peak, killed, cpu


def packager_info(neff):
    """Kernel count, instruction count, constant segments and HBM arena from `neuron-packager info`."""
    out = subprocess.run([_tool("neuron-packager"), "info", neff], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True).stdout
    info = {}
    m = re.search(r"(\d+) kernels, (\d+) instructions, (\d+) tensors, HBM arena (\d+) bytes, "
                  r"(\d+) constant segments", out)
    if m:
        info.update(kernels=int(m.group(1)), instructions=int(m.group(2)), hbm_arena=int(m.group(4)),
                    constant_segments=int(m.group(5)))
    return info, out


def measure(names, directory, opt=2, timeout_s=180, max_rss_mb=8192, mlir_timing=False, log=print):
    os.makedirs(directory, exist_ok=True)
    rows = []
    for name in names:
        w = WORKLOADS[name]
        row = collections.OrderedDict(name=name)
        pb_path = os.path.join(directory, name + ".pb")
        start = time.time()
        exp = w.export(pb_path)
        row["export_s"] = round(time.time() - start, 3)
        row["pb_bytes"] = os.path.getsize(pb_path)
        row["nodes"] = len(exp.graph.nodes)
        row["constant_bytes"] = sum(len(c.data) for c in exp.graph.constants)
        neff = os.path.join(directory, name + ".neff")
        if os.path.exists(neff):
            os.unlink(neff)
        cmd = [_tool("neuron-cc"), "compile", pb_path, "--framework", "ATEN", "-O%d" % opt, "--output", neff]
        if mlir_timing:
            cmd.append("--mlir-timing")
        log_path = os.path.join(directory, name + ".compile.log")
        with open(log_path, "w") as f:
            rc, wall, rss, killed, cpu = run_limited(cmd, timeout_s, max_rss_mb, stdout=f,
                                                     stderr=subprocess.STDOUT)
        row.update(compile_rc=rc, compile_s=round(wall, 2), compile_cpu_s=cpu and round(cpu, 2),
                   peak_rss_mib=round(rss), killed=killed)
        with open(log_path) as f:
            text = f.read()
        row["status"] = "killed: " + killed if killed else ("ok" if rc == 0 and "PASS" in text else "failed")
        if row["status"] == "failed":
            errors = [line for line in text.splitlines() if "error" in line.lower()]
            row["error"] = (errors or text.strip().splitlines()[-1:] or [""])[0][:300]
        if rc == 0 and os.path.exists(neff):
            row["neff_bytes"] = os.path.getsize(neff)
            info, _ = packager_info(neff)
            row.update(info)
        rows.append(row)
        log(json.dumps(row))
    return rows


def format_table(rows):
    cols = [("name", "workload"), ("export_s", "export s"), ("pb_bytes", ".pb bytes"),
            ("constant_bytes", "const bytes"), ("nodes", "nodes"), ("compile_s", "compile s"), ("compile_cpu_s", "CPU s"),
            ("peak_rss_mib", "peak RSS MiB"), ("neff_bytes", "NEFF bytes"), ("kernels", "kernels"),
            ("instructions", "instructions"), ("status", "status")]
    lines = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(k, "-")) for k, _ in cols) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Command line

def _parse_sizes(items):
    sizes = {}
    for item in items:
        key, _, value = item.partition("=")
        sizes[key] = int(value)
    return sizes


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m neuroncc.workloads", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list")
    p = sub.add_parser("export")
    p.add_argument("name", choices=list(WORKLOADS))
    p.add_argument("-o", "--output", required=True, help="NAME.pb or NAME.pbtxt")
    p.add_argument("--size", action="append", default=[], metavar="KEY=VALUE", help="override a size")
    p = sub.add_parser("measure")
    p.add_argument("names", nargs="*", help="workloads (default: all)")
    p.add_argument("--dir", default="workloads-out")
    p.add_argument("--opt", type=int, default=2)
    p.add_argument("--timeout", type=int, default=180, help="seconds before a compile is killed")
    p.add_argument("--max-rss-mb", type=int, default=8192, help="RSS at which a compile is killed")
    p.add_argument("--mlir-timing", action="store_true", help="pass --mlir-timing (see DIR/NAME.compile.log)")
    p.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args(argv)

    if args.command == "list":
        for w in WORKLOADS.values():
            print("%-14s %-8s %s (%s)" % (w.name, w.params, w.description,
                                          ", ".join("%s=%d" % kv for kv in w.sizes.items())))
        return 0
    if args.command == "export":
        start = time.time()
        exp = WORKLOADS[args.name].export(args.output, **_parse_sizes(args.size))
        print("wrote %s in %.2f s: %d inputs, %d constants (%d bytes), %d nodes" % (
            args.output, time.time() - start, len(exp.graph.inputs), len(exp.graph.constants),
            sum(len(c.data) for c in exp.graph.constants), len(exp.graph.nodes)))
        return 0
    names = args.names or list(WORKLOADS)
    for n in names:
        if n not in WORKLOADS:
            parser.error("unknown workload %s (one of %s)" % (n, ", ".join(WORKLOADS)))
    rows = measure(names, args.dir, args.opt, args.timeout, args.max_rss_mb, args.mlir_timing,
                   log=lambda s: print(s, file=sys.stderr))
    print(format_table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
