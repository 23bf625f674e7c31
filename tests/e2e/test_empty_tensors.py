#!/usr/bin/env python3
"""Tensors with no elements (docs/compiler.md, "Import"): graph inputs and node
results with a 0-sized dim are empty constants from import on; the ops that make
something of nothing fold there (a cat skips empty pieces, a reduction over
nothing is its identity, a matmul over K = 0 is its bias or zeros), and an empty
graph output is declared with 0 bytes and written by no kernel. Each case is
compiled at -O0 and -O2, run (empty inputs and outputs bound as 0-byte tensors,
nrt_tensor_allocate_empty), and compared with PyTorch eager; the timing-only
profile must match a full run's.
"""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from neuroncc import export as ex  # noqa: E402
from neuroncc import aten_graph_pb2 as pb  # noqa: E402
from neuroncc import toolchain  # noqa: E402

randn = common.seeded_randn


class EmptyTensors(common.ComparedWithEager):
    def check_timing(self):
        name = "%s_%d_O2" % (self.id().split(".")[-1], self.count - 1)
        self.assertTrue(toolchain.timing_only_matches(os.path.join(self.tmp, name + ".neff"), self.tmp))

    def test_kv_cache_that_starts_empty(self):
        # The first decoding step of a cache kept as tensors: past keys and values of
        # length 0, concatenated with this step's, returned as the next cache.
        def step(q, k, v, past_k, past_v):
            k2, v2 = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
            s = (q @ k2.transpose(-1, -2)) / 2.0
            return s.softmax(-1) @ v2, k2, v2
        for dtype in common.FLOAT_DTYPES:
            q, k, v = (randn(1, 2, 5, 4, seed=i).to(dtype) for i in range(3))
            empty = torch.zeros(1, 2, 0, 4, dtype=dtype)
            self.check(step, (q, k, v, empty, empty))
            self.check_timing()

    def test_empty_slices_splits_and_outputs(self):
        x = randn(4, 8, seed=3)
        self.check(lambda x: (torch.cat([x, x[:, :0], x[:, 2:2]], 1) * 2, (x * 2)[:, 3:3],
                              [t + 1 for t in torch.split(x, [3, 0, 5], dim=1)], torch.topk(x, 0)[0],
                              x.index_select(0, torch.zeros(0, dtype=torch.long))), (x,))
        # every output empty: a NEFF with no kernel
        self.check(lambda x: x[:, :0] * 2, (x,))
        self.check_timing()

    def test_reductions_over_nothing(self):
        # Eager's identities: sum 0, mean NaN, var and std NaN, prod 1, any False,
        # all True, count 0, the 2-norm and inf-norm 0.
        x = randn(4, 8, seed=4)
        self.check(lambda x: (x[:, :0].sum(-1), x[:, :0].mean(-1), x[:, :0].var(-1), x[:, :0].std(-1),
                              torch.var_mean(x[:, :0], -1)[1], x[:, :0].prod(-1), x[:, :0].any(-1),
                              x[:, :0].all(-1), x[:, :0].count_nonzero(-1), x[:, :0].norm(dim=-1),
                              x[:, :0].norm(p=float("inf"), dim=-1), x + x[:, :0].sum(-1, keepdim=True),
                              x[:, :0].sum(-1, dtype=torch.int64)), (x,))

    def test_matmuls_over_nothing(self):
        # K = 0: zeros, or the bias (times beta); an empty batch or empty rows.
        x, w, b = torch.zeros(4, 0), torch.zeros(6, 0), randn(6, seed=5)
        self.check(lambda x, w, b: (F.linear(x, w, b), x @ w.t(), torch.addmm(b, x, w.t(), beta=0.5)), (x, w, b))
        a, c = torch.zeros(0, 3, 4), torch.zeros(0, 4, 5)
        self.check(lambda a, c, y: (a @ c, F.layer_norm(y[:0], (8,)), y.sum()), (a, c, randn(3, 8, seed=6)))

    def test_empty_inputs_of_integer_types(self):
        # Empty index tensors (embedding of no tokens) and bool masks.
        w = randn(10, 8, seed=7)
        ids, mask = torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 8, dtype=torch.bool)
        self.check(lambda w, i, m: (F.embedding(i, w), w.sum(0), w[:0].masked_fill(m, 1.0)), (w, ids, mask))

    def test_writes_of_nothing(self):
        # An empty index or source writes nothing: self comes back; isin against
        # no test elements finds nothing.
        x, ids = randn(3, 4, seed=8), torch.zeros(0, dtype=torch.long)
        self.check(lambda x, i: (x.index_add(0, i, x[:0]), x.index_copy(1, i, x[:, :0]),
                                 x.index_reduce(0, i, x[:0], "amax"), x.scatter(1, i.view(1, 0), x[:1, :0]),
                                 x.scatter_reduce(0, i.view(0, 1), x[:0, :1], "sum"),
                                 x.masked_scatter(x > 100, x[:0]), torch.isin(i.new_ones(3), i),
                                 torch.isin(i.new_ones(3), i, invert=True)),
                   (x, ids))

    def compile_error(self, path):
        proc = subprocess.run([toolchain.tool("neuron-cc"), "compile", path, "-O2", "--output", path + ".neff"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        return proc.stderr

    def test_other_ops_do_not_take_empty_operands(self):
        # Only reductions, matmuls, cat, writes and isin make a result with elements of an
        # empty operand;
        # any other op is refused clearly (a pad of an empty slice; a graph whose recorded
        # shapes disagree, flip of an empty input recorded [3, 4], aborted in the importer).
        path = os.path.join(self.tmp, "pad_empty.pb")
        ex.export_aten(lambda x: F.pad(x[:, :0], (1, 1)), [randn(3, 4)], path)
        self.assertIn("is an empty tensor (0 elements) and the result is not", self.compile_error(path))
        path = os.path.join(self.tmp, "flip_mismatch.pb")
        ex.export_aten(lambda x: torch.flip(x, [0]) * 2, [randn(3, 4)], path)
        g = pb.Graph()
        with open(path, "rb") as f:
            g.ParseFromString(f.read())
        g.inputs[0].meta.shape[0] = 0
        with open(path, "wb") as f:
            f.write(g.SerializeToString())
        self.assertIn("is an empty tensor (0 elements) and the result is not", self.compile_error(path))


if __name__ == "__main__":
    unittest.main()
