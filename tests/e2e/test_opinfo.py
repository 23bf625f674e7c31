#!/usr/bin/env python3
"""The OpInfo sweep (opinfo_sweep.py) as tests: one test per sample of every
operator neuron-cc supports that has an OpInfo, in f32, bf16, f16, int64 and
uint8, or the dtypes NEURONCC_OPINFO_DTYPES names (tolerances and sample
selection: see opinfo_sweep.py's docstring).

Samples listed in xfail_opinfo.txt (`op dtype sample reason`, sample = index
or `*`) are expected failures; a listed sample that passes is an error
("unexpectedly passing, remove it from the list"), and so is an entry that
names no sample. Skipped samples (empty or oversized tensors, eager raising,
non-tensor results) are not tests; their counts are printed with the
per-op passed/total table at the end.
"""
import collections
import os
import re
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402
import opinfo_sweep as sweep  # noqa: E402

XFAIL = common.XfailList(sweep.XFAIL_PATH, 3)
# ctest runs one process per dtype (tests/CMakeLists.txt), so they spread
# over the cores; run directly, this file covers every default dtype.
DTYPES = tuple(d for d in os.environ.get("NEURONCC_OPINFO_DTYPES", ",".join(sweep.DEFAULT_DTYPES)).split(",") if d)
for _d in DTYPES:
    if _d not in sweep.DTYPES:
        raise SystemExit("NEURONCC_OPINFO_DTYPES: unknown dtype %r (known: %s)" % (_d, ", ".join(sweep.DTYPES)))
CASES, WITHOUT_OPINFO = sweep.enumerate_cases(dtypes=DTYPES)
RESULTS = {}  # sample key -> None (pass) or reason


class OpInfoSweep(unittest.TestCase):
    xfail_file = sweep.XFAIL_PATH

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="neuroncc-opinfo-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_xfail_list_is_well_formed(self):
        self.assertEqual(XFAIL.errors, [])
        keys = {s.key for _, _, ss, _ in CASES for s in ss}
        keys |= {(op, d, "*") for op, d, ss, _ in CASES if ss}
        stale = sorted(" ".join(k) for k in XFAIL.entries if k[1] in DTYPES and k not in keys)
        self.assertEqual(stale, [], "entries in %s that name no sample" % sweep.XFAIL_PATH)

    def test_ctest_runs_every_default_dtype(self):
        """tests/CMakeLists.txt registers one test per dtype of DEFAULT_DTYPES."""
        with open(os.path.join(HERE, "..", "CMakeLists.txt")) as f:
            found = re.search(r"foreach\(dtype ([^)]*)\)", f.read())
        self.assertIsNotNone(found, "no per-dtype OpInfo loop in tests/CMakeLists.txt")
        self.assertEqual(tuple(found.group(1).split()), tuple(sweep.DEFAULT_DTYPES))

    def test_sweep_found_samples(self):
        """The sweep is not vacuous: most supported ops have an OpInfo with samples."""
        with_samples = {op for op, _, ss, _ in CASES if ss}
        self.assertGreaterEqual(len(with_samples), 10, "only %s" % sorted(with_samples))


def _make_test(sample):
    def test(self):
        try:
            err = sweep.run_sample(sample, self.tmp)
        except common.CaseFailure as e:
            RESULTS[sample.key] = str(e)
            self.fail("%s: %s" % (sample.label(), e))
        RESULTS[sample.key] = None
        del err

    test.__doc__ = sample.label()
    test.xfail_entry = " ".join(sample.key) if sample.key in XFAIL else \
        "%s %s *" % (sample.op, sample.dtype)
    if sweep.expected_failure(XFAIL, sample):
        test = unittest.expectedFailure(test)
    return test


for _op, _dtype, _samples, _ in CASES:
    for _s in _samples:
        _name = "test_%s_%s_%d" % (_op.replace("::", "_").replace(".", "_"), _dtype, _s.index)
        setattr(OpInfoSweep, _name, _make_test(_s))


def tearDownModule():  # noqa: N802 - unittest's name
    print("\n%-28s %-5s %8s %8s %9s" % ("op", "dtype", "passed", "total", "skipped"))
    totals = collections.Counter()
    for op, dtype, samples, skipped in CASES:
        ran = [s for s in samples if s.key in RESULTS]
        passed = sum(1 for s in ran if RESULTS[s.key] is None)
        totals.update(passed=passed, total=len(ran), skipped=sum(skipped.values()))
        print("%-28s %-5s %8d %8d %9d" % (op, dtype, passed, len(ran), sum(skipped.values())))
    print("OpInfo samples: %d of %d passed, %d skipped; supported ops without an OpInfo: %s" % (
        totals["passed"], totals["total"], totals["skipped"], " ".join(WITHOUT_OPINFO) or "none"))


if __name__ == "__main__":
    common.main()
