"""Checks a `neuron-cc --memory-plan-csv` file against its `--memory-report`.

usage: check_memory_plan.py PLAN.csv REPORT.txt

Independently of the compiler: every offset is aligned, no two tensors live at
the same step share a byte, everything fits in the reported arena; the
report's lower bound is the CSV's peak live bytes, its no-reuse size the sum
of the 64-byte-aligned sizes, and lower bound <= arena <= no reuse.
Prints one summary line.
"""
import csv
import re
import sys


def main(csv_path, report_path):
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    with open(report_path) as f:
        report = f.read()

    def field(name):
        m = re.search(r"^\s*" + re.escape(name) + r":\s+(\d+) bytes", report, re.M)
        assert m, f"no '{name}' line in the report"
        return int(m.group(1))

    arena, bound, no_reuse = field("arena"), field("lower bound"), field("no reuse")
    bufs = [{k: int(v) for k, v in r.items()} for r in rows]
    for i, b in enumerate(bufs):
        assert b["id"] == i, f"row {i}: id {b['id']}"
        assert b["lower"] < b["upper"], f"buffer {i}: empty lifetime"
        assert b["offset"] >= 0 and b["offset"] % b["alignment"] == 0, f"buffer {i}: offset {b['offset']}"
        assert b["offset"] + b["size"] <= arena, f"buffer {i} ends past the arena"
        for j in range(i):
            o = bufs[j]
            if b["lower"] < o["upper"] and o["lower"] < b["upper"]:
                assert (b["offset"] + b["size"] <= o["offset"] or o["offset"] + o["size"] <= b["offset"]), \
                    f"buffers {j} and {i} are live together and overlap"
    steps = max((b["upper"] for b in bufs), default=0)
    peak = max((sum(b["size"] for b in bufs if b["lower"] <= t < b["upper"]) for t in range(steps)), default=0)
    padded = sum((b["size"] + b["alignment"] - 1) // b["alignment"] * b["alignment"] for b in bufs)
    assert peak == bound, f"report's lower bound {bound}, CSV peak {peak}"
    assert padded == no_reuse, f"report's no-reuse size {no_reuse}, CSV {padded}"
    assert bound <= arena <= no_reuse, f"not bound {bound} <= arena {arena} <= no reuse {no_reuse}"
    print(f"plan ok: {len(bufs)} tensors, bound {bound} <= arena {arena} <= no reuse {no_reuse}")


if __name__ == "__main__":
    main(*sys.argv[1:])
