"""Operator commands (SPEC §1, §7, §12): ``pinlog serve``, ``pinlog rescan``, ``pinlog reprocess``,
``pinlog status``.

Thin typer commands; the work is in :mod:`pinlog.core.rescan`, :mod:`pinlog.core.reprocess`
and :mod:`pinlog.core.status`. Commands that send process requests use the process client of a
one-shot core (``needs.running()``, :mod:`pinlog.cli.app`): HTTP when ``PINLOG_AI_BASE_URL`` is
set, otherwise the ai side runs in this process (no rescan loop: only the command's own rounds
run) and the command waits for the accepted jobs to finish before exiting.

``pinlog serve`` binds its port first (a port in use is one line and exit 3, before anything
starts or logs "pinlog started"), then starts the components once
(:func:`pinlog.app.started_components`: a component that refuses to start is one line and exit
2 before the port listens), then runs uvicorn on that socket in the same event loop.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import socket
import time
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pinlog.cli.app import (
    Needs,
    app,
    ask_server,
    config_or_exit,
    database_url_or_exit,
    err_console,
    exit_with_error,
    run_command,
    settings_or_exit,
)

if TYPE_CHECKING:
    from pinlog.composition import Config
    from pinlog.contracts import ProcessClient
    from pinlog.settings import Settings
    from pinlog.core.reprocess import ReprocessReport
    from pinlog.core.rescan import RoundReport

console = Console()


def _ids(values: list[int], limit: int = 20) -> str:
    if not values:
        return "-"
    shown = ", ".join(map(str, values[:limit]))
    return shown + (f", … (+{len(values) - limit})" if len(values) > limit else "")


def _print_round(report: RoundReport) -> None:
    table = Table(title="rescan round", show_header=True)
    table.add_column("step")
    table.add_column("rows", justify="right")
    table.add_column("context ids")
    table.add_row("finalized FAILED (retries exhausted)", str(report.finalized),
                  _ids(report.finalized_ids))
    table.add_row("finalized FAILED (dead-end keyword)", str(report.dead_ends),
                  _ids(report.dead_end_ids))
    table.add_row("ended CANCELLED (half-cancelled anomaly)", str(report.half_cancelled),
                  _ids(report.half_cancelled_ids))
    table.add_row("claimed (retry spent)", str(report.claimed), _ids(report.claimed_ids))
    table.add_row("dispatched (accepted)", str(report.dispatched), _ids(report.dispatched_ids))
    table.add_row("skipped (context deleted)", str(report.skipped_deleted),
                  _ids(report.skipped_deleted_ids))
    table.add_row("skipped (already finished)", str(report.skipped_finished), "")
    table.add_row("failed calls", str(report.failed_calls), _ids(report.failed_call_ids))
    console.print(table)
    console.print(f"round took {report.seconds:.3f} s")
    # "claimed 0" is explained: what is unfinished but not expired yet, and when it expires
    if report.expired_left:
        console.print(f"{report.expired_left} expired row(s) left for the next round "
                      "(beyond the batch size, or locked by another rescan)")
    if report.waiting:
        first = report.first_expires_in or 0.0
        console.print(f"{report.waiting} unfinished row(s) not expired yet (not claimed before "
                      f"their PENDING/PROCESSING expiry); the first expires in {_fmt_age(first)}")
    elif not report.expired_left:
        console.print("no unfinished row is waiting for an expiry")


def _fmt_age(seconds: float | None) -> str:
    from pinlog.core.status import format_age

    return format_age(seconds)


@app.command()
def serve(
    components: str = typer.Option("core,ai", help="Components to run: core, ai or core,ai."),
    host: str | None = typer.Option(None, "--host", help="Listen address (default: PINLOG_HOST, "
                                    "else 127.0.0.1)."),
    port: int | None = typer.Option(None, "--port", min=0, max=65535,
                                    help="Listen port (default: PINLOG_PORT, else 8000)."),
) -> None:
    """Run the HTTP server (uvicorn) with the rescan loop; stops the embedded DB it started."""
    overrides: dict[str, object] = {k: v for k, v in (("host", host), ("port", port))
                                    if v is not None}
    config = config_or_exit(service=True, settings=settings_or_exit(**overrides))
    wanted = tuple(c.strip() for c in components.split(",") if c.strip())
    if not wanted or any(c not in ("core", "ai") for c in wanted):
        exit_with_error("--components must be core, ai or core,ai", 2)
    if "ai" not in wanted and not config.core.dispatch.ai_base_url:
        # a core without an ai side could never dispatch: every note would stay PENDING
        exit_with_error("--components core needs PINLOG_AI_BASE_URL (where the ai side "
                        "listens); without it no note could ever be processed", 2)
    sock = _bound_socket(config.settings.host, config.settings.port)
    url = database_url_or_exit(config.settings)

    # uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown; turn that into a normal
    # exit so the components stop and the embedded database this process started is stopped
    # (atexit does not run on a signal's default action).
    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGINT, _exit)
    asyncio.run(_serve(config, url, wanted, sock))


def _bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not listening yet: nothing is accepted before the
    components have started); exit 3 with one line when the address is in use or not ours."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        exit_with_error(f"cannot listen on {host}:{port}: {exc.strerror or exc} (PINLOG_HOST, "
                        "PINLOG_PORT, --host, --port); nothing was started", 3)
    sock.set_inheritable(True)
    return sock


async def _serve(config: Config, url: str, components: tuple[str, ...],
                 sock: socket.socket) -> None:
    """Start the components once (a refusal — the ai side without its tables or presets — is
    raised here, before the port is bound: one line, exit 2), then serve until SIGTERM/SIGINT:
    uvicorn stops accepting, in-flight requests get the grace, the lifespan stops the process
    registry, then the components stop (running stages get the grace too; what is left is
    logged). A core-only server may start on a database that is not migrated yet: ``/ready``
    answers 503 until it is. ``sock`` is bound already (:func:`_bound_socket`).
    """
    import uvicorn

    from pinlog.app import create_app, started_components

    from pinlog.cli.remote import listen_url, remove_server_file, write_server_file

    settings = config.settings
    async with started_components(config, components, url) as started:  # type: ignore[arg-type]
        app_ = create_app(config, started=started)
        app_.state.server_token = secrets.token_urlsafe(32)  # the commands' key (server.json)

        class Server(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets)
                # it accepts connections now: record where, for the commands of this data
                # directory (pinlog.cli.remote); removed when it stops
                if self.started and "core" in components:
                    port = (self.servers[0].sockets[0].getsockname()[1] if self.servers
                            else settings.port)
                    write_server_file(settings, listen_url(settings.host, port),
                                      app_.state.server_token)

        server = Server(uvicorn.Config(
            app_, host=settings.host, port=settings.port, log_config=None,
            log_level=settings.log_level.lower(),
            timeout_graceful_shutdown=max(1, round(settings.shutdown_grace))))
        try:
            await server.serve(sockets=[sock])
        finally:
            remove_server_file(settings)


@app.command()
def rescan(
    once: bool = typer.Option(False, "--once", help="Run one round, print it, and exit."),
) -> None:
    """Run the rescan + FAILED finalizer: a loop (at most one interval between rounds), or one round.

    Parameters come from PINLOG_RESCAN_INTERVAL, PINLOG_PENDING_EXPIRY,
    PINLOG_PROCESSING_EXPIRY, PINLOG_MAX_RETRIES, PINLOG_RESCAN_BATCH_SIZE,
    PINLOG_RESCAN_CONCURRENCY. Any number of loops may run at once (SKIP LOCKED).
    """
    from pinlog.core.rescan import RescanLoop

    config = config_or_exit(service=not once)
    rescan_config = config.core.rescan

    async def work(needs: Needs) -> None:
        async with needs.running() as parts:
            assert parts.core is not None
            ai = parts.ai
            loop = RescanLoop(needs.engine, rescan_config, parts.core.client)
            if once:
                report = await loop.run_round()
                _print_round(report)
                if ai is not None and report.dispatched:
                    err_console.print("waiting for the in-process ai jobs to finish…")
                    await ai.join()
                return
            running = asyncio.get_running_loop()
            stop = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with suppress(NotImplementedError, RuntimeError):
                    running.add_signal_handler(sig, stop.set)
            from pinlog.composition import replica_rules
            from pinlog.db.process_settings import ProcessRegistry

            registry = ProcessRegistry(needs.engine, replica_rules(config, ("rescan",)),
                                       ("rescan",))
            await registry.start()
            await loop.start()
            err_console.print(
                f"rescan loop running every {rescan_config.interval.total_seconds():g} s "
                "(fixed delay); Ctrl-C to stop")
            await stop.wait()
            await loop.stop()
            await registry.stop()

    run_command(config, work)


@app.command()
def reprocess(
    profile: bool = typer.Option(
        False, "--profile", help="Embeddings made with another profile: both stages → PENDING."),
    presets: bool = typer.Option(
        False, "--presets",
        help="Keywords judged against an older preset version: keyword stage → PENDING."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only count; change nothing."),
    batch_size: int = typer.Option(500, "--batch-size", min=1, help="Rows per transaction."),
    no_dispatch: bool = typer.Option(
        False, "--no-dispatch", help="Do not send requests; leave the rows to the rescan."),
) -> None:
    """Move COMPLETED stages back to PENDING in batches, then dispatch them.

    Old embedding/keyword rows are kept until each new result replaces them.
    """
    from pinlog.core.reprocess import count_candidates
    from pinlog.core.reprocess import reprocess as run_reprocess

    if profile == presets:
        exit_with_error("choose exactly one of --profile or --presets", 2)
    mode = "profile" if profile else "presets"
    config = config_or_exit()
    reprocess_config = config.core.reprocess

    async def work(needs: Needs) -> None:
        engine = needs.engine
        if dry_run:
            n = await count_candidates(engine, reprocess_config, mode)  # type: ignore[arg-type]
            console.print(f"{n} context(s) would be reprocessed (--{mode}, "
                          f"profile {config.profile}); nothing changed (--dry-run)")
            return
        total = await count_candidates(engine, reprocess_config, mode)  # type: ignore[arg-type]
        if total == 0:
            console.print(f"nothing to reprocess (--{mode}, profile {config.profile})")
            return
        progress = Progress(TextColumn("[bold]reprocess --" + mode), BarColumn(),
                            MofNCompleteColumn(), TextColumn("moved {task.fields[moved]}"),
                            TimeElapsedColumn(), console=err_console)
        moved_total = 0

        def on_batch(examined: int, moved: int) -> None:
            nonlocal moved_total
            moved_total += moved
            progress.update(task, advance=examined, moved=moved_total)

        async def go(client: ProcessClient | None) -> ReprocessReport:
            return await run_reprocess(engine, reprocess_config, mode,  # type: ignore[arg-type]
                                       client=client, batch_size=batch_size,
                                       on_batch=on_batch)

        with progress:
            task = progress.add_task("reprocess", total=total, moved=0)
            if no_dispatch:
                report = await go(None)
            else:
                async with needs.running() as parts:
                    assert parts.core is not None
                    report = await go(parts.core.client)
                    if parts.ai is not None and report.dispatch.dispatched:
                        progress.console.print("waiting for the in-process ai jobs to finish…")
                        await parts.ai.join()
        console.print(
            f"reprocess --{mode}: {report.moved} context(s) moved to PENDING in "
            f"{report.batches} batch(es) (target {report.target}); dispatched "
            f"{len(report.dispatch.dispatched)}, failed calls {len(report.dispatch.failed_calls)}"
            "; the rescan recovers the rest")

    run_command(config, work)


@app.command()
def status(
    as_json: bool = typer.Option(False, "--json", help="Print the snapshot as one JSON object."),
    watch: bool = typer.Option(False, "--watch", help="Refresh in place until Ctrl-C."),
    interval: float = typer.Option(2.0, "--interval", min=0.1, max=3600,
                                   help="Seconds between refreshes with --watch."),
    times: int = typer.Option(0, "--times", min=0, hidden=True,
                              help="With --watch: stop after this many refreshes (0: never)."),
) -> None:
    """Show the state machine: rows per stage × status, retries, exhausted rows, failures.

    Asks the running server of this data directory (or PINLOG_SERVER_URL) when there is one,
    otherwise reads the database in-process; both give the same JSON (--json).
    """
    if watch:
        _watch_status(interval, times)
        return
    line = ask_server(lambda server: server.status())
    settings = settings_or_exit() if line is None else None
    if settings is not None:
        line = ask_server(lambda server: server.status(), settings=settings)
    if line is None:
        assert settings is not None
        from pinlog.core.api.routes.ops import status_json

        config = config_or_exit(settings=settings)
        line = run_command(config, lambda needs: status_json(needs.engine, config.core.status))
    if as_json:
        typer.echo(line)
        return
    for renderable in _status_tables(json.loads(line)):
        console.print(renderable)


def _watch_status(interval: float, times: int) -> None:
    """``pinlog status --watch``: the same tables, refreshed in place (rich ``Live``) every
    ``interval`` seconds, from the running server or in-process; Ctrl-C ends it (exit 0)."""
    from rich.console import Group
    from rich.live import Live

    def frame(line: str, shown: int) -> Group:
        return Group(*_status_tables(json.loads(line)),
                     f"refresh {shown} every {interval:g} s; Ctrl-C to stop")

    settings: Settings | None = None
    remote_line = ask_server(lambda server: server.status())
    if remote_line is None:
        settings = settings_or_exit()
        remote_line = ask_server(lambda server: server.status(), settings=settings)
    try:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            if remote_line is not None:
                shown = 0
                while True:
                    shown += 1
                    live.update(frame(remote_line, shown), refresh=True)
                    if times and shown >= times:
                        return
                    time.sleep(interval)
                    remote_line = ask_server(lambda server: server.status(),
                                             settings=settings) or remote_line
            from pinlog.core.api.routes.ops import status_json

            config = config_or_exit(settings=settings or settings_or_exit())

            async def work(needs: Needs) -> None:
                shown = 0
                while True:
                    shown += 1
                    live.update(frame(await status_json(needs.engine, config.core.status), shown),
                                refresh=True)
                    if times and shown >= times:
                        return
                    await asyncio.sleep(interval)

            run_command(config, work)
    except KeyboardInterrupt:
        pass


def _status_tables(snap: dict[str, Any]) -> list[Any]:
    """The tables of ``pinlog status`` from its JSON (:func:`pinlog.core.status.snapshot_json`);
    a disagreement between live processes is printed on stderr."""
    from pinlog.core.status import ANOMALY_MEANING

    out: list[Any] = []
    rows = Table(title="state rows (stage × status)")
    rows.add_column("stage")
    statuses = list(next(iter(snap["rows"].values())))
    for name in statuses:
        rows.add_column(name, justify="right")
    for stage, counts in snap["rows"].items():
        rows.add_row(stage, *(str(counts[s]) for s in statuses))
    out.append(rows)

    retry = Table(title=f"unfinished rows by retry_count (max {snap['max_retries']})")
    retry.add_column("retry_count", justify="right")
    retry.add_column("rows", justify="right")
    for count, n in sorted(snap["retry_distribution"].items(), key=lambda kv: int(kv[0])):
        retry.add_row(str(count), str(n))
    if not snap["retry_distribution"]:
        retry.add_row("-", "0")
    out.append(retry)

    summary = Table(title="rescan picture", show_header=False)
    summary.add_column("what")
    summary.add_column("value", justify="right")
    summary.add_row("unfinished rows", str(snap["unfinished"]))
    summary.add_row("exhausted but unfinished (should reach 0 within an interval)",
                    str(snap["exhausted_unfinished"]))
    summary.add_row("dead-end keyword stages (embedding FAILED)", str(snap["dead_ends"]))
    summary.add_row("oldest unfinished (rescan clock)", _fmt_age(snap["oldest_unfinished_seconds"]))
    out.append(summary)

    processes = Table(title="live processes (rule-relevant settings)")
    for col in ("process", "started", "settings"):
        processes.add_column(col)
    for p in snap["processes"]:
        processes.add_row(p["label"], p["started_at"],
                          ", ".join(f"{k}={v}" for k, v in sorted(p["settings"].items())))
    if not snap["processes"]:
        processes.add_row("-", "", "none recorded")
    out.append(processes)
    for diff in snap["setting_differences"]:
        err_console.print(f"ERROR: live processes disagree: {diff}", style="red",
                          markup=False, highlight=False)
    anomalies = Table(title="anomalies by kind")
    anomalies.add_column("kind")
    anomalies.add_column("rows", justify="right")
    anomalies.add_column("meaning")
    for kind, n in snap["anomalies"].items():
        anomalies.add_row(kind, str(n), ANOMALY_MEANING.get(kind, ""))
    out.append(anomalies)

    failures = Table(title="recent failures")
    for col in ("context", "embedding", "keyword", "retries", "at", "last_error"):
        failures.add_column(col)
    for f in snap["recent_failures"]:
        failures.add_row(str(f["context_id"]), f["embedding_status"], f["keyword_status"],
                         str(f["retry_count"]), f["at"] or "", f["last_error"] or "-")
    if not snap["recent_failures"]:
        failures.add_row("-", "", "", "", "", "none")
    out.append(failures)
    return out
