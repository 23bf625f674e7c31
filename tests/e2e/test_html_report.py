#!/usr/bin/env python3
"""`neuron-profile view --output-format html` in a real browser (Debian's
chromium, headless): the report of the RMSNorm example (-O0: six kernels,
six dispatches) and of a production-size LLaMA-2-7B layer (-O2, 136k
instructions) load without a console message, their timeline and roofline
canvases are drawn (pixels of a screenshot), the kernel table has one row per
kernel, and a report whose trace.json is unreadable says so on the page.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common  # noqa: E402,F401  (puts tools/python on the path)

from PIL import Image  # noqa: E402  (python3-pil: a test dependency, scripts/setup.sh)

from neuroncc import toolchain  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(*args):
    if not CHROMIUM:
        raise AssertionError("chromium is not installed (scripts/setup.sh installs it)")
    home = tempfile.mkdtemp(prefix="neuroncc-chromium-")
    try:
        p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--enable-logging=stderr", "--v=0", "--user-data-dir=" + home] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180)
    finally:
        shutil.rmtree(home, True)
    if p.returncode != 0:
        raise AssertionError("chromium failed (%d): %s" % (p.returncode, p.stderr[-2000:]))
    return p


class Report:
    """A report rendered by chromium: its DOM after the script ran, a
    screenshot, and the console messages."""

    def __init__(self, html, workdir, height=4200):
        url = "file://" + os.path.abspath(html)
        shot = os.path.join(workdir, "shot.png")
        p = chromium("--window-size=1400,%d" % height, "--screenshot=" + shot, url)
        self.console = [line for line in p.stderr.splitlines() if ":CONSOLE" in line]
        d = chromium("--window-size=1400,%d" % height, "--dump-dom", url)
        self.console += [line for line in d.stderr.splitlines() if ":CONSOLE" in line]
        self.dom = d.stdout
        self.image = Image.open(shot).convert("RGB")

    def canvas_rect(self, canvas_id):
        m = re.search(r'<canvas id="%s"[^>]*data-rect="(\d+),(\d+),(\d+),(\d+)"' % canvas_id, self.dom)
        if not m:
            raise AssertionError("canvas %s has no data-rect in the DOM" % canvas_id)
        return tuple(int(v) for v in m.groups())

    def ink(self, canvas_id, left, top, right, bottom, background):
        """Pixels of the canvas's plot area (the canvas minus the margins)
        in none of the `background` colours: what was drawn on it."""
        x, y, w, h = self.canvas_rect(canvas_id)
        crop = self.image.crop((x + left, y + top, x + w - right, min(y + h - bottom, self.image.height)))
        colors = crop.getcolors(maxcolors=1 << 22) or []
        return sum(n for n, c in colors if c not in background)


# The pages' own backgrounds: white, the timeline rows' two greys, the time
# axis lines and the roofline's grid.
TIMELINE_BACKGROUND = {(255, 255, 255), (247, 248, 250), (238, 240, 244), (90, 100, 117)}
ROOFLINE_BACKGROUND = {(255, 255, 255), (216, 221, 230)}


class HtmlReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="neuroncc-html-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def profile(self, name, graph, opt):
        d = os.path.join(self.tmp, name)
        os.makedirs(d)
        neff = os.path.join(d, name + ".neff")
        toolchain.compile_graph(graph, neff, opt=opt)
        prof = os.path.join(d, "prof")
        toolchain._run([toolchain.tool("neuron-run"), neff, "--profile", prof, "--timing-only", "-q"])
        html = os.path.join(d, "report.html")
        toolchain._run([toolchain.tool("neuron-profile"), "view", "-d", prof, "--output-format", "html",
                        "--output-file", html])
        summary = json.loads(toolchain._run([toolchain.tool("neuron-profile"), "view", "-d", prof,
                                             "--output-format", "summary-json"]))
        return d, prof, html, summary

    def check(self, workdir, html, summary):
        r = Report(html, workdir)
        self.assertEqual(r.console, [], "console messages while loading the report")
        self.assertEqual(r.dom.count('class="kernel-row"'), summary["kernel_count"])
        self.assertEqual(r.dom.count('class="op-row"'), len(summary["aten_ops"]))
        # Timelines: right of the 150-pixel label column, below the time axis.
        for canvas in ("system", "device"):
            x, y, w, h = r.canvas_rect(canvas)
            self.assertGreater(r.ink(canvas, 151, 24, 0, 0, TIMELINE_BACKGROUND), 0.01 * (w - 151) * (h - 24),
                               "nothing drawn on the %s timeline" % canvas)
        # Roofline: the ceilings and one point per kernel inside the axes.
        self.assertGreater(r.ink("roofline", 71, 21, 21, 47, ROOFLINE_BACKGROUND), 1500, "a blank roofline")
        for bound in re.findall(r'<span class="bound [^"]*">([^<]*)</span>', r.dom):
            self.assertIn(bound, ("compute", "memory", "launch overhead", "waiting on dependencies"))
        return r

    def test_rmsnorm_example(self):
        d, prof, html, summary = self.profile("rmsnorm", os.path.join(REPO, "examples", "rmsnorm", "naive.mlir"), 0)
        self.assertEqual(summary["kernel_count"], 6)
        r = self.check(d, html, summary)
        # Every kernel of the -O0 program pays a whole dispatch: launch-overhead bound.
        self.assertEqual(re.findall(r'<span class="bound [^"]*">([^<]*)</span>', r.dom), ["launch overhead"] * 6)
        self.assertIn("neuron-profile: ", r.dom)

        # An unreadable trace.json: the page says so and still draws the device.
        with open(os.path.join(prof, "trace.json"), "w") as f:
            f.write('{"traceEvents": [ {"name": </script><script>console.error("injected")')
        broken = os.path.join(d, "broken.html")
        toolchain._run([toolchain.tool("neuron-profile"), "view", "-d", prof, "--output-format", "html",
                        "--output-file", broken])
        r = Report(broken, d)
        self.assertEqual(r.console, [])
        self.assertIn("trace.json could not be read", r.dom)
        self.assertGreater(r.ink("device", 151, 24, 0, 0, TIMELINE_BACKGROUND), 100)

    def test_llama_layer(self):
        d = os.path.join(self.tmp, "llama_export")
        os.makedirs(d)
        graph = os.path.join(d, "layer.pb")
        subprocess.run([sys.executable, "-m", "neuroncc.workloads", "export", "llama7b_s2048", "-o", graph],
                       check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "tools", "python")))
        d, prof, html, summary = self.profile("llama", graph, 2)
        self.assertGreater(summary["instruction_count"], 100000)
        size = os.path.getsize(html)
        self.assertLess(size, 12 << 20, "the report of one LLaMA layer is %d bytes" % size)
        self.check(d, html, summary)
        # -n/-s (no trace.json): the system lane is the device's dispatches.
        neff = [f for f in os.listdir(prof) if f.endswith(".neff")][0]
        ntff = [f for f in os.listdir(prof) if f.endswith(".ntff")][0]
        single = os.path.join(d, "single.html")
        toolchain._run([toolchain.tool("neuron-profile"), "view", "-n", os.path.join(prof, neff), "-s",
                        os.path.join(prof, ntff), "--output-format", "html", "--output-file", single])
        r = Report(single, d)
        self.assertEqual(r.console, [])
        self.assertGreater(r.ink("system", 151, 24, 0, 0, TIMELINE_BACKGROUND), 100)


if __name__ == "__main__":
    unittest.main()
