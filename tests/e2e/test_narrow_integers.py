"""uint8, int8 and int16 graph inputs, outputs, constants and results, compared
with eager exactly: images read as uint8, arithmetic that wraps around as
eager's does, casts from floats, and narrow results returned."""
import os
import unittest

import numpy as np
import torch
import torch.nn.functional as F

from e2e_common import ComparedWithEager, device_array, ex, toolchain


def ints(shape, lo, hi, dtype, seed=0):
    return torch.randint(lo, hi, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.int64).to(dtype)


class NarrowIntegers(ComparedWithEager):
    def test_uint8_image_normalized(self):
        mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
        img = ints((2, 3, 8, 8), 0, 256, torch.uint8)
        self.check(lambda x: (x.float() / 255 - mean) / std, [img])
        self.check(lambda x: x.to(torch.bfloat16) * 0.5, [img])
        self.check(lambda x: x.permute(0, 2, 3, 1).float().mean((1, 2)), [img])

    def test_uint8_arithmetic_wraps(self):
        x, y = ints((4, 33), 0, 256, torch.uint8, 1), ints((4, 33), 0, 256, torch.uint8, 2)
        self.check(lambda a, b: (a + b, a - b, a * 3, -a, a + 200, (a * b) // 7), [x, y])
        self.check(lambda a, b: (torch.maximum(a, b), torch.where(a > b, a, b), a > 128, a.sum(), a.sum(1)), [x, y])
        edges = torch.tensor([[0, 1, 127, 128, 254, 255]], dtype=torch.uint8)
        self.check(lambda a: (a + 1, a - 1, a * 2, a.abs(), 255 - a), [edges])

    def test_int8_and_int16_wrap_signed(self):
        e8 = torch.tensor([[-128, -127, -1, 0, 1, 126, 127]], dtype=torch.int8)
        self.check(lambda a: (a + 1, a - 1, a * 2, -a, a.abs(), a // 3, a % 5), [e8])
        e16 = torch.tensor([[-32768, -32767, -1, 0, 1, 32766, 32767]], dtype=torch.int16)
        self.check(lambda a: (a + 1, a - 1, a * 2, -a, a.abs()), [e16])
        x = ints((3, 17), -128, 128, torch.int8, 3)
        self.check(lambda a: (a * a, (a.float() * 0.5).to(torch.int8), a.to(torch.int16) * 300), [x])

    def test_casts_into_narrow_types(self):
        # Out of range, eager's CPU kernels truncate toward zero and wrap.
        f = torch.tensor([[0.0, 0.4, 0.6, 1.0, 254.9, 255.5, 300.0, 513.7, -3.7, -200.0, 40000.0, 70000.5]])
        self.check(lambda a: (a.to(torch.uint8), a.to(torch.int8), a.to(torch.int16),
                              (a * 0.999).clamp(0, 255).to(torch.uint8)), [f])
        i = torch.tensor([[-300, -129, -1, 0, 255, 256, 70000]], dtype=torch.int64)
        self.check(lambda a: (a.to(torch.uint8), a.to(torch.int8), a.to(torch.int16)), [i])
        self.check(lambda a: (a > 0).to(torch.uint8) * 255, [torch.randn(3, 5)])

    def test_returned_as_given_and_through_views(self):
        x = ints((2, 6), 0, 256, torch.uint8, 4)
        y = ints((2, 6), -128, 128, torch.int8, 5)
        self.check(lambda a, b: (a, b, a.t(), b.reshape(3, 4), torch.cat([a, a], 1), a[:, 1:4].flip(1)), [x, y])

    def test_image_preprocessing_ops(self):
        # Ops whose results the compiler reshapes before the graph returns them
        # (max over a dim, sort, gather, repeat): the conversion back to uint8
        # stays the last op (a view of a ui8 value once broke the IR).
        img = ints((1, 3, 6, 8), 0, 256, torch.uint8, 9)
        idx = torch.zeros(1, 3, 6, 2, dtype=torch.long)
        self.check(lambda x: (x.max(1), x.sort(-1)[0], x.gather(-1, idx), x.repeat(2, 1, 1, 1),
                              F.max_pool2d(x.float(), 2).to(torch.uint8)), [img])
        self.check(lambda x: (F.interpolate(x, scale_factor=2, mode="nearest"), x.flip(-1)[..., 1:5, 2:7],
                              F.pad(x, (1, 1, 2, 0), value=7), x.cumsum(-1), x.clamp(10, 200), x.argmax(-1),
                              x.index_select(1, torch.tensor([2, 1, 0])), x.bool(), x * 0.5), [img])

    def test_narrow_constants(self):
        lut = ints((6,), 0, 256, torch.uint8, 6)
        table = ints((2, 6), -128, 128, torch.int8, 7)
        x = ints((2, 6), 0, 256, torch.uint8, 8)
        self.check(lambda a: (a + lut, table * 2, (table.float() * a).sum(1)), [x])

    def test_bitwise_ops_of_every_integer_dtype(self):
        for dtype, lo, hi in ((torch.uint8, 0, 256), (torch.int8, -128, 128), (torch.int16, -32768, 32768),
                              (torch.int32, -(1 << 23), 1 << 23), (torch.int64, -(1 << 23), 1 << 23)):
            with self.subTest(dtype=dtype):
                a, b = ints((3, 37), lo, hi, dtype, 11), ints((3, 37), lo, hi, dtype, 12)
                a[0, :4] = torch.tensor([lo, hi - 1, 0, -1 if lo < 0 else 1], dtype=dtype)
                b[0, :4] = torch.tensor([-1 if lo < 0 else hi - 1, lo, hi - 1, 0], dtype=dtype)
                self.check(lambda x, y: (x & y, x | y, x ^ y, ~x), [a, b])
                c = torch.tensor(3, dtype=dtype)
                self.check(lambda x: (x & 0x5A, x | c, x ^ ~c, x & -16), [a])
                self.check_scalar_forms(a)

    def check_scalar_forms(self, a):
        """bitwise_or.Scalar and bitwise_xor.Scalar, which torch 1.13's tracer cannot record
        (`x | 3` fails there): traced as bitwise_and.Scalar, renamed in the graph."""
        for op, eager in (("or", torch.bitwise_or), ("xor", torch.bitwise_xor)):
            for k in (3, -2, 0x5A):
                name = "scalar_%s_%s_%d" % (op, str(a.dtype)[6:], k & 0xFFFF)
                graph = os.path.join(self.tmp, name + ".pb")
                exp = ex.export_aten(lambda x: x & k, (a,), None)
                for node in exp.graph.nodes:
                    node.target = node.target.replace("bitwise_and.Scalar", "bitwise_%s.Scalar" % op)
                ex.write_graph(exp.graph, graph)
                for opt in (0, 2):
                    neff = os.path.join(self.tmp, "%s_O%d.neff" % (name, opt))
                    toolchain.compile_graph(graph, neff, opt=opt)
                    outs = toolchain.run_neff(neff, {n: device_array(v) for n, v in exp.input_values.items()},
                                              os.path.join(self.tmp, name + "-out"), keep_dtypes=True)
                    want = eager(a, k).numpy()
                    self.assertEqual(outs[0].dtype, want.dtype, name)
                    np.testing.assert_array_equal(outs[0], want, err_msg=name)

    def test_shifts_and_unpacking_packed_weights(self):
        packed = ints((4, 16), 0, 256, torch.uint8, 13)
        scale = torch.rand(4, 1) + 0.5
        self.check(lambda w, s: torch.stack([w & 15, (w >> 4) & 15], -1).reshape(4, 32).float().sub(8) * s,
                   [packed, scale])
        x8 = ints((2, 9), -128, 128, torch.int8, 14)
        k8 = ints((2, 9), 0, 8, torch.int8, 15)
        self.check(lambda x, k: (x << 1, x >> 2, x << k, x >> k, x << 7), [x8, k8])
        x64 = ints((2, 9), -(1 << 20), 1 << 20, torch.int64, 16)
        k64 = ints((2, 9), 0, 3, torch.int64, 17)
        u8 = ints((2, 9), 0, 256, torch.uint8, 18)
        self.check(lambda x, k, u: (x << 3, x >> 5, x << k, x >> k, u << 3, u >> k.to(torch.uint8)),
                   [x64, k64, u8])
        t, f = torch.tensor(True), torch.tensor(False)
        self.check(lambda m: (m & t, m | f, m ^ t), [torch.randn(3, 4) > 0])

    def test_integer_matmuls(self):
        # Eager multiplies integer matrices in their dtype (uint8 wraps); the
        # device on f32 copies, exact below 2^24. These were refused by the
        # matmul ops' float-only operand types.
        a, b = ints((4, 8), -5, 5, torch.int64, 19), ints((8, 3), -5, 5, torch.int64, 20)
        self.check(lambda x, y: (x @ y, (x * 100) @ (y * 100), x.int() @ y.int(), x.to(torch.uint8) @ y.to(torch.uint8),
                                 torch.bmm(x.unsqueeze(0), y.unsqueeze(0))), [a, b])
        one = torch.ones(4, 3, dtype=torch.int64)
        self.check(lambda x, y: (torch.addmm(one, x, y, beta=2, alpha=3),
                                 torch.baddbmm(one.unsqueeze(0), x.unsqueeze(0), y.unsqueeze(0))), [a, b])

    def test_empty_narrow_tensors(self):
        self.check(lambda a, b: (a + 1, b.to(torch.uint8), a.sum()),
                   [torch.zeros(0, 4, dtype=torch.uint8), torch.zeros(3, 0)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
