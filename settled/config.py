"""Settings from the environment (contract §5), validated once with messages that name the problem."""

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

_TENANT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ADDRESS = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")


class SettingsError(ValueError):
    """An environment variable that cannot be used; the message names it."""


@dataclass(frozen=True)
class Settings:
    temporal_address: str = "127.0.0.1:7233"
    namespace: str = "default"
    config_path: Path | None = None
    # API key -> tenant. Empty: no authentication, one tenant (None).
    api_keys: dict[str, str] = field(default_factory=dict)
    sandbox_url: str = "http://127.0.0.1:8100"
    max_body_bytes: int = 64 * 1024
    # Payload encryption keys, the first encrypting (settled.codec). Empty: payloads are plain JSON.
    encryption_keys: dict[str, bytes] = field(default_factory=dict)
    # Browser origins allowed to call /codec (the Temporal UI's); nothing else is cross-origin.
    codec_cors_origins: list[str] = field(default_factory=list)
    # Where the worker serves Prometheus metrics (/metrics); None: not served.
    worker_metrics_port: int | None = None

    @property
    def multi_tenant(self) -> bool:
        return bool(self.api_keys)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        address = env.get("SETTLED_TEMPORAL_ADDRESS", "127.0.0.1:7233").strip()
        if not _ADDRESS.match(address):
            raise SettingsError(
                f"SETTLED_TEMPORAL_ADDRESS={address!r}: expected HOST:PORT, e.g. 127.0.0.1:7233"
            )
        namespace = env.get("SETTLED_NAMESPACE", "default").strip()
        if not namespace:
            raise SettingsError("SETTLED_NAMESPACE is empty: unset it for 'default', or name a namespace")
        config = env.get("SETTLED_CONFIG", "").strip()
        config_path = Path(config) if config else None
        if config_path is not None and not config_path.is_file():
            raise SettingsError(f"SETTLED_CONFIG={config}: no such kinds file")
        sandbox_url = env.get("SETTLED_SANDBOX_URL", "http://127.0.0.1:8100").strip().rstrip("/")
        if not sandbox_url.startswith(("http://", "https://")):
            raise SettingsError(f"SETTLED_SANDBOX_URL={sandbox_url!r}: expected an http:// URL")
        max_body = env.get("SETTLED_MAX_BODY_BYTES", str(cls.max_body_bytes)).strip()
        if not max_body.isdigit() or not 1024 <= int(max_body) <= 16 * 1024 * 1024:
            raise SettingsError(
                f"SETTLED_MAX_BODY_BYTES={max_body!r}: expected a number of bytes, 1024 to 16777216"
            )
        metrics_port = env.get("SETTLED_WORKER_METRICS_PORT", "").strip()
        if metrics_port and not (metrics_port.isdigit() and 0 < int(metrics_port) < 65536):
            raise SettingsError(f"SETTLED_WORKER_METRICS_PORT={metrics_port!r}: expected a port number")
        return cls(
            worker_metrics_port=int(metrics_port) if metrics_port else None,
            temporal_address=address,
            namespace=namespace,
            config_path=config_path,
            api_keys=parse_api_keys(env.get("SETTLED_API_KEYS", "")),
            sandbox_url=sandbox_url,
            max_body_bytes=int(max_body),
            encryption_keys=_encryption_keys(env.get("SETTLED_ENCRYPTION_KEYS", "")),
            codec_cors_origins=[
                o.strip() for o in env.get("SETTLED_CODEC_CORS_ORIGINS", "").split(",") if o.strip()
            ],
        )


def _encryption_keys(text: str) -> dict[str, bytes]:
    from settled.codec import EncryptionKeyError, parse_keys

    try:
        return parse_keys(text)
    except EncryptionKeyError as error:
        raise SettingsError(str(error)) from None


def parse_api_keys(text: str) -> dict[str, str]:
    """`tenant_a:key1,tenant_b:key2` -> {key: tenant}."""
    keys: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        tenant, sep, key = entry.partition(":")
        if not sep or not key:
            raise SettingsError("SETTLED_API_KEYS: each entry must be TENANT:KEY (comma-separated)")
        if not _TENANT.match(tenant):
            raise SettingsError(f"SETTLED_API_KEYS: tenant {tenant!r} must be 1-64 of A-Z a-z 0-9 _ -")
        if len(key) < 8:
            raise SettingsError(
                f"SETTLED_API_KEYS: the key of tenant {tenant!r} is shorter than 8 characters"
            )
        if key in keys:
            raise SettingsError("SETTLED_API_KEYS: the same key is given twice")
        keys[key] = tenant
    return keys
