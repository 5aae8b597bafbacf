"""The ``pinlog`` command talks to a running server (issue 29).

``pinlog serve`` records where it listens in ``<PINLOG_DATA_DIR>/server.json`` once it accepts
connections (:func:`write_server_file`: URL, pid, a fingerprint of its database) and removes the
file when it stops. ``pinlog search``, ``records`` and ``status`` then ask that server's
operator API (``/ops/v1``, :mod:`pinlog.core.api.routes.ops`) instead of starting the model and
the database in-process (:func:`find_server`): the answer is the same JSON the in-process path
prints. A file is used only when its process is alive, serves the same database and answers;
a stale file (crashed server, reused pid) is ignored and the command runs in-process.
``PINLOG_SERVER_URL`` names a server explicitly (then an unreachable server is an error, not a
fallback).

This module imports only the standard library (and :mod:`pinlog.settings` for type names): the
command's fast path (:func:`recorded_server`) reads the few variables it needs itself and loads
no settings model, no model, no database driver and no ai module (README: measured wall time).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinlog.settings import Settings


def reveal(secret: object) -> str | None:
    """The value of a ``SecretStr`` (see :func:`pinlog.settings.reveal`), without importing it."""
    return secret.get_secret_value() if secret is not None else None  # type: ignore[attr-defined]

SERVER_FILE = "server.json"
#: Seconds for a request to a running server (a search has its own deadline on the server).
TIMEOUT = 30.0
#: Seconds for the liveness probe of a recorded server.
PROBE_TIMEOUT = 1.0


class ServerError(Exception):
    """A running server answered an error: ``status`` (HTTP) and its ``message`` (secret-free)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class Unreachable(Exception):
    """The server did not answer (connection refused, timeout)."""


def _fingerprint(url: str | None, data_dir: Path) -> str:
    key = f"url:{url}" if url else f"embedded:{data_dir.resolve()}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def database_fingerprint(settings: Settings) -> str:
    """Which database a process uses, without revealing it: sha256 (hex, 16 chars) of the
    external URL, or of the embedded data directory's absolute path."""
    return _fingerprint(reveal(settings.database_url), settings.data_dir)


def server_file(settings: Settings) -> Path:
    return settings.data_dir / SERVER_FILE


def listen_url(host: str, port: int) -> str:
    """The URL a local command reaches a server listening on ``host:port`` at (a wildcard
    address → the loopback one)."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def write_server_file(settings: Settings, url: str, token: str) -> Path:
    """Record this server (``pid`` = this process) and the ``token`` its operator API accepts
    for this run, for the commands of the same data directory; mode 0600 (like the generated
    secrets beside it), written atomically."""
    path = server_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{SERVER_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"url": url, "pid": os.getpid(), "database": database_fingerprint(settings),
                   "token": token}, fh)
    os.replace(tmp, path)
    return path


def remove_server_file(settings: Settings) -> None:
    """Remove the file if it is this process's (another server may have replaced it)."""
    path = server_file(settings)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class Server:
    """A running server the command may ask: its base URL and the internal secret to send."""

    url: str
    secret: str
    explicit: bool

    def request(self, method: str, path: str, body: dict[str, object] | None = None,
                timeout: float = TIMEOUT) -> str:
        """The response body (text) of a 2xx answer.

        Raises:
            ServerError: any other status (its ``{"error", "message"}``).
            Unreachable: no answer.
        """
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(self.url.rstrip("/") + path, data=data, method=method,
                                     headers={"X-Internal-Secret": self.secret,
                                              "Content-Type": "application/json",
                                              "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:  # noqa: S310 - http(s) only
                return response.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read().decode("utf-8"))
            except ValueError:
                answer = {}
            if not isinstance(answer, dict):
                answer = {}
            raise ServerError(exc.code, str(answer.get("error", exc.code)),
                              str(answer.get("message") or answer.get("error") or exc.reason)) from None
        except (urllib.error.URLError, OSError) as exc:
            raise Unreachable(str(getattr(exc, "reason", exc))) from None

    def search(self, member: str, query: str, limit: int) -> str:
        return self.request("POST", "/ops/v1/search", {"member": member, "query": query,
                                                       "limit": limit})

    def records(self, member: str) -> str:
        return self.request("GET", "/ops/v1/records?" + urllib.parse.urlencode({"member": member}))

    def status(self) -> str:
        return self.request("GET", "/ops/v1/status")


def _recorded(path: Path, fingerprint: str) -> Server | None:
    """The server ``path`` records, when its process is alive, it serves the database of
    ``fingerprint`` and ``/health`` answers."""
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if (not isinstance(recorded, dict) or not _alive(recorded.get("pid"))
            or recorded.get("database") != fingerprint
            or not isinstance(recorded.get("url"), str)
            or not isinstance(recorded.get("token"), str) or not recorded["token"]):
        return None
    server = Server(recorded["url"], recorded["token"], explicit=False)
    try:
        server.request("GET", "/health", timeout=PROBE_TIMEOUT)
    except (ServerError, Unreachable):
        return None
    return server


def find_server(settings: Settings) -> Server | None:
    """The server to ask: ``PINLOG_SERVER_URL`` (sending the first internal secret), else the
    one recorded for this data directory (:func:`_recorded`); else None (run in-process)."""
    if settings.server_url:
        secrets = settings.secret_values()
        return Server(settings.server_url, secrets[0] if secrets else "", explicit=True)
    return _recorded(server_file(settings), database_fingerprint(settings))


def _variables() -> dict[str, str]:
    """The ``PINLOG_*`` values the settings would read for what :func:`recorded_server` needs:
    the environment (names case-insensitive) over a ``.env`` file (python-dotenv, as
    pydantic-settings reads it)."""
    values: dict[str, str] = {}
    if Path(".env").is_file():
        from dotenv import dotenv_values

        values.update({k.upper(): v for k, v in dotenv_values(".env").items() if v is not None})
    values.update({k.upper(): v for k, v in os.environ.items() if k.upper().startswith("PINLOG_")})
    return values


def recorded_server() -> Server | None:
    """:func:`find_server` without loading the settings (no pydantic: the command's fast path):
    the server recorded for ``PINLOG_DATA_DIR`` (default ``./.pinlog``) and
    ``PINLOG_DATABASE_URL``, authenticated by the token in its file. None when
    ``PINLOG_SERVER_URL`` is set (that path needs the settings' internal secret) or no live
    server is recorded."""
    values = _variables()
    if values.get("PINLOG_SERVER_URL"):
        return None
    data_dir = Path(values.get("PINLOG_DATA_DIR") or "./.pinlog")
    return _recorded(data_dir / SERVER_FILE,
                     _fingerprint(values.get("PINLOG_DATABASE_URL") or None, data_dir))
