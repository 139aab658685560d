"""How every part reaches Temporal: Temporal's own environment configuration, as the `temporal` CLI and
Temporal's SDKs read it (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS*`,
`TEMPORAL_GRPC_META_*`, a profile of the TOML file `TEMPORAL_CONFIG_FILE` names), loaded with
`temporalio.envconfig`; `SETTLED_TEMPORAL_ADDRESS` and `SETTLED_NAMESPACE` win where set, and an API key
may come from a file (`SETTLED_TEMPORAL_API_KEY_FILE`), re-read when it changes.

Keys, certificates and private keys are held here and handed to the SDK; nothing here ever prints
them: `Connection` shows only which settings are set.
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
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


def load_connection(env: Mapping[str, str] | None = None) -> Connection:
    """Temporal's environment configuration with settled's own variables winning. A file it names
    (a certificate, a key) must exist now: a deployment missing one fails at start, not at first use."""
    env = dict(os.environ if env is None else env)
    profile_name = env.get("TEMPORAL_PROFILE", "").strip() or "default"
    config_file = env.get("TEMPORAL_CONFIG_FILE", "").strip()
    if config_file and not Path(config_file).is_file():
        raise ConnectionSettingsError(f"TEMPORAL_CONFIG_FILE={config_file}: no such file")
    try:
        profile = ClientConfigProfile.load(profile=env.get("TEMPORAL_PROFILE") or None, override_env_vars=env)
    except Exception as error:  # the SDK's loader reports a bad file or profile as a plain error
        raise ConnectionSettingsError(
            f"Temporal's client configuration (profile {profile_name!r}"
            f"{', file ' + config_file if config_file else ''}): {error}"
        ) from None
    api_key, source, key_file = profile.api_key, None, None
    if api_key is not None:
        source = "TEMPORAL_API_KEY" if env.get("TEMPORAL_API_KEY") else f"profile {profile_name!r}"
    named_file = env.get(API_KEY_FILE, "").strip()
    if named_file:
        key_file = Path(named_file)
        api_key, source = read_api_key_file(key_file), API_KEY_FILE
    tls = profile.tls
    if tls is not None:
        for what, item in (
            ("server CA", tls.server_root_ca_cert),
            ("client certificate", tls.client_cert),
            ("client key", tls.client_private_key),
        ):
            if isinstance(item, Path) and not item.is_file():
                raise ConnectionSettingsError(f"the TLS {what} file {item} does not exist")
        if (tls.client_cert is None) != (tls.client_private_key is None):
            raise ConnectionSettingsError(
                "a client certificate needs its private key, and a key its certificate: set both "
                "TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (or their _DATA forms)"
            )
    address = env.get("SETTLED_TEMPORAL_ADDRESS", "").strip() or profile.address or DEFAULT_ADDRESS
    namespace = env.get("SETTLED_NAMESPACE") or profile.namespace or DEFAULT_NAMESPACE
    return Connection(
        address=address.strip(),
        namespace=namespace.strip(),
        api_key=api_key,
        api_key_source=source,
        api_key_file=key_file,
        tls=tls,
        grpc_meta=dict(profile.grpc_meta),
        profile=profile_name,
        config_file=config_file,
    )
