"""Settings from the environment (docs/reference.md), validated once with messages that name the problem."""

import difflib
import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from settled.domain.models import WAIT_MAX_S
from settled.domain.urls import http_url_problem
from settled.runtime import tracing
from settled.runtime.connection import API_KEY_FILE, Connection, ConnectionSettingsError, load_connection

_TENANT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ADDRESS = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:(\d{1,5})$")
# Temporal namespace names: letters, digits, `.`, `_`, `-` (no spaces or control characters).
_NAMESPACE = re.compile(r"^[A-Za-z0-9._-]{1,255}$")
_RATE = re.compile(r"^(?P<count>\d+(?:\.\d+)?)\s*/\s*(?P<per>s|sec|second|m|min|minute|h|hour)$")
_PERIOD_S = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}
DEFAULT_RATE_LIMIT = "200/s,burst=400"
# A conversation closes an hour after its last event or action (its call is long over by then); at most
# 30 days, the period conversations started before this setting keep.
CONVERSATION_IDLE_S = 3600.0
CONVERSATION_IDLE_MAX_S = 30 * 24 * 3600.0
# Every variable settled reads, and those only its tests read; any other SETTLED_* is likely a typo.
KNOWN_VARIABLES = (
    "SETTLED_TEMPORAL_ADDRESS",
    "SETTLED_NAMESPACE",
    API_KEY_FILE,
    "SETTLED_CONFIG",
    "SETTLED_API_KEYS",
    "SETTLED_SANDBOX_URL",
    "SETTLED_MAX_BODY_BYTES",
    "SETTLED_ENCRYPTION_KEYS",
    "SETTLED_CODEC_CORS_ORIGINS",
    "SETTLED_WORKER_METRICS_PORT",
    "SETTLED_WORKER_METRICS_HOST",
    "SETTLED_RATE_LIMIT",
    "SETTLED_WORKER_CACHED_WORKFLOWS",
    "SETTLED_API_WORKER",
    "SETTLED_CONVERSATION_IDLE_S",
    # The hosted voice platforms' webhooks (docs/platforms.md); the secrets are read when a request comes.
    "SETTLED_VAPI_WAIT_S",
    "SETTLED_VAPI_HMAC_SECRET",
    "SETTLED_VAPI_HMAC_SECRET_FILE",
    "SETTLED_RETELL_WAIT_S",
    "SETTLED_RETELL_API_KEY",
    "SETTLED_RETELL_API_KEY_FILE",
    "SETTLED_RETELL_API_KEYS",
    "SETTLED_ELEVENLABS_WAIT_S",
    "SETTLED_ELEVENLABS_WEBHOOK_SECRET",
    "SETTLED_ELEVENLABS_WEBHOOK_SECRET_FILE",
    "SETTLED_ELEVENLABS_WEBHOOK_SECRETS",
    "SETTLED_MCP_WAIT_S",
    "SETTLED_MCP_ALLOWED_ORIGINS",
)
# The variables that name, per tenant, the variable holding a platform's secret.
_TENANT_SECRET_LISTS = ("SETTLED_RETELL_API_KEYS", "SETTLED_ELEVENLABS_WEBHOOK_SECRETS")
_TEST_VARIABLES = ("SETTLED_KEEP_LOGS", "SETTLED_UPDATE_SCREENSHOTS")


# An environment variable's name, as `SETTLED_RETELL_API_KEYS` (and ElevenLabs') names one per tenant.
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# A platform's tool call waits this long for the business system (at most the API's own `wait`).
DEFAULT_PLATFORM_WAIT_S = 8.0
PLATFORM_WAIT_RANGE_S = (1.0, 30.0)

_SWITCH = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


class SettingsError(ValueError):
    """An environment variable that cannot be used; the message names it."""


@dataclass(frozen=True)
class RateLimit:
    """A token bucket per caller: `per_s` tokens a second, at most `burst` saved up."""

    per_s: float
    burst: int


@dataclass(frozen=True)
class Settings:
    temporal_address: str = "127.0.0.1:7233"
    namespace: str = "default"
    # How to reach Temporal beyond its address and namespace (API key, TLS, gRPC metadata):
    # settled.runtime.connection. Its address and namespace are the two fields above.
    temporal: Connection = field(default_factory=Connection)
    config_path: Path | None = None
    # API key -> tenant. Empty: no authentication, one tenant (None).
    api_keys: dict[str, str] = field(default_factory=dict)
    sandbox_url: str = "http://127.0.0.1:8100"
    max_body_bytes: int = 64 * 1024
    # Payload encryption keys, the first encrypting (settled.temporal.codec). Empty: payloads are plain JSON.
    encryption_keys: dict[str, bytes] = field(default_factory=dict)
    # Browser origins allowed to call /codec (the Temporal UI's); nothing else is cross-origin.
    codec_cors_origins: list[str] = field(default_factory=list)
    # Where the worker serves Prometheus metrics (/metrics); None: not served. Loopback unless the
    # host is set (0.0.0.0 for a scrape from another host or pod).
    worker_metrics_port: int | None = None
    worker_metrics_host: str = "127.0.0.1"
    # Workflows a worker keeps in memory between their tasks: fewer costs a replay when an evicted
    # one wakes, more costs resident memory (docs/performance.md). Status reads never need it.
    worker_cached_workflows: int = 500
    # The API hosts a worker of its own, so that a new action starts eagerly: its first workflow task
    # (and its send) runs in the API process, without a trip through the task queue. False: the API
    # only talks to Temporal, and `settled worker` processes run every task.
    api_worker: bool = True
    # How long a conversation stays open with nothing new (no channel event, no new action) before it
    # closes. Closing loses nothing: the next event or action reopens it with everything it kept, and a
    # handoff reads a closed one. Each conversation keeps the period it was started with.
    conversation_idle_s: float = CONVERSATION_IDLE_S
    # Requests per tenant (per client address without API keys); None: no limit.
    rate_limit: RateLimit | None = field(default_factory=lambda: parse_rate_limit(DEFAULT_RATE_LIMIT))
    # How long a Vapi, Retell or ElevenLabs tool call waits for the business system before the webhook answers
    # that it is still being done: under the platform's own timeout (20 s by default at Vapi and ElevenLabs).
    vapi_wait_s: float = DEFAULT_PLATFORM_WAIT_S
    retell_wait_s: float = DEFAULT_PLATFORM_WAIT_S
    elevenlabs_wait_s: float = DEFAULT_PLATFORM_WAIT_S
    # Tenant -> the environment variable holding that tenant's Retell API key (never the key itself).
    retell_api_keys: dict[str, str] = field(default_factory=dict)
    # Tenant -> the environment variable holding that tenant's ElevenLabs webhook secret.
    elevenlabs_webhook_secrets: dict[str, str] = field(default_factory=dict)
    # How long an MCP tool call waits for a verified outcome before answering "not confirmed yet"
    # (the action's resource then tells the rest). Under the usual MCP clients' timeouts.
    mcp_wait_s: float = 8.0
    # Browser origins whose requests /mcp serves (DNS rebinding: a page of another origin is refused);
    # a request without an Origin header is not a browser page's, and is served.
    mcp_allowed_origins: list[str] = field(default_factory=list)

    def kinds_file(self, part: str) -> Path:
        """The kinds file a production part runs on. `settled worker` and `settled api` never fall back
        to the sandbox kinds: a worker that quietly sent real requests to a sandbox's addresses, or an
        API offering kinds nobody configured, is a misconfiguration to stop at start-up."""
        if self.config_path is None:
            raise SettingsError(
                f"SETTLED_CONFIG is not set: `settled {part}` needs the kinds file that declares your "
                "business actions (`settled dev` and `settled sandbox` run the sandbox kinds without one)"
            )
        return self.config_path

    @property
    def multi_tenant(self) -> bool:
        return bool(self.api_keys)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        try:
            connection = load_connection(env)
        except ConnectionSettingsError as error:
            raise SettingsError(str(error)) from None
        traces = tracing.problem(env)
        if traces is not None:
            raise SettingsError(traces)
        address = connection.address
        # Named as the operator set it: settled's variable, else Temporal's (or its profile).
        address_from = (
            "SETTLED_TEMPORAL_ADDRESS" if env.get("SETTLED_TEMPORAL_ADDRESS") else "TEMPORAL_ADDRESS"
        )
        matched = _ADDRESS.fullmatch(address)
        if not matched or not 0 < int(matched.group(1)) < 65536:
            raise SettingsError(
                f"{address_from}={address!r}: expected HOST:PORT, port 1-65535 (127.0.0.1:7233)"
            )
        namespace = connection.namespace
        if "SETTLED_NAMESPACE" in env and not env["SETTLED_NAMESPACE"].strip():
            raise SettingsError("SETTLED_NAMESPACE is empty: unset it for 'default', or name a namespace")
        if not _NAMESPACE.fullmatch(namespace):
            namespace_from = "SETTLED_NAMESPACE" if env.get("SETTLED_NAMESPACE") else "TEMPORAL_NAMESPACE"
            raise SettingsError(f"{namespace_from}={namespace!r}: expected 1-255 of A-Z a-z 0-9 . _ -")
        config = env.get("SETTLED_CONFIG", "").strip()
        config_path = Path(config) if config else None
        if config_path is not None and not config_path.is_file():
            raise SettingsError(f"SETTLED_CONFIG={config}: no such kinds file")
        sandbox_url = env.get("SETTLED_SANDBOX_URL", "http://127.0.0.1:8100").strip().rstrip("/")
        problem = http_url_problem(sandbox_url)
        if problem:
            raise SettingsError(f"SETTLED_SANDBOX_URL={sandbox_url!r}: {problem}")
        max_body = env.get("SETTLED_MAX_BODY_BYTES", str(cls.max_body_bytes)).strip()
        if not max_body.isdigit() or not 1024 <= int(max_body) <= 16 * 1024 * 1024:
            raise SettingsError(
                f"SETTLED_MAX_BODY_BYTES={max_body!r}: expected a number of bytes, 1024 to 16777216"
            )
        metrics_port = env.get("SETTLED_WORKER_METRICS_PORT", "").strip()
        if metrics_port and not (metrics_port.isdigit() and 0 < int(metrics_port) < 65536):
            raise SettingsError(f"SETTLED_WORKER_METRICS_PORT={metrics_port!r}: expected a port number")
        metrics_host = env.get("SETTLED_WORKER_METRICS_HOST", "127.0.0.1").strip()
        try:
            metrics_host = str(ipaddress.ip_address(metrics_host))
        except ValueError:
            raise SettingsError(
                f"SETTLED_WORKER_METRICS_HOST={metrics_host!r}: expected an IP address to listen on "
                "(127.0.0.1: this machine only; 0.0.0.0: every interface)"
            ) from None
        cached = env.get("SETTLED_WORKER_CACHED_WORKFLOWS", str(cls.worker_cached_workflows)).strip()
        if not (cached.isdigit() and 1 <= int(cached) <= 1_000_000):
            raise SettingsError(
                f"SETTLED_WORKER_CACHED_WORKFLOWS={cached!r}: expected a number of workflows, 1 to 1000000"
            )
        api_worker = env.get("SETTLED_API_WORKER", "1").strip().lower()
        if api_worker not in _SWITCH:
            raise SettingsError(f"SETTLED_API_WORKER={api_worker!r}: expected 1 or 0 (true or false)")
        api_keys = parse_api_keys(env.get("SETTLED_API_KEYS", ""))
        return cls(
            vapi_wait_s=_platform_wait(env, "SETTLED_VAPI_WAIT_S"),
            retell_wait_s=_platform_wait(env, "SETTLED_RETELL_WAIT_S"),
            elevenlabs_wait_s=_platform_wait(env, "SETTLED_ELEVENLABS_WAIT_S"),
            retell_api_keys=_tenant_variables(env, "SETTLED_RETELL_API_KEYS", api_keys),
            elevenlabs_webhook_secrets=_tenant_variables(env, "SETTLED_ELEVENLABS_WEBHOOK_SECRETS", api_keys),
            mcp_wait_s=_seconds(env, "SETTLED_MCP_WAIT_S", cls.mcp_wait_s, WAIT_MAX_S),
            api_worker=_SWITCH[api_worker],
            conversation_idle_s=_seconds(
                env, "SETTLED_CONVERSATION_IDLE_S", cls.conversation_idle_s, CONVERSATION_IDLE_MAX_S, 1.0
            ),
            worker_metrics_port=int(metrics_port) if metrics_port else None,
            worker_metrics_host=metrics_host,
            worker_cached_workflows=int(cached),
            temporal_address=address,
            namespace=namespace,
            temporal=connection,
            config_path=config_path,
            api_keys=api_keys,
            sandbox_url=sandbox_url,
            max_body_bytes=int(max_body),
            encryption_keys=_encryption_keys(env.get("SETTLED_ENCRYPTION_KEYS", "")),
            codec_cors_origins=_origins(env, "SETTLED_CODEC_CORS_ORIGINS"),
            mcp_allowed_origins=_origins(env, "SETTLED_MCP_ALLOWED_ORIGINS"),
            rate_limit=parse_rate_limit(env.get("SETTLED_RATE_LIMIT", DEFAULT_RATE_LIMIT)),
        )


def _seconds(env: Mapping[str, str], name: str, default: float, most: float, least: float = 0.0) -> float:
    text = env.get(name, f"{default:g}").strip()
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and least <= seconds <= most):
        raise SettingsError(f"{name}={text!r}: expected a number of seconds, {least:.10g} to {most:.10g}")
    return seconds


def unknown_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """A warning per SETTLED_* variable settled does not read (a typo of SETTLED_API_KEYS would
    otherwise run the API open), naming the closest known one."""
    env = os.environ if env is None else env
    # The variables those lists name hold tenants' secrets: read, whatever their names.
    named = {
        variable + suffix
        for listing in _TENANT_SECRET_LISTS
        for entry in env.get(listing, "").split(",")
        for variable in [entry.partition(":")[2].strip()]
        for suffix in ("", "_FILE")
    }
    warnings = []
    for name in sorted(env):
        if name.startswith("SETTLED_") and name not in (*KNOWN_VARIABLES, *_TEST_VARIABLES, *named):
            # Compared without the shared prefix, which would make every name look close.
            suffixes = [known.removeprefix("SETTLED_") for known in KNOWN_VARIABLES]
            close = difflib.get_close_matches(name.removeprefix("SETTLED_"), suffixes, n=1)
            hint = f"; did you mean SETTLED_{close[0]}?" if close else ""
            warnings.append(f"{name} is not a setting settled reads (ignored){hint}")
    return warnings


def parse_rate_limit(text: str) -> RateLimit | None:
    """`N/s` (or `/min`, `/h`) with an optional `,burst=M` (default: N); `off` for none."""
    text = text.strip()
    if text.lower() == "off":
        return None
    rate_text, _, burst_text = (part.strip() for part in text.partition(","))
    matched = _RATE.fullmatch(rate_text)
    if not matched:
        raise SettingsError(
            f"SETTLED_RATE_LIMIT={text!r}: expected N/s, N/min or N/h with an optional ,burst=M "
            f"(e.g. {DEFAULT_RATE_LIMIT!r}), or off"
        )
    count = float(matched.group("count"))
    per_s = count / _PERIOD_S[matched.group("per")]
    if not (math.isfinite(per_s) and per_s > 0):
        raise SettingsError(f"SETTLED_RATE_LIMIT={text!r}: the rate must be more than 0 (or off)")
    burst = max(1, math.ceil(count))
    if burst_text:
        key, sep, value = (part.strip() for part in burst_text.partition("="))
        if key != "burst" or not sep or not value.isdigit() or int(value) < 1:
            raise SettingsError(
                f"SETTLED_RATE_LIMIT={text!r}: after the rate, expected burst=M with M a whole number >= 1"
            )
        burst = int(value)
    return RateLimit(per_s=per_s, burst=burst)


def _platform_wait(env: Mapping[str, str], name: str) -> float:
    least, most = PLATFORM_WAIT_RANGE_S
    return _seconds(env, name, DEFAULT_PLATFORM_WAIT_S, least=least, most=most)


def _tenant_variables(env: Mapping[str, str], name: str, api_keys: Mapping[str, str]) -> dict[str, str]:
    return parse_tenant_variables(name, env.get(name, ""), api_keys)


def _origins(env: Mapping[str, str], name: str) -> list[str]:
    """Browser origins (`scheme://host[:port]`) in `name`, comma-separated; never `*`: each list lets
    a browser page in (the codec decrypts, /mcp acts)."""
    origins = [origin.strip() for origin in env.get(name, "").split(",") if origin.strip()]
    for origin in origins:
        parts = urlsplit(origin)
        if origin == "*" or http_url_problem(origin) or parts.path or parts.query or parts.fragment:
            raise SettingsError(
                f"{name}: {origin!r} is not an origin; expected scheme://host[:port], comma-separated "
                "(never *)"
            )
    return origins


def _encryption_keys(text: str) -> dict[str, bytes]:
    from settled.temporal.codec import EncryptionKeyError, parse_keys

    try:
        keys = parse_keys(text)
    except EncryptionKeyError as error:
        raise SettingsError(str(error)) from None
    # parse_keys keeps the last of two same ids: the wrong key could then be the one that encrypts.
    ids = [entry.partition(":")[0].strip() for entry in text.split(",") if entry.strip()]
    if len(ids) != len(keys):
        raise SettingsError("SETTLED_ENCRYPTION_KEYS: the same key id is given twice")
    if text.strip() and not keys:
        raise SettingsError("SETTLED_ENCRYPTION_KEYS is set but holds no KEY_ID:BASE64_KEY entry")
    return keys


def parse_tenant_variables(name: str, text: str, api_keys: Mapping[str, str]) -> dict[str, str]:
    """`tenant_a:ENV_NAME,…` in the variable `name` -> {tenant: ENV_NAME}: which variable holds each
    tenant's platform secret (Retell's API key, ElevenLabs' webhook secret; the secret that verifies a
    request names its tenant). Each tenant must have a settled key."""
    variables: dict[str, str] = {}
    tenants = set(api_keys.values())
    for entry in filter(None, (part.strip() for part in text.split(","))):
        tenant, sep, variable = (part.strip() for part in entry.partition(":"))
        if not sep or not tenant or not variable:
            raise SettingsError(f"{name}: each entry must be TENANT:VARIABLE (comma-separated)")
        if not tenants:
            raise SettingsError(f"{name} names tenants: set SETTLED_API_KEYS too")
        if tenant not in tenants:
            raise SettingsError(f"{name}: {tenant!r} is not a tenant of SETTLED_API_KEYS")
        if not _VARIABLE.fullmatch(variable):
            raise SettingsError(f"{name}: tenant {tenant!r} names {variable!r}, which is not a variable name")
        if tenant in variables:
            raise SettingsError(f"{name}: tenant {tenant!r} is given twice")
        variables[tenant] = variable
    if text.strip() and not variables:
        raise SettingsError(f"{name} is set but holds no TENANT:VARIABLE entry")
    return variables


def parse_api_keys(text: str) -> dict[str, str]:
    """`tenant_a:key1,tenant_b:key2` -> {key: tenant}."""
    keys: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        tenant, sep, key = entry.partition(":")
        if not sep or not key:
            raise SettingsError("SETTLED_API_KEYS: each entry must be TENANT:KEY (comma-separated)")
        if not _TENANT.fullmatch(tenant):
            raise SettingsError(f"SETTLED_API_KEYS: tenant {tenant!r} must be 1-64 of A-Z a-z 0-9 _ -")
        if len(key) < 8:
            raise SettingsError(
                f"SETTLED_API_KEYS: the key of tenant {tenant!r} is shorter than 8 characters"
            )
        if key in keys:
            raise SettingsError("SETTLED_API_KEYS: the same key is given twice")
        keys[key] = tenant
    if text.strip() and not keys:
        # Set but empty (e.g. ","): refuse rather than silently run without authentication.
        raise SettingsError("SETTLED_API_KEYS is set but holds no TENANT:KEY entry; unset it for no keys")
    return keys
