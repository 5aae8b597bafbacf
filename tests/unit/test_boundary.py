"""SPEC §1: the ai package imports nothing from the core package and its code/SQL names no
``core.`` table; the core package imports nothing from the ai package nor the composition root
(``pinlog.composition``, which imports both). Checked statically (ast for imports, a scan of .py
and .sql files for tables); ``lint-imports`` checks the same contracts (pyproject.toml)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import pinlog.ai
import pinlog.core

AI_DIR = Path(pinlog.ai.__file__).parent
CORE_DIR = Path(pinlog.core.__file__).parent
#: ``core.<table>`` (optionally quoted), not preceded by a word or a dot (``pinlog.core.x`` is a
#: module path, caught by the import check instead).
CORE_TABLE = re.compile(r'(?<![\w.])"?core"?\s*\.\s*"?[a-z_]+', re.IGNORECASE)


def _imports_of(source: str, package: str) -> list[str]:
    """Every import of ``pinlog.<package>`` (or a submodule) in ``source``, however spelled."""
    full = f"pinlog.{package}"
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names
                      if a.name == full or a.name.startswith(full + ".")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module == full or module.startswith(full + "."):
                found.append(module)
            elif module == "pinlog" and any(a.name == package for a in node.names):
                found.append(f"from pinlog import {package}")
            elif node.level and any(a.name == package for a in node.names) and not module:
                found.append(f"relative import of {package}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                "import_module", "__import__"):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and str(arg.value).startswith(full):
                    found.append(str(arg.value))
    return found


def _core_imports(source: str) -> list[str]:
    return _imports_of(source, "core")


def _ai_side_imports(source: str) -> list[str]:
    """Imports core must not have: the ai package and the composition root."""
    return _imports_of(source, "ai") + _imports_of(source, "composition")


def _core_tables(text: str) -> list[str]:
    return [m.group(0).strip() for m in CORE_TABLE.finditer(text)]


CHECK_CASES = [  # (check, source, is a violation)
    (_core_imports, "import pinlog.core.api", True),
    (_core_imports, "from pinlog.core import runtime", True),
    (_core_imports, "from pinlog import core", True),
    (_core_imports, "from pinlog.core.rescan import claim", True),
    (_core_imports, "import importlib\nimportlib.import_module('pinlog.core.api')", True),
    (_core_imports, "from pinlog import metrics\nimport pinlog.contracts", False),
    (_ai_side_imports, "from pinlog.ai.search import ProfileMismatch", True),
    (_ai_side_imports, "import pinlog.ai", True),
    (_ai_side_imports, "from pinlog import ai", True),
    (_ai_side_imports, "def f():\n    from pinlog.composition import running_components", True),
    (_ai_side_imports, "import importlib\nimportlib.import_module('pinlog.ai.runtime')", True),
    (_ai_side_imports, "from pinlog.contracts import SearchRequest\nimport pinlog.aix", False),
    (_core_tables, "SELECT body FROM core.context WHERE id = :id", True),
    (_core_tables, 'q = "select * from CORE.member"', True),
    (_core_tables, 'SELECT 1 FROM "core"."record"', True),
    (_core_tables, "SELECT * FROM ai.context_ai_state", False),
    (_core_tables, "see pinlog.core.rescan for the claim", False),
]


@pytest.mark.parametrize(("check", "source", "violation"), CHECK_CASES)
def test_the_checks_catch_violations(check, source, violation):
    assert bool(check(source)) is violation


def _offenders(root: Path, files: list[Path], check: Callable[[str], list[str]]) -> dict[str, list[str]]:
    """``{relative path: findings}`` for every file of ``files`` where ``check`` finds something."""
    assert files
    found = {str(p.relative_to(root)): check(p.read_text(encoding="utf-8")) for p in files}
    return {k: v for k, v in found.items() if v}


def test_ai_package_never_imports_core():
    assert _offenders(AI_DIR, sorted(AI_DIR.rglob("*.py")), _core_imports) == {}


def test_core_package_never_imports_ai_or_the_composition_root():
    assert _offenders(CORE_DIR, sorted(CORE_DIR.rglob("*.py")), _ai_side_imports) == {}


def test_ai_code_and_sql_name_no_core_table():
    files = sorted([*AI_DIR.rglob("*.py"), *AI_DIR.rglob("*.sql")])
    assert any(p.suffix == ".sql" for p in files)
    assert _offenders(AI_DIR, files, _core_tables) == {}
