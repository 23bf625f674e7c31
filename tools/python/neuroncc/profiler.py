"""Profiling compiled models in the shape of torch.profiler.

    with neuroncc.profile(output_dir="prof") as prof:
        compiled(x)
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=10))

The block is a libnrt profiling session (nrt_inspect_*): on exit the runtime
writes the usual profile directory, `neff_<H>.neff` and
`<H>_instid_<i>_vnc_0.ntff` for every model that ran, and `trace.json`, the
system trace. Each call of a compiled model adds its Python-side events to the
trace's framework lane (`neuroncc::<model>`, its input and output copies)
beside the runtime's `nrt_execute`; times are on the session clock (host time,
each execution lasting its modeled device time).

Warm-up: with `schedule=neuroncc.schedule(wait=1, warmup=1, active=2)` and
`prof.step()` after each iteration, only the active steps are recorded, as
torch.profiler's schedule does (wait and warmup steps both run unrecorded:
the simulated device has nothing to warm).

torch.profiler: give `on_trace_ready=neuroncc.torch_trace_handler(DIR)` to a
torch.profiler.profile around (or inside) the neuroncc block, or call
`neuroncc.merge_torch_profile(torch_prof, DIR)` after both ended; its CPU
events join trace.json's framework lane (thread "torch.profiler").
"""
import bisect
import glob
import json
import os
import subprocess
import threading
import time

from . import nrt
from .files import write_atomic

_active = None  # the profile whose session is recording
_active_lock = threading.Lock()

_PROFILE_FILES = ("neff_*.neff", "*_instid_*_vnc_*.ntff", "trace.json", ".profile-incomplete")
_TORCH_TID = 2


def recorder():
    """The profile recording now, or None."""
    return _active


def schedule(*, wait=0, warmup=0, active=1, skip_first=0):
    """Which steps to record: after `skip_first` + `wait` + `warmup` steps,
    the next `active` ones (one window, as torch.profiler.schedule with
    repeat=1)."""
    for name, v in (("wait", wait), ("warmup", warmup), ("active", active), ("skip_first", skip_first)):
        if not isinstance(v, int) or v < 0:
            raise ValueError("schedule: %s must be a non-negative integer, not %r" % (name, v))
    if active < 1:
        raise ValueError("schedule: active must be at least 1")
    first = skip_first + wait + warmup
    return lambda step: first <= step < first + active


def _format_time(us):
    if us >= 1e6:
        return "%.3fs" % (us / 1e6)
    if us >= 1e3:
        return "%.3fms" % (us / 1e3)
    return "%.3fus" % us


class FunctionEventAvg:
    """One row of key_averages(): times in microseconds, as torch.profiler's."""

    def __init__(self, key):
        self.key = key
        self.count = 0
        self.self_cpu_time_total = 0.0
        self.cpu_time_total = 0.0
        self.self_device_time_total = 0.0
        self.device_time_total = 0.0

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self):
        return self.device_time_total / self.count if self.count else 0.0

    # torch.profiler's CUDA names, so that code written for it works.
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time_total = property(lambda self: self.device_time_total)

    def __repr__(self):
        return "<FunctionEventAvg key=%s count=%d self_device=%s device_total=%s>" % (
            self.key, self.count, _format_time(self.self_device_time_total), _format_time(self.device_time_total))


_SORT_KEYS = {"self_device_time_total", "device_time_total", "self_cpu_time_total", "cpu_time_total", "count",
              "cpu_time", "device_time"}
_SORT_ALIASES = {"self_cuda_time_total": "self_device_time_total", "cuda_time_total": "device_time_total",
                 "cuda_time": "device_time"}


class EventList(list):
    """key_averages()'s rows, with torch.profiler's table()."""

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55):
        rows = list(self)
        if sort_by is not None:
            key = _SORT_ALIASES.get(sort_by, sort_by)
            if key not in _SORT_KEYS:
                raise ValueError("sort_by must be one of %s, not %r" % (", ".join(sorted(_SORT_KEYS)), sort_by))
            rows.sort(key=lambda r: getattr(r, key), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        self_cpu = sum(r.self_cpu_time_total for r in self)
        self_device = sum(r.self_device_time_total for r in self)
        width = max([len("Name")] + [min(len(r.key), max_name_column_width) for r in rows])
        headers = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self Device",
                   "Self Device %", "Device total", "Device time avg", "# of Calls"]
        col = 15
        line = "-" * width + ("  " + "-" * col) * len(headers)
        pct = lambda a, b: "%.2f%%" % (100.0 * a / b) if b else "0.00%"
        out = [line, "Name".rjust(width) + "".join("  " + h.rjust(col) for h in headers), line]
        for r in rows:
            name = r.key if len(r.key) <= max_name_column_width else r.key[:max_name_column_width - 3] + "..."
            cells = [pct(r.self_cpu_time_total, self_cpu), _format_time(r.self_cpu_time_total),
                     pct(r.cpu_time_total, self_cpu), _format_time(r.cpu_time_total), _format_time(r.cpu_time),
                     _format_time(r.self_device_time_total), pct(r.self_device_time_total, self_device),
                     _format_time(r.device_time_total), _format_time(r.device_time), str(r.count)]
            out.append(name.rjust(width) + "".join("  " + c.rjust(col) for c in cells))
        out += [line, "Self CPU time total: %s" % _format_time(self_cpu),
                "Self Device time total: %s" % _format_time(self_device), ""]
        return "\n".join(out)

    def __str__(self):
        return self.table()


def _aten_name(source_op):
    """'aten.mul.Tensor' -> 'aten::mul' (torch.profiler's names, overloads merged)."""
    if source_op.startswith("aten."):
        return "aten::" + source_op[len("aten."):].split(".")[0]
    return source_op


class _ClockMap:
    """Host wall time (ns since the epoch) to session picoseconds, from pairs
    of (host, session) readings; each execution is a segment where the session
    clock moved by the modeled device time rather than the host time."""

    def __init__(self, anchors, executions):
        self.anchors = sorted(anchors)
        self.executions = sorted(executions)  # (host0, host1, session0, session1), disjoint
        self._hosts = [h for h, _ in self.anchors]
        self._starts = [e[0] for e in self.executions]

    def __call__(self, host_ns):
        k = bisect.bisect_right(self._starts, host_ns) - 1
        if k >= 0:
            h0, h1, s0, s1 = self.executions[k]
            if host_ns <= h1:
                return s0 + (s1 - s0) * ((host_ns - h0) / (h1 - h0) if h1 > h0 else 1.0)
        i = bisect.bisect_right(self._hosts, host_ns)  # anchors[:i] are at or before host_ns
        if i == 0:
            h, s = self.anchors[0]
            return max(0.0, s - (h - host_ns) * 1000.0)
        h, s = self.anchors[i - 1]
        t = s + (host_ns - h) * 1000.0
        return min(t, self.anchors[i][1]) if i < len(self.anchors) else t

    def window(self):
        return self.anchors[0][0], self.anchors[-1][0]

    def to_json(self):
        return {"anchors": self.anchors, "executions": self.executions}

    @classmethod
    def from_json(cls, data):
        return cls([tuple(a) for a in data["anchors"]], [tuple(e) for e in data["executions"]])


class profile:
    """A profiling session around calls of compiled models (see the module doc).

    output_dir: the profile directory (created). It must not hold a profile
    already, unless overwrite=True, which deletes the old profile's files first.
    """

    def __init__(self, output_dir, schedule=None, overwrite=False):
        self.output_dir = os.path.abspath(output_dir)
        self.schedule = schedule
        self.overwrite = overwrite
        self.step_num = 0
        self._rt = None
        self._recording = False
        self._finished = False
        self._calls = []  # per recorded call: model, hash, device_ps and the session ps of its parts
        self._anchors = []
        self._executions = []
        self._pending_torch = []
        self._summaries = None

    # The session.
    def __enter__(self):
        existing = [p for pattern in _PROFILE_FILES for p in glob.glob(os.path.join(self.output_dir, pattern))]
        if existing and not self.overwrite:
            raise FileExistsError("%s already holds a profile (%s); choose another output_dir or pass overwrite=True"
                                  % (self.output_dir, os.path.basename(sorted(existing)[0])))
        for p in existing:
            os.unlink(p)
        self._rt = nrt.runtime()
        self._update()
        return self

    def __exit__(self, *exc):
        if self._recording:
            self._stop()
        return False

    def step(self):
        """Marks the end of one step (iteration) of the schedule."""
        self.step_num += 1
        self._update()

    def _update(self):
        want = self.schedule(self.step_num) if self.schedule else True
        if want and not self._recording and not self._finished:
            self._start()
        elif not want and self._recording:
            self._stop()

    def _start(self):
        global _active
        with _active_lock:
            if _active is not None:
                raise RuntimeError("another neuroncc.profile (writing %s) is recording; sessions cannot nest"
                                   % _active.output_dir)
            self._rt.inspect_begin(self.output_dir)
            _active = self
        self._recording = True
        self._anchors.append(self.mark())

    def _stop(self):
        global _active
        self._anchors.append(self.mark())
        with _active_lock:
            _active = None
        self._recording = False
        self._finished = True
        self._rt.inspect_stop()
        path = os.path.join(self.output_dir, "trace.json")
        with open(path) as f:
            trace = json.load(f)
        trace.setdefault("otherData", {})["neuroncc_clock"] = self._clock().to_json()
        write_atomic(path, json.dumps(trace))
        for torch_prof in self._pending_torch:
            merge_torch_profile(torch_prof, self.output_dir)
        self._pending_torch = []

    def _clock(self):
        return _ClockMap(self._anchors, self._executions)

    # Called by CompiledModel.__call__ while recording.
    def mark(self):
        return time.time_ns(), self._rt.inspect_time() or 0

    def record_call(self, model, stats, **marks):
        """marks: (host ns, session ps) at the call's start (`call`), before
        the input copies (`copy`), around nrt_execute (`execute`, `done`),
        after the output copies (`read`) and at its end (`end`)."""
        rt = self._rt
        s = {k: v[1] for k, v in marks.items()}
        h = str(stats["profile_hash"])
        rt.add_framework_event("neuroncc::%s" % model.name, s["call"], s["end"], {"model": model.name, "neff_hash": h})
        rt.add_framework_event("neuroncc::input_copy", s["copy"], s["execute"], {"inputs": len(model._inputs)})
        rt.add_framework_event("neuroncc::output_copy", s["done"], s["read"], {"outputs": len(model._outputs)})
        self._anchors += list(marks.values())
        self._executions.append((marks["execute"][0], marks["done"][0], s["execute"], s["done"]))
        self._calls.append(dict(model=model.name, hash=h, device_ps=stats["device_time_ps"],
                                call=s["end"] - s["call"], input_copy=s["execute"] - s["copy"],
                                execute=s["done"] - s["execute"], output_copy=s["read"] - s["done"]))

    # Results.
    def _summaries_of_session(self):
        if self._summaries is None:
            from .compiled import find_tool
            tool = find_tool("neuron-profile")
            self._summaries = []
            for h in sorted({c["hash"] for c in self._calls}):
                neff = os.path.join(self.output_dir, "neff_%s.neff" % h)
                for ntff in sorted(glob.glob(os.path.join(self.output_dir, "%s_instid_*_vnc_*.ntff" % h))):
                    proc = subprocess.run([tool, "view", "-n", neff, "-s", ntff, "--output-format", "summary-json"],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    if proc.returncode != 0:
                        raise RuntimeError("neuron-profile could not read %s: %s" % (ntff, proc.stderr.strip()))
                    self._summaries.append(json.loads(proc.stdout))
        return self._summaries

    def key_averages(self):
        """One row per model call, per runtime call and copy, per kernel and per
        ATen op. Self Device adds up to the device time of every execution (the
        ATen ops hold it, split as neuron-profile attributes it); kernels, calls
        and nrt_execute show it as Device total."""
        if self._recording:
            raise RuntimeError("key_averages() is available once the profiled block has ended")
        rows = {}

        def row(key):
            if key not in rows:
                rows[key] = FunctionEventAvg(key)
            return rows[key]

        us = 1e-6  # per picosecond
        for c in self._calls:
            r = row("neuroncc::%s" % c["model"])
            r.count += 1
            r.cpu_time_total += c["call"] * us
            r.self_cpu_time_total += max(0, c["call"] - c["input_copy"] - c["execute"] - c["output_copy"]) * us
            r.device_time_total += c["device_ps"] * us
            for key in ("input_copy", "output_copy", "execute"):
                r = row("nrt_execute" if key == "execute" else "neuroncc::" + key)
                r.count += 1
                r.cpu_time_total += c[key] * us
                r.self_cpu_time_total += c[key] * us
                if key == "execute":
                    r.device_time_total += c["device_ps"] * us
        for s in self._summaries_of_session():
            for k in s["kernels"]:
                r = row(k["name"])
                r.count += k["calls"]
                r.device_time_total += k["device_time_us"]
            for op in s["aten_ops"]:
                r = row(_aten_name(op["name"]))
                r.count += op["calls"]
                r.device_time_total += op["device_time_us"]
                r.self_device_time_total += op["device_time_us"]
        return EventList(rows.values())

    @property
    def device_time_total_us(self):
        """Modeled device time of every recorded execution."""
        return sum(c["device_ps"] for c in self._calls) * 1e-6


def _torch_trace_start_us(torch_prof):
    results = torch_prof.profiler.kineto_results
    if hasattr(results, "trace_start_us"):
        return results.trace_start_us()
    return results.trace_start_ns() / 1000.0


def merge_torch_profile(torch_prof, output_dir):
    """Adds a finished torch.profiler.profile's CPU events to the framework
    lane of the neuroncc profile in output_dir (its trace.json, rewritten
    atomically). Events outside the neuroncc session are left out. When the
    neuroncc profile of output_dir is still recording, the merge happens when
    it ends."""
    output_dir = os.path.abspath(output_dir)
    active = _active
    if active is not None and active.output_dir == output_dir:
        active._pending_torch.append(torch_prof)
        return
    path = os.path.join(output_dir, "trace.json")
    try:
        with open(path) as f:
            trace = json.load(f)
        clock = _ClockMap.from_json(trace["otherData"]["neuroncc_clock"])
    except (OSError, ValueError, KeyError) as e:
        raise ValueError("%s: no finished neuroncc profile to merge into (%s)" % (output_dir, e)) from None
    start_us = _torch_trace_start_us(torch_prof)
    lo, hi = clock.window()
    events = trace["traceEvents"]
    events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": _TORCH_TID,
                   "args": {"name": "torch.profiler"}})
    merged = 0
    for e in torch_prof.events():
        if getattr(e, "device_type", None) is not None and "CPU" not in str(e.device_type):
            continue
        h0 = int((start_us + e.time_range.start) * 1000)
        h1 = int((start_us + e.time_range.end) * 1000)
        if h1 < lo or h0 > hi:
            continue
        s0, s1 = clock(max(h0, lo)), clock(min(h1, hi))
        events.append({"name": e.name, "cat": "torch.profiler", "ph": "X", "pid": 1, "tid": _TORCH_TID,
                       "ts": round(s0 / 1e6, 6), "dur": round(max(0.0, s1 - s0) / 1e6, 6),
                       "args": {"torch_thread": e.thread}})
        merged += 1
    trace["otherData"]["torch_profiler_events"] = merged
    write_atomic(path, json.dumps(trace))
    return merged


def torch_trace_handler(output_dir):
    """An on_trace_ready for torch.profiler.profile that merges its CPU events
    into the neuroncc profile in output_dir (see merge_torch_profile)."""
    return lambda torch_prof: merge_torch_profile(torch_prof, output_dir)
