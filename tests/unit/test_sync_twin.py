"""The sync saver is generated from the async one and must be what the generator gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_saver_py_is_generated_from_aio_py() -> None:
    check = subprocess.run([sys.executable, str(ROOT / "tools" / "async_to_sync.py"), "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
