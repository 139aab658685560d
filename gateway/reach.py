"""Reaching Temporal: what a failed connection means in words, and an API key that follows its file.

The SDK reports a failed connection as one long line of its transport's internals ("h2 protocol error
FRAME_SIZE_ERROR", "InvalidCertificate(UnknownIssuer)"). `why_unreachable` turns it into the cause and
the setting that fixes it, scrubbed of every secret the connection holds: the names a certificate
really holds, rustls's words for a local mistake in an operator's, and, where the words do not tell,
what the port itself answers (TLS, plaintext gRPC, or HTTP/1 from a web server or a proxy's HTTP port).
"""

import asyncio
import logging
import re
import ssl
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError, TLSConfig

from settled.runtime.connection import API_KEY_FILE, Connection, ConnectionSettingsError, read_api_key_file

log = logging.getLogger("settled.reach")

# How often an API key file is looked at for a rotated key: a stat, nothing read unless it changed.
API_KEY_FILE_CHECK_S = 1.0
_STATUS = re.compile(r'Status \{ code: (\w+), message: "((?:[^"\\]|\\.)*)"')
# The names a certificate holds, as rustls lists them after `presented:` (never the name expected).
_PRESENTED_LIST = re.compile(r"presented: \[([^\]]*)\]")
_PRESENTED_NAME = re.compile(r'(?:DnsName|IpAddress)\(\\*"([^"\\]+)\\*"\)')
# How a failure that is only "not up (yet)" begins: the API may start before Temporal does.
NOTHING_ANSWERS = "nothing answers at"
_REFUSED_CODES = {"Unauthenticated": "UNAUTHENTICATED", "PermissionDenied": "PERMISSION_DENIED"}
_CLIENT_PAIR = "TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (or their _DATA forms)"
# rustls's own words for a local mistake, and what they mean to an operator.
_RUSTLS = {
    "KeyMismatch": (
        "the client key does not match the client certificate: set TEMPORAL_TLS_CLIENT_KEY_PATH (or "
        "_DATA) to the private key the certificate of TEMPORAL_TLS_CLIENT_CERT_PATH was issued for"
    ),
    "NoCertificatesPresented": (
        f"the client certificate holds no certificate (a request, or a key?): set {_CLIENT_PAIR} to a "
        "PEM certificate and its key"
    ),
    "UnsupportedCertVersion": (
        "the server's certificate is X.509 version 1, which settled's TLS (rustls) does not accept: "
        "reissue it as version 3 with a subjectAltName naming the host"
    ),
}


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


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


async def speaks_tls(address: str, timeout_s: float = 3.0) -> bool:
    """Whether a TLS handshake succeeds at `address` (its certificate unchecked: only the protocol is
    asked). A plaintext gRPC client meeting a TLS port sees only a closed connection or a garbled
    frame, depending on timing; this tells the two causes apart."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        host, port = _host_port(address)
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=context), timeout_s)
    except (OSError, ssl.SSLError, TimeoutError, ValueError):
        return False
    writer.close()
    with suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return True


# What an HTTP/2 client says first, and what an HTTP/1 client does.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HTTP1_REQUEST = b"GET / HTTP/1.1\r\nHost: settled\r\nConnection: close\r\n\r\n"


async def _first_answer(address: str, said: bytes, timeout_s: float) -> bytes:
    try:
        host, port = _host_port(address)
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, TimeoutError, ValueError):
        return b""
    try:
        writer.write(said)
        await writer.drain()
        return await asyncio.wait_for(reader.read(16), timeout_s)
    except (OSError, TimeoutError):
        return b""
    finally:
        writer.close()
        with suppress(OSError):
            await writer.wait_closed()


async def plaintext_answer(address: str, timeout_s: float = 3.0) -> str | None:
    """What a plaintext port speaks: "http1" (it answers an HTTP/1 request: a web server, a proxy's
    plain HTTP port), "h2" (it answers HTTP/2's preface with a frame: plaintext gRPC), or None."""
    if (await _first_answer(address, _HTTP1_REQUEST, timeout_s)).startswith(b"HTTP/1."):
        return "http1"
    first = await _first_answer(address, _H2_PREFACE, timeout_s)
    # An HTTP/2 frame header: a 3-byte length, then type 4 (SETTINGS) or 7 (GOAWAY).
    if len(first) >= 4 and first[3] in (4, 7):
        return "h2"
    return None


def refused_credentials(error: BaseException) -> bool:
    """Whether Temporal (or the proxy before it) refused the credentials the client offered."""
    if isinstance(error, RPCError):
        return error.status.name in _REFUSED_CODES.values()
    status = _STATUS.search(str(error))
    return status is not None and status.group(1) in _REFUSED_CODES


def _presented_names(text: str) -> list[str]:
    listed = _PRESENTED_LIST.search(text)
    return _PRESENTED_NAME.findall(listed.group(1)) if listed else []


def _answers_http1(where: str) -> str:
    return (
        f"{where} answers HTTP/1 (a web server, or a proxy's plain HTTP port), not gRPC: set "
        "SETTLED_TEMPORAL_ADDRESS or TEMPORAL_ADDRESS to Temporal's gRPC frontend (port 7233 by default, "
        "or the proxy's HTTP/2 port)"
    )


async def why_unreachable(connection: Connection, error: BaseException) -> str:
    """One line: what went wrong reaching Temporal and which setting fixes it."""
    text = str(error)
    where = f"Temporal at {connection.address}"
    status = _STATUS.search(text)
    code = status.group(1) if status else None
    server_says = status.group(2).replace('\\"', '"') if status else ""
    if isinstance(error, RPCError):
        code = {"UNAUTHENTICATED": "Unauthenticated", "PERMISSION_DENIED": "PermissionDenied"}.get(
            error.status.name, error.status.name
        )
        server_says = error.message
    local = next((words for name, words in _RUSTLS.items() if name in text), None)
    if code in _REFUSED_CODES:
        line = (
            f"{where} refused the credentials ({_REFUSED_CODES[code]}: the server said "
            f"{server_says!r}); {_credentials(connection)}"
        )
    elif local is not None:
        line = f"cannot reach {where}: {local}"
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
    elif "UnknownIssuer" in text or "certificate verify failed" in text:
        line = (
            f"the certificate of {where} is not signed by a CA this client trusts: set "
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH (or _DATA) to the cluster's CA certificate"
        )
    elif "NotValidForName" in text:
        line = _wrong_name(where, connection, _presented_names(text))
    else:
        line = await _by_what_answers(where, connection, text, server_says)
    return connection.scrub(line)


def _wrong_name(where: str, connection: Connection, names: list[str]) -> str:
    holds = f"holds only {', '.join(names)}" if names else "holds no name this client can use"
    expected = connection.tls.server_name if connection.tls and connection.tls.server_name else None
    asked = (
        f"not {expected} (TEMPORAL_TLS_SERVER_NAME)"
        if expected
        else f"not {_host_port(connection.address)[0]} (the address's host)"
    )
    fix = names[0] if names else "a name it holds"
    return f"the certificate of {where} {holds}, {asked}: set TEMPORAL_TLS_SERVER_NAME to {fix}"


async def _by_what_answers(where: str, connection: Connection, text: str, server_says: str) -> str:
    """A failure the error's words do not explain: the port is asked what it speaks."""
    if not connection.uses_tls and await speaks_tls(connection.address):
        return (
            f"{where} expects TLS and the client spoke plaintext: set TEMPORAL_TLS=true (and "
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH for a private CA), or TEMPORAL_API_KEY for Temporal Cloud"
        )
    answer = await plaintext_answer(connection.address)
    if answer == "http1":
        return _answers_http1(where)
    if connection.uses_tls and answer == "h2":
        return (
            f"{where} speaks plaintext gRPC, not TLS: set TEMPORAL_TLS=false (an API key alone turns "
            "TLS on), or point the address at the TLS port"
        )
    if "invalid compression flag" in text or "while receiving response with status" in text:
        return (
            f"{where} answered with plain HTTP instead of gRPC (a proxy that refused the request?); "
            f"{_credentials(connection)}"
        )
    if connection.uses_tls and ("InvalidContentType" in text or "CorruptMessage" in text):
        return f"{where} does not answer TLS: unset TEMPORAL_TLS (or set it to false) for a plaintext server"
    detail = server_says or text.removeprefix("Failed client connect: ")
    return f"cannot reach {where}: {detail[:300]}"


async def presented_names(address: str, server_name: str | None, timeout_s: float = 10.0) -> list[str]:
    """The DNS names (then IP addresses) the certificate at `address` holds, read in a handshake that
    checks nothing; [] when it cannot be read."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        host, port = _host_port(address)
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=context, server_hostname=server_name or host), timeout_s
        )
    except (OSError, ssl.SSLError, TimeoutError, ValueError):
        return []
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    with suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    if der is None:
        return []
    from cryptography import x509

    try:
        names = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        )
    except (ValueError, x509.ExtensionNotFound):
        return []
    dns = names.value.get_values_for_type(x509.DNSName)
    return [*dns, *(str(ip) for ip in names.value.get_values_for_type(x509.IPAddress))]


async def tls_without_host_check(connection: Connection) -> TLSConfig:
    """TLS that does not check the server's certificate against the host (the CLI's
    TEMPORAL_TLS_DISABLE_HOST_VERIFICATION). rustls cannot skip the check, so the certificate is
    checked against a name it holds, read from it first; its chain is still checked against the CA
    given, or the system's."""
    tls = connection.tls.to_connect_tls_config() if connection.tls is not None else True
    config = tls if isinstance(tls, TLSConfig) else TLSConfig()
    names = await presented_names(connection.address, config.domain)
    if not names:  # no certificate to read: the connection's own error will say why
        return config
    authorities = config.server_root_ca_cert
    if authorities is None:
        bundle = ssl.get_default_verify_paths().cafile
        authorities = Path(bundle).read_bytes() if bundle and Path(bundle).is_file() else None
    if authorities is None:
        return config
    return replace(config, server_root_ca_cert=authorities, verification_server_name=names[0])


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
