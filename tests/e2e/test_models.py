#!/usr/bin/env python3
"""End-to-end models: export with neuroncc.export (parameters as constants),
`neuron-cc compile model.pb --framework ATEN -O0/-O2`, run with neuron-run
(inputs by name), compare with PyTorch eager on the same weights and inputs.

Models (tools/python/neuroncc/models.py): llama (LLaMA-style decoder layer),
gpt2 (GPT-2 block), tel / tel_bf (nn.TransformerEncoderLayer, batch_first
False / True), mlp, rmsnorm (six-op RMSNorm). Each at f32 and bf16, at -O0
and -O2, with random parameters and with the parameters PyTorch's
constructors give (unit norm weights, zero biases: splat constants): 48
cases.

Tolerances, as max |y - eager| / max |eager| over the output:
  f32:  1e-4. Eager f32 is within 5e-7 of a float64 evaluation of these
        models (measured); the compiled program may sum in another order,
        use f32 PSUM accumulation for K <= 512 and other transcendental
        approximations, each worth a few f32 ulps per op; 1e-4 leaves two
        orders of magnitude for that while catching any real bug (a wrong
        element is off by O(1)).
  bf16: 2^-5 = 0.03125, also checked against a float64 evaluation of the
        same bf16 weights and inputs. bf16 keeps 8 significant bits
        (u = 2^-8 = 0.0039 per rounding). Eager bf16 rounds after every op;
        measured against float64 its error is 0.003 (mlp) to 0.011 (tel_bf)
        of max |output|, i.e. 0.8 to 2.7 u: the output rounding (u), the
        residual adds, and attention/normalization intermediates rounded
        in bf16 (softmax probabilities, projections with K = 64..512). The
        compiled program rounds at its kernel boundaries instead (fewer
        times at -O2, f32 accumulation in PSUM), so its own error is of the
        same order; the two can differ by at most the sum, about 2 x 0.011
        for the worst model. 2^-5 is that with a ~40% margin, and still 8
        times below the error of a wrong element or a dropped term.

Cases the compiler cannot handle yet are listed in xfail_models.txt
(`model dtype opt init reason`); a listed case is an expected failure, and a
listed case that passes is an error ("unexpectedly passing, remove it from
the list"), as is an entry that names no case. Refresh the list after
compiler work with:
    /usr/bin/python3 tests/e2e/test_models.py --update-xfail
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402

from neuroncc import models, toolchain  # noqa: E402

TOLERANCE = {"f32": common.F32_TOLERANCE, "bf16": 2.0 ** -5}
OPTS = (0, 2)
XFAIL_PATH = os.path.join(HERE, "xfail_models.txt")
XFAIL = common.XfailList(XFAIL_PATH, 4)
XFAIL_HEADER = """# Expected failures of tests/e2e/test_models.py: `model dtype opt init reason`.
# A listed case that passes fails the test ("unexpectedly passing"): remove it.
# Regenerate: /usr/bin/python3 tests/e2e/test_models.py --update-xfail"""

CASES = [(m, d, o, i) for m in models.MODELS for d in models.DTYPES for o in OPTS for i in models.INITS]


def case_key(model, dtype, opt, init):
    return (model, dtype, "O%d" % opt, init)


class ModelCase:
    """Builds, exports, compiles and runs one case; raises CaseFailure."""

    _cache = {}

    @classmethod
    def eager(cls, model, dtype, init):
        key = (model, dtype, init)
        if key not in cls._cache:
            spec = models.MODELS[model]
            module, inputs = spec.build(models.DTYPES[dtype], init)
            ref = models.reference(module, inputs)
            exact = None
            if dtype == "bf16":  # float64 evaluation of the same bf16 weights and inputs
                m64, i64 = spec.build(models.DTYPES[dtype], init)
                exact = models.reference(m64.double(), tuple(x.double() for x in i64))
            cls._cache[key] = (module, inputs, ref, exact)
        return cls._cache[key]

    @classmethod
    def run(cls, model, dtype, opt, init, workdir):
        module, inputs, ref, exact = cls.eager(model, dtype, init)
        name = "%s_%s_O%d_%s" % (model, dtype, opt, init)
        outs, _ = common.export_compile_run(module, inputs, workdir, name, opt,
                                            input_names=models.MODELS[model].input_names)
        # The timing model never depends on values: a timing-only capture
        # writes the same trace, to the tick, as a full execution.
        neff = os.path.join(workdir, name + ".neff")
        try:
            same = toolchain.timing_only_matches(neff, workdir)
        except toolchain.ToolError as e:
            raise common.CaseFailure("timing-only: " + common.compiler_reason(e)) from e
        if not same:
            raise common.CaseFailure("timing-only: its NTFF differs from a full execution's")
        # Fused code is one dispatch: the fixed launch cost is paid once,
        # however many kernels the graph has.
        summary = toolchain.ntff_summary(neff, os.path.join(workdir, "full.ntff"))
        if opt > 0 and (summary["dispatch_count"] != 1 or
                        abs(summary["launch_overhead_time"] - summary["dispatch_overhead_ns"] * 1e-9) > 1e-12):
            raise common.CaseFailure("dispatch model: -O%d ran %d dispatches (%d kernels), launch overhead %g s"
                                     % (opt, summary["dispatch_count"], summary["kernel_count"],
                                        summary["launch_overhead_time"]))
        errors = []
        for i, (y, r) in enumerate(zip(outs, ref)):
            errors.append(common.compare(y, r, TOLERANCE[dtype]))
            if exact is not None:
                common.compare(y, exact[i], TOLERANCE[dtype])
        return errors


class ModelsEndToEnd(unittest.TestCase):
    xfail_file = XFAIL_PATH

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="neuroncc-models-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_xfail_list_is_well_formed(self):
        self.assertEqual(XFAIL.errors, [])
        known = {case_key(*c) for c in CASES}
        stale = sorted(" ".join(k) for k in XFAIL.entries if k not in known)
        self.assertEqual(stale, [], "entries in %s that name no case" % XFAIL_PATH)

    def test_benchmark_script_runs(self):
        """benchmarks/models_bench.py prints a row per model and exits 0, compiled or not."""
        script = os.path.join(HERE, "..", "..", "benchmarks", "models_bench.py")
        proc = subprocess.run([sys.executable, script, "--models", "rmsnorm,llama", "--dtypes", "f32",
                               "--repeats", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()
                if line.startswith(("rmsnorm ", "llama "))}
        self.assertEqual(sorted(rows), ["llama", "rmsnorm"])
        self.assertEqual(rows["rmsnorm"][2:4], ["6", "1"])  # kernels at -O0 and -O2
        if ("llama", "f32", "O2", "random") in XFAIL:
            self.assertIn("llama f32: compile -O2", proc.stdout)

    def test_listed_case_that_passes_is_an_error(self):
        """The enforcement itself: an expected failure that passes is reported as an error."""
        def passing(self):
            pass
        passing.xfail_entry = "mlp f32 O0 random"

        class Probe(unittest.TestCase):
            xfail_file = XFAIL_PATH
            test_probe = unittest.expectedFailure(passing)

        result = common.XfailResult(open(os.devnull, "w"), True, 0)
        Probe("test_probe").run(result)
        self.assertFalse(result.wasSuccessful())
        self.assertEqual(len(result.errors), 1)
        self.assertIn("mlp f32 O0 random: " + common.UNEXPECTED_PASS, result.errors[0][1])


def _make_test(model, dtype, opt, init):
    key = case_key(model, dtype, opt, init)

    def test(self):
        try:
            errors = ModelCase.run(model, dtype, opt, init, self.tmp)
        except common.CaseFailure as e:
            listed = XFAIL.entries.get(key)
            if listed is not None and common.first_line(e, 300) != listed:
                print("  note: %s now fails with: %s" % (" ".join(key), common.first_line(e, 300)))
            self.fail(str(e))
        print("  %s %s -O%d %s: max rel error %s" % (model, dtype, opt, init, ", ".join("%.2e" % e for e in errors)))

    test.xfail_entry = " ".join(key)
    test.__doc__ = "%s %s -O%d %s" % (model, dtype, opt, init)
    if key in XFAIL:
        test = unittest.expectedFailure(test)
    return test


for _m, _d, _o, _i in CASES:
    setattr(ModelsEndToEnd, "test_%s_%s_O%d_%s" % (_m, _d, _o, _i), _make_test(_m, _d, _o, _i))


def update_xfail():
    tmp = tempfile.mkdtemp(prefix="neuroncc-models-")
    failures = {}
    try:
        for model, dtype, opt, init in CASES:
            try:
                ModelCase.run(model, dtype, opt, init, tmp)
                status = "pass"
            except common.CaseFailure as e:
                failures[case_key(model, dtype, opt, init)] = common.first_line(e, 300)
                status = "FAIL " + common.first_line(e, 120)
            print("%-8s %-5s -O%d %-7s %s" % (model, dtype, opt, init, status))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    XFAIL.write(failures, XFAIL_HEADER)
    print("%d passed, %d expected failures written to %s" % (len(CASES) - len(failures), len(failures), XFAIL_PATH))


if __name__ == "__main__":
    if "--update-xfail" in sys.argv:
        update_xfail()
    else:
        common.main()
