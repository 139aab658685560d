"""Reaching Temporal: what a failed connection means in words, and an API key that follows its file.

The SDK reports a failed connection as one long line of its transport's internals ("h2 protocol error
FRAME_SIZE_ERROR", "InvalidCertificate(UnknownIssuer)"). `why_unreachable` turns it into the cause and
the setting that fixes it, scrubbed of every secret the connection holds.
"""

import asyncio
import logging
import re
import ssl
from contextlib import suppress
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError

from settled.runtime.connection import API_KEY_FILE, Connection, ConnectionSettingsError, read_api_key_file

log = logging.getLogger("settled.reach")

# How often an API key file is looked at for a rotated key: a stat, nothing read unless it changed.
API_KEY_FILE_CHECK_S = 1.0
_STATUS = re.compile(r'Status \{ code: (\w+), message: "((?:[^"\\]|\\.)*)"')
_PRESENTED = re.compile(r'DnsName\(\\*"([^"\\]+)\\*"\)')
# How a failure that is only "not up (yet)" begins: the API may start before Temporal does.
NOTHING_ANSWERS = "nothing answers at"
_REFUSED_CODES = {"Unauthenticated": "UNAUTHENTICATED", "PermissionDenied": "PERMISSION_DENIED"}


def _credentials(connection: Connection) -> str:
    """Which credentials were offered, by the setting that holds them (never the value)."""
    offered = []
    if connection.api_key_source:
        offered.append(f"the API key from {connection.api_key_source}")
    if connection.client_certificate:
        offered.append("the client certificate of TEMPORAL_TLS_CLIENT_CERT_PATH (or _DATA)")
    if not offered:
        return (
            "no credentials were offered: set TEMPORAL_API_KEY (or SETTLED_TEMPORAL_API_KEY_FILE), or "
            "TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"
        )
    return "check " + " and ".join(offered)


async def speaks_tls(address: str, timeout_s: float = 3.0) -> bool:
    """Whether a TLS handshake succeeds at `address` (its certificate unchecked: only the protocol is
    asked). A plaintext gRPC client meeting a TLS port sees only a closed connection or a garbled
    frame, depending on timing; this tells the two causes apart."""
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]"), int(port), ssl=context), timeout_s
        )
    except (OSError, ssl.SSLError, TimeoutError, ValueError):
        return False
    writer.close()
    with suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return True


async def why_unreachable(connection: Connection, error: BaseException) -> str:
    """One line: what went wrong reaching Temporal and which setting fixes it."""
    text = str(error)
    plaintext_at_tls = not connection.uses_tls and (
        "FRAME_SIZE_ERROR" in text
        or "h2 protocol error" in text
        or ("Connection refused" not in text and await speaks_tls(connection.address))
    )
    where = f"Temporal at {connection.address}"
    status = _STATUS.search(text)
    code = status.group(1) if status else None
    server_says = status.group(2).replace('\\"', '"') if status else ""
    if isinstance(error, RPCError):
        code = {"UNAUTHENTICATED": "Unauthenticated", "PERMISSION_DENIED": "PermissionDenied"}.get(
            error.status.name, error.status.name
        )
        server_says = error.message
    if code in _REFUSED_CODES:
        line = (
            f"{where} refused the credentials ({_REFUSED_CODES[code]}: the server said "
            f"{server_says!r}); {_credentials(connection)}"
        )
    elif "ConnectionRefused" in text or "Connection refused" in text:
        line = (
            f"{NOTHING_ANSWERS} {connection.address} (connection refused): is Temporal running there? "
            "Set SETTLED_TEMPORAL_ADDRESS or TEMPORAL_ADDRESS to its frontend's HOST:PORT"
        )
    elif "dns error" in text or "failed to lookup address" in text:
        line = (
            f"cannot resolve the host of {connection.address}: "
            "check SETTLED_TEMPORAL_ADDRESS or TEMPORAL_ADDRESS"
        )
    elif plaintext_at_tls:
        line = (
            f"{where} does not speak plaintext gRPC: it probably needs TLS. Set TEMPORAL_TLS=true (and "
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH for a private CA), or TEMPORAL_API_KEY for Temporal Cloud"
        )
    elif "UnknownIssuer" in text or "certificate verify failed" in text:
        line = (
            f"the certificate of {where} is not signed by a CA this client trusts: set "
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH (or _DATA) to the cluster's CA certificate"
        )
    elif "NotValidForName" in text:
        names = ", ".join(_PRESENTED.findall(text)) or "other names"
        line = (
            f"the certificate of {where} is valid for {names}, not for the address's host: set "
            f"TEMPORAL_TLS_SERVER_NAME to the name the certificate bears"
        )
    elif "invalid compression flag" in text or "while receiving response with status" in text:
        line = (
            f"{where} answered with plain HTTP instead of gRPC (a proxy that refused the request?); "
            f"{_credentials(connection)}"
        )
    elif connection.uses_tls and ("InvalidContentType" in text or "CorruptMessage" in text):
        line = f"{where} does not speak TLS: unset TEMPORAL_TLS (or set it to false) for a plaintext server"
    else:
        detail = server_says or text.removeprefix("Failed client connect: ")
        line = f"cannot reach {where}: {detail[:300]}"
    return connection.scrub(line)


async def follow_api_key_file(
    client: Client, path: Path, check_every_s: float = API_KEY_FILE_CHECK_S
) -> None:
    """Keep the client's API key the one in `path`, so that a rotated key needs no restart. A file
    that cannot be read (mid-rotation) keeps the last key, and says so once."""

    def stamp() -> tuple[int, int, int] | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    seen = stamp()
    complained = False
    while True:
        await asyncio.sleep(check_every_s)
        now = stamp()
        if now == seen:
            continue
        try:
            key = read_api_key_file(path)
        except ConnectionSettingsError as error:
            if not complained:
                log.warning("%s; keeping the last API key", error)
                complained = True
            continue
        seen, complained = now, False
        if key != client.api_key:
            client.api_key = key
            log.info("the API key from %s changed: new calls carry the new key", API_KEY_FILE)


# The followers of the process's clients, kept referenced so that they keep running.
_FOLLOWERS: set["asyncio.Task[None]"] = set()


def keep_api_key_current(client: Client, connection: Connection) -> None:
    if connection.api_key_file is None:
        return
    task = asyncio.create_task(follow_api_key_file(client, connection.api_key_file))
    _FOLLOWERS.add(task)
    task.add_done_callback(_FOLLOWERS.discard)
