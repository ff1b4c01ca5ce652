"""Make the plugin importable from a checkout, when it is not installed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("berth_gpu_affinity") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
