"""Import down, signal up (docs/design.md §2), for imports and for data: the layers contract of
pyproject.toml holds (lint-imports), and a model's relations and a migration's dependencies point
at its own app or at one below it, in the order of that same contract (read from there, so that
there is one order)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from django.apps import apps
from django.db.migrations.loader import MigrationLoader

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"


def layer_of() -> dict[str, int]:
    """Each app's height in the "Import down, signal up" contract (0 for the ground, ``fimone``)."""
    config = tomllib.loads(PYPROJECT.read_text())
    (contract,) = [
        c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == "Import down, signal up"
    ]
    layers = contract["layers"]
    height: dict[str, int] = {}
    for index, layer in enumerate(layers):
        for part in re.split(r"[|:]", layer):
            app = part.strip().strip("()").split(".")[0]
            # fimone is in the contract twice: its project modules on top, its ground at the bottom.
            if app != "fimone":
                height.setdefault(app, len(layers) - index)
    height["fimone"] = 0
    return height


def test_the_contract_names_every_app_of_the_project() -> None:
    ours = {config.label for config in apps.get_app_configs() if Path(config.path).parent == PYPROJECT.parent}

    assert ours - set(layer_of()) == set()


def test_no_model_points_at_a_higher_app() -> None:
    height = layer_of()
    upward = set()
    for model in apps.get_models():
        label = model._meta.app_label
        if label not in height:
            continue
        for field in model._meta.get_fields():
            if not field.is_relation or field.auto_created or field.related_model is None:
                continue
            target = field.related_model._meta.app_label
            if target in height and height[target] > height[label]:
                upward.add((label, model.__name__, field.name))

    assert upward == set()


def test_no_migration_depends_on_a_higher_app() -> None:
    height = layer_of()
    upward = set()
    for (label, name), migration in MigrationLoader(None, ignore_no_migrations=True).disk_migrations.items():
        if label not in height:
            continue
        for target, _ in migration.dependencies:
            if target in height and height[target] > height[label]:
                upward.add((label, name, target))
        # ``run_before`` orders a lower app's migration after this one: it must name a lower app.
        for target, _ in getattr(migration, "run_before", []):
            assert height.get(target, 0) <= height[label], f"{label}.{name} runs before {target}"

    assert upward == set()


def test_no_app_imports_a_higher_one_even_inside_a_function() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint_imports), "--no-cache", "--config", str(PYPROJECT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Import down, signal up KEPT" in done.stdout
