import sys
from pathlib import Path

import pytest

# The tests share small helpers (tests/marks.py) without being a package.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_gpus: the test uses the machine's real CUDA devices (tests/test_verify_gpu.py)")


@pytest.fixture(autouse=True)
def _no_real_gpu_unless_asked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests describe CI's machine, which has no GPU: on a GPU machine verify would report the devices it sees
    (and use them, where there are enough), so every test but the real-device ones hides them as CUDA_VISIBLE_DEVICES
    does."""
    if request.node.get_closest_marker("real_gpus") is None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
