#!/usr/bin/env python3
"""Embedding lookups end to end: token ids (an int64 graph input) gather table
rows on the device (DMA gather), position embeddings are added, and a
LayerNorm follows; compared with PyTorch eager.

Tolerances as in test_models.py: f32 within 1e-4 of max|eager|; bf16 within
2^-5 (a gather is exact; the add and the LayerNorm round a few times in bf16).
An out-of-range id must fail the execution with a clear message, not read
outside the table.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "python"))
from neuroncc import export, toolchain  # noqa: E402

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2.0 ** -5}


class TokenEmbedding(torch.nn.Module):
    def __init__(self, vocab=300, hidden=64, max_seq=16):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, hidden)
        self.positions = torch.nn.Parameter(torch.randn(max_seq, hidden) * 0.1)
        self.norm = torch.nn.LayerNorm(hidden)

    def forward(self, ids):
        return self.norm(self.tokens(ids) + self.positions[: ids.shape[1]])


class EmbeddingEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="neuroncc-embedding-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def compile(self, dtype, opt):
        torch.manual_seed(0)
        model = TokenEmbedding().to(dtype).eval()
        ids = torch.randint(0, 300, (2, 16), dtype=torch.int64)
        path = os.path.join(self.tmp, "embed_%s_O%d.pb" % (str(dtype).split(".")[-1], opt))
        with torch.no_grad():
            ex = export.export_aten(model, (ids,), path)
            ref = model(ids).float().numpy()
        neff = path[:-3] + ".neff"
        toolchain.compile_graph(path, neff, opt=opt)
        return ex, ids, ref, neff

    def test_matches_eager(self):
        for dtype in [torch.float32, torch.bfloat16]:
            for opt in [0, 2]:
                with self.subTest(dtype=dtype, opt=opt):
                    ex, ids, ref, neff = self.compile(dtype, opt)
                    (name,) = list(ex.input_values)
                    (y,) = toolchain.run_neff(neff, {name: ids.numpy()}, os.path.join(self.tmp, "out"),
                                              keep_dtypes=True)
                    err = np.max(np.abs(y - ref)) / np.max(np.abs(ref))
                    self.assertLessEqual(err, TOLERANCE[dtype])

    def test_out_of_range_id_is_refused(self):
        ex, ids, ref, neff = self.compile(torch.float32, 2)
        (name,) = list(ex.input_values)
        bad = ids.numpy().copy()
        bad[1, 3] = 300  # one past the table
        path = os.path.join(self.tmp, "bad_ids.npy")
        np.save(path, bad)
        proc = subprocess.run([toolchain.tool("neuron-run"), neff, "--input", "%s=@%s" % (name, path),
                               "--output-dir", os.path.join(self.tmp, "bad")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("300", proc.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
