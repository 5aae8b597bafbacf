"""Run the rule mutations (``python -m tests.mutations [--jobs N] [--only NAME ...] [--list]``).

For every mutation of :data:`tests.mutations.catalogue.MUTATIONS`:

1. copy the tree (``src/``, ``tests/``, ``pyproject.toml``) to a temporary directory — the
   working tree is never modified;
2. replace the snippet (it must occur exactly the stated number of times, else the run fails:
   the list must follow the code);
3. run ONLY the mutation's tests on that copy (``PYTHONPATH`` puts the copy's ``src`` first, so
   the copy's package and its ``.sql`` files are what runs), against one embedded PostgreSQL
   shared by all runs (each pytest session creates its own database on it);
4. killed = at least one of those tests failed (pytest exit 1); survived = all passed (exit 0);
   anything else (collection error, unknown node id, timeout) is an error.

First the unmutated copy runs every named test once (the baseline): a test that already fails
could not tell a mutation from a bug. The run fails (exit 1) on any survivor, missing snippet,
error or failing baseline, and prints a table ``mutation → tests that caught it``.

Options: ``--jobs N`` concurrent pytest runs (default 2), ``--only NAME`` (repeatable) run a
subset, ``--list`` print the catalogue, ``--markdown`` print the table as Markdown,
``--timeout S`` per pytest run (default 300 s). With ``PINLOG_TEST_DATABASE_URL`` set, that server
is used instead of starting an embedded one.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.mutations.catalogue import MUTATIONS, Mutation

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("src", "tests", "pyproject.toml")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache")
_OUTCOME = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - .*)?$", re.M)


@dataclass
class Result:
    """Outcome of one pytest run: ``status`` is killed | survived | error | passed | failed."""

    name: str
    status: str
    seconds: float
    caught_by: list[str] = field(default_factory=list)
    detail: str = ""


def problems(mutations: Sequence[Mutation], root: Path = ROOT) -> list[str]:
    """What is wrong with the catalogue against the tree at ``root``: duplicate names, snippets
    not found exactly ``occurrences`` times, no-op replacements, test files or functions that do
    not exist. Empty when the catalogue is in order."""
    found: list[str] = []
    seen: set[str] = set()
    for m in mutations:
        if m.name in seen:
            found.append(f"{m.name}: duplicate name")
        seen.add(m.name)
        path = root / m.path
        if not path.is_file():
            found.append(f"{m.name}: {m.path} does not exist")
        else:
            count = path.read_text(encoding="utf-8").count(m.original)
            if count != m.occurrences:
                found.append(f"{m.name}: snippet found {count} times in {m.path}, "
                             f"expected {m.occurrences}")
        if m.original == m.replacement:
            found.append(f"{m.name}: replacement equals the original")
        if not m.tests:
            found.append(f"{m.name}: no tests named")
        for node in m.tests:
            file, _, func = node.partition("::")
            func = func.split("[", 1)[0].split("::")[-1]
            test_file = root / file
            if not test_file.is_file():
                found.append(f"{m.name}: test file {file} does not exist")
            elif not func or not re.search(rf"^\s*(async )?def {re.escape(func)}\(",
                                           test_file.read_text(encoding="utf-8"), re.M):
                found.append(f"{m.name}: no test function {func!r} in {file}")
    return found


def copy_tree(target: Path, root: Path = ROOT) -> Path:
    """Copy what the tests need (``src``, ``tests``, ``pyproject.toml``) to ``target``."""
    target.mkdir(parents=True)
    for name in COPIED:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=IGNORED)
        else:
            shutil.copy2(source, target / name)
    return target


def apply(mutation: Mutation, tree: Path) -> None:
    """Apply ``mutation`` to the copy at ``tree`` (every occurrence)."""
    path = tree / mutation.path
    text = path.read_text(encoding="utf-8")
    if text.count(mutation.original) != mutation.occurrences:
        raise ValueError(f"{mutation.name}: snippet not found as stated in {mutation.path}")
    path.write_text(text.replace(mutation.original, mutation.replacement), encoding="utf-8")


def _env(tree: Path, db_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=os.pathsep.join([str(tree / "src"), str(tree)]),
               PINLOG_TEST_DATABASE_URL=db_url, PYTHONDONTWRITEBYTECODE="1",
               PYTHONUNBUFFERED="1")
    return env


def check_isolation(tree: Path, db_url: str) -> None:
    """Fail unless a subprocess with the runner's environment imports ``pinlog`` and ``tests``
    from the copy (not from the working tree or an installed package)."""
    out = subprocess.run(
        [sys.executable, "-c", "import pinlog, tests; print(pinlog.__file__); print(tests.__file__)"],
        cwd=tree, env=_env(tree, db_url), capture_output=True, text=True, check=True).stdout
    for line in out.split():
        if not Path(line).resolve().is_relative_to(tree.resolve()):
            raise RuntimeError(f"the copy is not what runs: {line} is outside {tree}")


def run_tests(tree: Path, nodes: Sequence[str], db_url: str, timeout: float) -> tuple[int, str]:
    """pytest on ``nodes`` inside ``tree``; returns (exit code, output). Exit -1 = timeout."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE",
           "--no-header", "-o", "addopts=", *nodes]
    try:
        done = subprocess.run(cmd, cwd=tree, env=_env(tree, db_url), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return -1, out + f"\n[timeout after {timeout:.0f} s]"
    return done.returncode, done.stdout + done.stderr


def run_mutation(mutation: Mutation, base: Path, work: Path, db_url: str,
                 timeout: float) -> Result:
    """Copy ``base``, apply ``mutation``, run its tests, classify, remove the copy."""
    started = time.monotonic()
    tree = work / mutation.name
    try:
        shutil.copytree(base, tree)
        apply(mutation, tree)
        code, out = run_tests(tree, mutation.tests, db_url, timeout)
    except Exception as exc:  # noqa: BLE001 - reported as an error of this mutation
        return Result(mutation.name, "error", time.monotonic() - started, detail=repr(exc))
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    seconds = time.monotonic() - started
    caught = sorted({m.group(2) for m in _OUTCOME.finditer(out)})
    if code == 1 and caught:
        return Result(mutation.name, "killed", seconds, caught)
    if code == 0:
        return Result(mutation.name, "survived", seconds, detail=_tail(out))
    return Result(mutation.name, "error", seconds, caught, detail=f"pytest exit {code}\n{_tail(out)}")


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


@contextmanager
def database_server(work: Path) -> Iterator[str]:
    """The maintenance URL of a PostgreSQL server: ``PINLOG_TEST_DATABASE_URL`` if set, else one
    embedded server (pgvector) in ``work``, stopped on exit."""
    external = os.environ.get("PINLOG_TEST_DATABASE_URL")
    if external:
        yield external
        return
    import psycopg

    from pinlog.db.embedded import EmbeddedDatabase, EmbeddedDatabaseError

    server = EmbeddedDatabase(work / "pg-server")
    server.start()
    try:
        url = server.url("postgres")
        # A throwaway server: no durability needed. Without fsync the ~50 test databases cost
        # little I/O on a shared machine and the shutdown checkpoint is quick.
        with psycopg.connect(url, autocommit=True) as conn:
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")
        yield url
    finally:
        try:
            server.stop(timeout=120)
        except EmbeddedDatabaseError:
            # still checkpointing under load: immediate shutdown (its data is thrown away)
            print("warning: the mutation database did not stop in time; immediate shutdown",
                  file=sys.stderr)
            _quit_postmaster(work / "pg-server")


def _quit_postmaster(data_dir: Path) -> None:
    """Immediate shutdown (SIGQUIT) of the postmaster whose pid file is under ``data_dir``."""
    import signal

    for pid_file in data_dir.rglob("postmaster.pid"):
        try:
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)
        except (OSError, ValueError, IndexError):
            pass


def _caught(nodes: Sequence[str]) -> str:
    """``file::test[case]`` per caught test; several failing cases of one parametrized test are
    folded into ``file::test (N cases)``."""
    groups: dict[str, list[str]] = {}
    for node in nodes:
        file, _, rest = node.partition("::")
        groups.setdefault(f"{Path(file).stem}::{rest.split('[', 1)[0]}", []).append(
            f"{Path(file).stem}::{rest}")
    return ", ".join(members[0] if len(members) == 1 else f"{key} ({len(members)} cases)"
                     for key, members in groups.items()) or "-"


def report(results: Sequence[Result], mutations: Sequence[Mutation], *, markdown: bool) -> str:
    """The table: mutation, rule, result, tests that caught it, seconds."""
    by_name = {m.name: m for m in mutations}
    rows = []
    for r in results:
        m = by_name.get(r.name)
        caught = _caught(r.caught_by)
        rows.append((r.name, m.path.split("/")[-1] if m else "", r.status, caught,
                     f"{r.seconds:.1f}"))
    if markdown:
        out = ["| mutation | file | result | caught by | s |", "|---|---|---|---|---|"]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(out)
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name:<{width}}  {file:<14} {status:<8} {secs:>5}s  {caught}"
                     for name, file, status, caught, secs in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutations", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)

    mutations = [m for m in MUTATIONS if not args.only or m.name in args.only]
    unknown = set(args.only) - {m.name for m in MUTATIONS}
    if unknown:
        print(f"unknown mutation(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if args.list:
        for m in mutations:
            print(f"{m.name}  [{m.path}]  {m.rule}\n    " + "\n    ".join(m.tests))
        return 0
    found = problems(MUTATIONS)
    if found:
        print("mutation catalogue out of date:\n  " + "\n  ".join(found), file=sys.stderr)
        return 1

    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="pinlog-mutations-"))
    try:
        with database_server(work) as db_url:
            base = copy_tree(work / "base")
            check_isolation(base, db_url)
            nodes = list(dict.fromkeys(n for m in mutations for n in m.tests))
            t0 = time.monotonic()
            code, out = run_tests(base, nodes, db_url, args.timeout)
            baseline = Result("(baseline: unmutated)", "passed" if code == 0 else "failed",
                              time.monotonic() - t0, detail=_tail(out))
            print(f"baseline: {len(nodes)} test node ids on the unmutated copy: "
                  f"{baseline.status} ({baseline.seconds:.1f} s)", flush=True)
            if code != 0:
                print(baseline.detail, file=sys.stderr)
                return 1
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                futures = [pool.submit(run_mutation, m, base, work, db_url, args.timeout)
                           for m in mutations]
                results = []
                for future in futures:
                    result = future.result()
                    results.append(result)
                    print(f"  {result.name}: {result.status} ({result.seconds:.1f} s)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(report(results, mutations, markdown=args.markdown))
    by_name = {m.name: m for m in mutations}
    for r in results:
        caught = {node.split("[", 1)[0] for node in r.caught_by}
        idle = [n for n in by_name[r.name].tests if r.status == "killed"
                and n.split("[", 1)[0] not in caught and n not in r.caught_by]
        if idle:
            print(f"note: {r.name}: listed but did not catch it: {', '.join(idle)}")
    bad = [r for r in results if r.status != "killed"]
    for r in bad:
        print(f"\n{r.name}: {r.status.upper()}\n{r.detail}", file=sys.stderr)
    killed = len(results) - len(bad)
    survivors = sum(r.status == "survived" for r in results)
    errors = sum(r.status == "error" for r in results)
    print(f"\n{len(results)} mutations: {killed} killed, {survivors} survived, {errors} errors; "
          f"{time.monotonic() - started:.0f} s wall clock with --jobs {args.jobs}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
