"""What ``venturi web`` adds around the dashboard when it serves it alone: a Host check and an access token.

:class:`HostCheck` answers 421 to a request whose ``Host`` header names
anything but the bound address, ``localhost`` or a loopback address, or one of
the extra allowed names (``--allowed-host``): a page on a foreign hostname
that resolves to this machine (DNS rebinding) reaches nothing.  When the
server is reachable from other machines it also asks for a per-start access
token, as notebook servers do: the printed URL carries ``?token=...``; a
request with the right token gets it as an ``HttpOnly`` cookie and is
redirected to the same URL without it; any other request without the cookie
gets 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Iterable
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_COOKIE = "venturi_access"
TOKEN_PARAM = "token"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def served_names(host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The host names a server bound to ``host`` answers: it, the loopback names, ``extra``.

    Bound to every interface (``0.0.0.0``, ``::``), the machine's own name and
    fully qualified name count as the bound address.
    """
    names = {host.lower().strip("[]"), *LOOPBACK_NAMES, *(e.lower().strip("[]") for e in extra)}
    if host in ("0.0.0.0", "::", ""):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names)


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (IPv6 brackets removed), lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


class HostCheck:
    """ASGI middleware: 421 unless ``Host`` is served, then 401 unless the access token is known (if any)."""

    def __init__(self, app: ASGIApp, names: frozenset[str], token: str | None) -> None:
        self.app = app
        self.names = names
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        name = host_name(headers.get("host", ""))
        if name not in self.names:
            await _answer(send, 421, f"misdirected request: this dashboard does not serve host {name[:100]!r} "
                                     "(venturi web --allowed-host NAME adds a name)\n")
            return
        if self.token is not None and not await self._admitted(scope, headers, send):
            return
        await self.app(scope, receive, send)

    async def _admitted(self, scope: Scope, headers: dict[str, str], send: Send) -> bool:
        assert self.token is not None
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed Cookie header carries no token
            jar = SimpleCookie()
        held = jar.get(TOKEN_COOKIE)
        if held is not None and hmac.compare_digest(held.value, self.token):
            return True
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = dict(query).get(TOKEN_PARAM, "")
        if given and hmac.compare_digest(given, self.token):
            rest = urlencode([(k, v) for k, v in query if k != TOKEN_PARAM])
            location = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
            cookie = f"{TOKEN_COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
            await _answer(send, 303, "", [(b"location", location.encode("latin-1")),
                                          (b"set-cookie", cookie.encode("latin-1"))])
            return False
        await _answer(send, 401, "this dashboard needs its access token: open the URL venturi web printed "
                                 "(it ends in ?token=...)\n")
        return False


async def _answer(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
