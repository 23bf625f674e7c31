"""uint8, int8 and int16 graph inputs, outputs, constants and results, compared
with eager exactly: images read as uint8, arithmetic that wraps around as
eager's does, casts from floats, and narrow results returned."""
import unittest

import torch

from e2e_common import ComparedWithEager


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

    def test_narrow_constants(self):
        lut = ints((6,), 0, 256, torch.uint8, 6)
        table = ints((2, 6), -128, 128, torch.int8, 7)
        x = ints((2, 6), 0, 256, torch.uint8, 8)
        self.check(lambda a: (a + lut, table * 2, (table.float() * a).sum(1)), [x])

    def test_empty_narrow_tensors(self):
        self.check(lambda a, b: (a + 1, b.to(torch.uint8), a.sum()),
                   [torch.zeros(0, 4, dtype=torch.uint8), torch.zeros(3, 0)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
