"""Integer tensors through ops whose float Scalar arguments eager converts to
the integer dtype (addmm's beta and alpha, masked_fill's value, threshold's
bounds, hardtanh's limits, an integer arange's start and step), and through ops the device computes on f32
copies (convolution, bilinear, masked_scatter), compared with eager exactly.
Each result is multiplied by 3 in the graph, so a fractional value held
inside the graph (2.7 instead of 2) shows in the output."""
import unittest

import torch
import torch.nn.functional as F

from e2e_common import ComparedWithEager


def ints(shape, lo, hi, dtype=torch.int64, seed=0):
    return torch.randint(lo, hi, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.int64).to(dtype)


class IntegerScalarArguments(ComparedWithEager):
    def test_matmul_coefficients_truncate(self):
        bias, m, n = ints((3, 5), -9, 10, seed=1), ints((3, 4), -9, 10, seed=2), ints((4, 5), -9, 10, seed=3)
        v, b1, b2 = ints((4,), -9, 10, seed=4), ints((2, 3, 4), -9, 10, seed=5), ints((2, 4, 5), -9, 10, seed=6)
        self.check(lambda s, a, b: (torch.addmm(s, a, b, beta=1.5, alpha=2.5) * 3,
                                    torch.addmm(s, a, b, beta=0.2, alpha=0.6) * 3,
                                    torch.addmm(s, a, b, beta=-1.7, alpha=-2.9) * 3), [bias, m, n])
        self.check(lambda s, a, x: torch.addmv(s[:, 0], a, x, beta=1.5, alpha=-2.5) * 3, [bias, m, v])
        self.check(lambda s, a, b: (torch.baddbmm(s, a, b, beta=1.5, alpha=2.5) * 3,
                                    torch.addbmm(s, a, b, beta=-1.5, alpha=2.5) * 3), [bias, b1, b2])

    def test_fill_values_and_bounds_truncate(self):
        x = torch.tensor([-3, -2, -1, 0, 1, 2, 3])
        self.check(lambda a: (a.masked_fill(a > 0, 2.7) * 3, a.masked_fill(a > 0, -2.7) * 3,
                              F.threshold(a, -2.5, 7.9) * 3, F.hardtanh(a, -1.5, 2.5) * 3,
                              a.index_add(0, torch.tensor([1, 5]), torch.tensor([5, -4]), alpha=2.5) * 3), [x])
        u = torch.tensor([0, 1, 2, 200, 255], dtype=torch.uint8)
        self.check(lambda a: (a.masked_fill(a > 100, 3.9) * 3, F.hardtanh(a, 1.5, 199.5) * 3), [u])
        flags = torch.tensor([True, False, True])
        self.check(lambda a: (a.masked_fill(~a, 0.5), a.masked_fill(a, 0.0)), [flags])

    def test_integer_arange_truncates_start_and_step(self):
        x = torch.tensor([10])
        self.check(lambda a: (a + torch.arange(-2.5, 5.5, dtype=torch.int64),
                              a + torch.arange(0.5, 5, 1.5, dtype=torch.int64),
                              a + torch.arange(-0.5, 5, 1.9, dtype=torch.int32)), [x])

    def test_python_ints_wrap_into_a_narrow_dtype(self):
        # eager converts the int to the tensor's dtype: uint8 `x > -1` compares with 255
        u = torch.tensor([0, 10, 200, 255], dtype=torch.uint8)
        self.check(lambda a: (a == 266, a > -1, a < -1, a != 256, a >= 300, a // 300, a % 300, torch.fmod(a, 300),
                              torch.div(a, -1, rounding_mode="floor"), a / 300, a == 266.0, a + 300), [u])
        i8 = torch.tensor([-128, -100, -1, 0, 5, 127], dtype=torch.int8)
        self.check(lambda a: (a == 255, a > 200, a // 200, a % 200, a > -200.5), [i8])

    def test_zero_dim_int64_tensors_wrap_into_a_narrow_dtype(self):
        # a 0-d int64 tensor does not promote a uint8 one: eager converts it to uint8 (300 -> 44)
        u = torch.tensor([0, 10, 200, 255], dtype=torch.uint8)
        t300, tm1 = torch.tensor(300), torch.tensor(-1)
        self.check(lambda a: (torch.maximum(a, t300), torch.minimum(a, t300), a > tm1, a == torch.tensor(266),
                              torch.where(a > 5, a, t300), torch.clamp(a, max=t300), a // t300, a % t300, a + t300,
                              torch.maximum(a[0], t300), torch.maximum(a, torch.tensor([300, 1, 2, 3], dtype=torch.int32)),
                              a[torch.tensor(2)] + a), [u])


class IntegerOpsOnFloatCopies(ComparedWithEager):
    def test_integer_convolutions(self):
        x, w, b = ints((2, 3, 9), -5, 6, seed=7), ints((4, 3, 3), -3, 4, seed=8), ints((4,), -9, 10, seed=9)
        self.check(lambda a, k, c: (F.conv1d(a, k, c, padding=1) * 3, F.conv1d(a, k, stride=2)), [x, w, b])
        img, k2 = ints((1, 2, 6, 6), 0, 256, torch.uint8, 10), ints((2, 2, 3, 3), 0, 3, torch.uint8, 11)
        # uint8 sums of products wrap as eager's do
        self.check(lambda a, k: F.conv2d(a, k), [img, k2])

    def test_integer_bilinear(self):
        x1, x2 = ints((3, 4), -5, 6, seed=12), ints((3, 5), -5, 6, seed=13)
        w, b = ints((2, 4, 5), -3, 4, seed=14), ints((2,), -9, 10, seed=15)
        self.check(lambda a, c, k, d: F.bilinear(a, c, k, d) * 3, [x1, x2, w, b])

    def test_integer_masked_scatter(self):
        x = ints((4, 5), -9, 10, seed=16)
        mask = ints((4, 5), 0, 2, seed=17).bool()
        source = ints((20,), -99, 100, seed=18)
        self.check(lambda a, m, s: a.masked_scatter(m, s) * 3, [x, mask, source])
        self.check(lambda a, m, s: a.masked_scatter(m, s), [x.to(torch.uint8), mask, source.to(torch.uint8)])
        self.check(lambda a, m, s: a.masked_scatter(m, s), [x > 0, mask, source > 0])


if __name__ == "__main__":
    unittest.main()
