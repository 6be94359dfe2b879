"""The packages' layers: infra/ (database URLs, redaction, the helper process) imports none of the
others and all may import it; forecaster/ (the ML core) imports none of the others but infra/;
monitoring/ (the forecast log and the monitor) imports only forecaster/; service/ and pipelines/
use both and neither imports the other. Two functions cross, each named with why in EXCEPTIONS."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "infra": {"forecaster", "monitoring", "service", "pipelines"},
    "forecaster": {"monitoring", "service", "pipelines"},
    "monitoring": {"service", "pipelines"},
    "service": {"pipelines"},
    "pipelines": {"service"},
}
# (file, function) allowed to cross: the CLI's `serve` starts the app; the Python API's `log`
# hands a fitted model to pipelines/, the only writer to MLflow tracking (docs/layout.md)
EXCEPTIONS = {("pipelines/commands/serving.py", "serve"), ("forecaster/api.py", "log_to_mlflow")}


def crossings(package: str) -> list[str]:
    found = []
    for path in sorted((REPO / package).rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text())
        for function, node in imports_with_their_function(tree):
            names = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            )
            for name in names:
                top = name.split(".")[0]
                if top in FORBIDDEN[package] and (relative, function) not in EXCEPTIONS:
                    found.append(f"{relative}:{node.lineno} imports {name}")
    return found


def imports_with_their_function(tree: ast.Module):
    """Every import, with the name of the top-level function it is in (None at module level)."""
    for top in tree.body:
        function = top.name if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef) else None
        for node in ast.walk(top):
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield function, node


@pytest.mark.parametrize("package", FORBIDDEN)
def test_no_package_imports_a_layer_it_must_not(package):
    assert crossings(package) == []
