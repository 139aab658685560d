"""A real TLS-terminating gRPC proxy (Debian's nginx) in front of the Temporal dev server, and the
certificates it and its clients use, made by openssl: what a secured cluster or Temporal Cloud looks
like to settled.

One nginx serves three doors to one dev server:
- `tls`: TLS with a private CA, the server's certificate valid only for `SERVER_NAME` (clients need
  the CA and the server-name override);
- `mtls`: the same, and a client certificate signed by the CA is required;
- `api_key`: the same TLS, and `authorization: Bearer <key>` is required;
- `v1`: TLS with a server certificate of X.509 version 1 (which rustls refuses);
- `http`: a plain HTTP/1 port (a web server's, not gRPC).

A refusal is a trailers-only gRPC answer (`grpc-status 16`): a plain HTTP error reaches a gRPC client
as a protocol error, not as a refusal.
"""

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from settled.runtime.stack import Child, free_port, wait_until

SERVER_NAME = "temporal.internal"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@dataclass(frozen=True)
class Certificates:
    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def other_ca(self) -> Path:
        return self.folder / "other-ca.crt"

    def cert(self, name: str) -> Path:
        return self.folder / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.folder / f"{name}.key"


_NEW_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")


def _authority(folder: Path, name: str, subject: str) -> None:
    keys = ("-keyout", f"{name}.key", "-out", f"{name}.crt")
    openssl("req", "-x509", *_NEW_KEY, *keys, "-days", "2", "-subj", subject, cwd=folder)


def _signed(folder: Path, name: str, ca: str, subject: str, extensions: str) -> None:
    (folder / f"{name}.ext").write_text(extensions)
    keys = ("-keyout", f"{name}.key", "-out", f"{name}.csr")
    openssl("req", *_NEW_KEY, *keys, "-subj", subject, cwd=folder)
    authority = ("-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial")
    signed = ("-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")
    openssl("x509", "-req", "-in", f"{name}.csr", *authority, *signed, cwd=folder)


def _signed_v1(folder: Path, name: str, ca: str, subject: str) -> None:
    """A certificate without extensions, which openssl issues as X.509 version 1."""
    keys = ("-keyout", f"{name}.key", "-out", f"{name}.csr")
    openssl("req", *_NEW_KEY, *keys, "-subj", subject, cwd=folder)
    authority = ("-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial")
    openssl("x509", "-req", "-in", f"{name}.csr", *authority, "-out", f"{name}.crt", "-days", "2", cwd=folder)


def make_certificates(folder: Path) -> Certificates:
    """A private CA; a server certificate for SERVER_NAME only (not 127.0.0.1); a client certificate
    it signed; a client certificate signed by another CA, which the proxy does not trust; and a server
    certificate of X.509 version 1."""
    folder.mkdir(parents=True, exist_ok=True)
    _authority(folder, "ca", "/CN=settled test CA")
    _authority(folder, "other-ca", "/CN=another CA")
    _signed(folder, "server", "ca", f"/CN={SERVER_NAME}",
            f"subjectAltName=DNS:{SERVER_NAME}\nextendedKeyUsage=serverAuth\n")  # fmt: skip
    _signed(folder, "client", "ca", "/CN=settled worker", "extendedKeyUsage=clientAuth\n")
    _signed(folder, "stranger", "other-ca", "/CN=stranger", "extendedKeyUsage=clientAuth\n")
    _signed_v1(folder, "server-v1", "ca", f"/CN={SERVER_NAME}")
    return Certificates(folder)


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file() else None)
    if found is None:
        raise RuntimeError("nginx is missing: make install-nginx (apt-get install nginx) as root")
    return found


_REFUSE = """
    location @refused {{
      internal;
      default_type application/grpc;
      add_header grpc-status 16 always;
      add_header grpc-message "{message}" always;
      return 204;
    }}"""


def _server(
    port: int,
    upstream: int,
    certs: Certificates,
    guard: str,
    refusal: str,
    extra: str = "",
    cert: str = "server",
) -> str:
    return f"""
  server {{
    listen 127.0.0.1:{port} ssl http2;
    ssl_certificate {certs.cert(cert)};
    ssl_certificate_key {certs.key(cert)};
    {extra}
    location / {{
      {guard}
      grpc_pass grpc://127.0.0.1:{upstream};
    }}
    error_page 418 = @refused;{_REFUSE.format(message=refusal)}
  }}"""


@dataclass
class Proxy:
    tls_port: int
    mtls_port: int
    api_key_port: int
    v1_port: int
    http_port: int
    child: Child

    def address(self, door: str) -> str:
        return f"127.0.0.1:{getattr(self, f'{door}_port')}"

    def stop(self) -> None:
        self.child.stop()


def start_proxy(folder: Path, upstream: int, certs: Certificates, api_key: str) -> Proxy:
    folder.mkdir(parents=True, exist_ok=True)
    taken: set[int] = set()
    for _ in range(5):
        taken.add(free_port(frozenset(taken)))
    tls, mtls, keyed, v1, http = sorted(taken)
    temp = folder / "temp"
    temp.mkdir(exist_ok=True)
    servers = "".join(
        (
            _server(tls, upstream, certs, "", "refused"),
            _server(
                mtls, upstream, certs,
                "if ($ssl_client_verify != SUCCESS) { return 418; }",
                "client certificate: $ssl_client_verify",
                f"ssl_client_certificate {certs.ca};\n    ssl_verify_client optional_no_ca;",
            ),
            _server(
                keyed, upstream, certs, "if ($api_key_ok = 0) { return 418; }", "Request unauthorized."
            ),
            _server(v1, upstream, certs, "", "refused", cert="server-v1"),
            f"\n  server {{\n    listen 127.0.0.1:{http};\n    location / {{ return 404; }}\n  }}",
        )
    )  # fmt: skip
    user = "user root;" if os.geteuid() == 0 else ""
    config = f"""{user}
worker_processes 1;
daemon off;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 512; }}
http {{
  access_log off;
  client_body_temp_path {temp}/body;
  proxy_temp_path {temp}/proxy;
  fastcgi_temp_path {temp}/fastcgi;
  uwsgi_temp_path {temp}/uwsgi;
  scgi_temp_path {temp}/scgi;
  # Temporal's payloads reach 2 MiB and more; its long polls last about 60 s.
  client_max_body_size 0;
  grpc_read_timeout 300s;
  grpc_send_timeout 300s;
  # A long key in a map needs a larger bucket.
  map_hash_bucket_size 256;
  map $http_authorization $api_key_ok {{
    default 0;
    "Bearer {api_key}" 1;
  }}
{servers}
}}
"""
    path = folder / "nginx.conf"
    path.write_text(config)
    child = Child("nginx", [nginx_binary(), "-c", str(path), "-p", str(folder)], dict(os.environ),
                  folder / "nginx.log").start()  # fmt: skip
    proxy = Proxy(tls, mtls, keyed, v1, http, child)
    for port in taken:
        wait_until(lambda port=port: _listening(port), 15, "nginx", child)
    return proxy


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
