"""Studies write their reports under ``results/<study>/`` of the working directory: run every
tuning test in its own temporary directory so that nothing lands in the repository."""

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
