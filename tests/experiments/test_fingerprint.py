"""The code fingerprint in every cell key: the committed headline is the code's, and no module the
model or a policy is made of can change without the fingerprint changing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pvegym.experiments.config import load_experiment
from pvegym.experiments.record import MODEL_SOURCES, model_fingerprint, model_sources
from pvegym.experiments.runner import plan

ROOT = Path(__file__).resolve().parents[2]
HEADLINE = ROOT / "results" / "field-scenarios" / "manifest.json"


def test_the_committed_headline_was_computed_by_this_code() -> None:
    """``bash scripts/main.sh`` rewrites nothing: every cell of the committed manifest has the key
    the code plans today (the key hashes the code's fingerprint with the cell's config)."""
    import json

    doc = json.loads(HEADLINE.read_text())
    planned = [row.cell.key for row in plan(load_experiment(HEADLINE))]
    committed = [cell["key"] for cell in doc["cells"]]
    assert sorted(set(planned)) == sorted(committed), (
        "results/field-scenarios is stale: the model or a policy changed after it was computed; "
        "regenerate it with `bash scripts/main.sh` in the same change"
    )


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("src")
    for src in MODEL_SOURCES:
        p = ROOT / src
        if p.is_dir():
            shutil.copytree(p, root / src, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (root / src).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, root / src)
    return root


def test_the_fingerprint_covers_every_module_of_the_model_and_the_policies(
    source_copy: Path,
) -> None:
    covered = {f.relative_to(source_copy) for f in model_sources(source_copy)}
    for package in ("pvegym/sim", "pvegym/policies"):
        modules = {f.relative_to(ROOT) for f in (ROOT / package).rglob("*.py")}
        assert modules, package
        assert modules <= covered, sorted(map(str, modules - covered))


def test_the_fingerprint_changes_with_any_module_of_the_model_or_the_policies(
    source_copy: Path,
) -> None:
    """Each module in turn gets one byte more; each time the fingerprint moves."""
    base = model_fingerprint(source_copy)
    assert base == model_fingerprint(ROOT)  # the copy is the tree
    unchanged = []
    for package in ("pvegym/sim", "pvegym/policies"):
        for f in sorted((source_copy / package).rglob("*.py")):
            text = f.read_bytes()
            f.write_bytes(text + b"\n")
            if model_fingerprint(source_copy) == base:
                unchanged.append(str(f.relative_to(source_copy)))
            f.write_bytes(text)
    assert not unchanged, unchanged
    assert model_fingerprint(source_copy) == base
