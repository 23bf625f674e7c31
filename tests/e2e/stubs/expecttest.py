"""A stand-in for the `expecttest` package, which Debian does not ship.

torch.testing._internal.common_utils subclasses expecttest.TestCase; the
OpInfo sweep only needs the import to succeed. assertExpectedInline compares
plainly (no rewriting of the test file, which the real package does with
EXPECTTEST_ACCEPT=1). Put on sys.path by tests/e2e/opinfo_sweep.py only.
"""
import os
import unittest

# The real package reads EXPECTTEST_ACCEPT; common_utils checks ACCEPT at import.
ACCEPT = os.environ.get("EXPECTTEST_ACCEPT", "0") not in ("", "0")


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 - the real package's name
        self.assertEqual(actual, expect)

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):  # noqa: N802
        with self.assertRaises(exc_type) as cm:
            callable(*args, **kwargs)
        self.assertEqual(str(cm.exception), expect)
