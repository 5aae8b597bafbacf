"""SPEC §1: the ai package imports nothing from the core package and its code/SQL names no
``core.`` table; the core package imports nothing from the ai package nor the composition root
(``pinlog.composition``, which imports both). Checked statically (ast for imports, a scan of .py
and .sql files for tables); ``lint-imports`` checks the same contracts (pyproject.toml)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

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


def test_the_checks_catch_violations():
    assert _core_imports("import pinlog.core.api")
    assert _core_imports("from pinlog.core import runtime")
    assert _core_imports("from pinlog import core")
    assert _core_imports("from pinlog.core.rescan import claim")
    assert _core_imports("import importlib\nimportlib.import_module('pinlog.core.api')")
    assert not _core_imports("from pinlog import metrics\nimport pinlog.contracts")
    assert _ai_side_imports("from pinlog.ai.search import ProfileMismatch")
    assert _ai_side_imports("import pinlog.ai")
    assert _ai_side_imports("from pinlog import ai")
    assert _ai_side_imports("def f():\n    from pinlog.composition import running_components")
    assert _ai_side_imports("import importlib\nimportlib.import_module('pinlog.ai.runtime')")
    assert not _ai_side_imports("from pinlog.contracts import SearchRequest\nimport pinlog.aix")
    assert _core_tables("SELECT body FROM core.context WHERE id = :id")
    assert _core_tables('q = "select * from CORE.member"')
    assert _core_tables('SELECT 1 FROM "core"."record"')
    assert not _core_tables("SELECT * FROM ai.context_ai_state")
    assert not _core_tables("see pinlog.core.rescan for the claim")


def test_ai_package_never_imports_core():
    files = sorted(AI_DIR.rglob("*.py"))
    assert files
    offenders = {str(p.relative_to(AI_DIR)): _core_imports(p.read_text(encoding="utf-8"))
                 for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_core_package_never_imports_ai_or_the_composition_root():
    files = sorted(CORE_DIR.rglob("*.py"))
    assert files
    offenders = {str(p.relative_to(CORE_DIR)): _ai_side_imports(p.read_text(encoding="utf-8"))
                 for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_ai_code_and_sql_name_no_core_table():
    files = sorted([*AI_DIR.rglob("*.py"), *AI_DIR.rglob("*.sql")])
    assert any(p.suffix == ".sql" for p in files)
    offenders = {str(p.relative_to(AI_DIR)): _core_tables(p.read_text(encoding="utf-8"))
                 for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}
