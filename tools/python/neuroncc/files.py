"""Atomic file writes: a temporary file in the destination's directory, then
a rename, so that a reader never sees a partly written file."""
import os
import tempfile


def write_atomic(path, data):
    """Writes `data` (bytes, or str as UTF-8) to `path` atomically."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
