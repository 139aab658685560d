"""What every platform webhook checks before anything else: its signature (the secret read when the
request comes, like the business secrets; its age, within the tolerance of the platform's own SDK; its
value, computed as the body streams in and compared in constant time), then a body that is a JSON
object."""

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass, field

from fastapi import HTTPException, Request
from settled.api.access import key_tenant
from settled.api.edges.inprocess import tenant_key

from settled.business.secrets import SecretError, read_secret, secret_is_set
from settled.runtime.config import Settings

log = logging.getLogger("settled.api.edges.platforms")

# A platform sends more than an adapter does (the call, its transcript so far, the assistant's
# settings): its routes take up to this much, whatever SETTLED_MAX_BODY_BYTES says.
PLATFORM_PREFIX = "/v1/platforms/"
PLATFORM_BODY_BYTES = 4 * 1024 * 1024


def optional_secret(name: str) -> str | None:
    """The secret in `name` (or the file `name_FILE` names), read now; None when it is not set. One
    that is set but cannot be read is logged, naming the variable only, and raises SecretError."""
    if not secret_is_set(name):
        return None
    try:
        return read_secret(name)
    except SecretError as error:
        log.error("%s", error)
        raise


def same(expected: str, presented: str) -> bool:
    """Compared in constant time (as bytes: a presented header may hold any character)."""
    return hmac.compare_digest(expected.encode(), presented.encode())


def fresh(signed_at_s: float, now_s: float, max_age_s: float) -> bool:
    """Signed within `max_age_s` of now (either way: a platform's clock may be ahead of ours), so a
    recorded request cannot be replayed later."""
    return abs(now_s - signed_at_s) <= max_age_s


@dataclass
class Signature:
    """A request's hex HMAC-SHA256 signature, checked as its body streams in: the MAC of `prefix`, the
    body and `suffix` under each candidate secret (one per tenant that could have signed it)."""

    presented: str
    prefix: bytes
    suffix: bytes
    candidates: list[tuple[str | None, str]]
    _macs: list["hmac.HMAC"] = field(init=False)

    def __post_init__(self) -> None:
        self._macs = [hmac.new(secret.encode(), self.prefix, hashlib.sha256) for _, secret in self.candidates]

    def update(self, chunk: bytes) -> None:
        for mac in self._macs:
            mac.update(chunk)

    def signer(self) -> str | None:
        """The tenant whose secret made the signature (None without tenants), once the whole body was
        read; 401 if none did."""
        for (tenant, _), mac in zip(self.candidates, self._macs, strict=True):
            mac.update(self.suffix)
            if same(mac.hexdigest(), self.presented):
                return tenant
        raise refused("the signature does not match the request")


def refused(message: str) -> HTTPException:
    return HTTPException(401, message)


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not a JSON value")


def json_object(body: bytes) -> dict[str, object]:
    """The body as a JSON object (RFC 8259: no NaN), parsed only once its signature was checked; 400
    otherwise."""
    try:
        value = json.loads(body, parse_constant=_not_json)
    except ValueError:
        raise HTTPException(400, "the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise HTTPException(400, "the body is not a JSON object")
    return value


def signing_secrets(
    request: Request, platform: str, variables: dict[str, str], variable: str
) -> list[tuple[str | None, str]]:
    """(tenant, secret) of each platform secret that may have signed the request: without tenants, the
    secret in `variable` (the tenant None); with tenants, each tenant's in the variable `variables`
    names for it. 401 when none is set, before the body is read. A secret that is set but cannot be
    read is skipped (logged, naming the variable): that tenant's requests are refused until it is
    fixed."""
    settings: Settings = request.app.state.settings
    names = list(variables.items()) if settings.multi_tenant else [(None, variable)]
    secrets = []
    for tenant, name in names:
        try:
            secret = optional_secret(name)
        except SecretError:
            continue
        if secret is not None:
            secrets.append((tenant, secret))
    if not secrets:
        listed = ", ".join(name for _, name in names) or "none is configured"
        log.warning("a %s request came and no secret is set to verify it (%s)", platform, listed)
        raise refused("the signature does not match the request")
    return secrets


def tenant_api_key(request: Request, tenant: str | None) -> str | None:
    """The settled API key a tenant's requests go in with (None without tenants)."""
    if tenant is None:
        return None
    key = tenant_key(request.app, tenant)
    if key is None:  # the settings refuse a platform's tenant without a settled key: never here
        raise HTTPException(401, "the tenant has no settled API key")
    return key


def bearer_caller(request: Request, legacy_header: str | None = None) -> tuple[str | None, str | None]:
    """(tenant, settled API key) of a platform that presents the tenant's settled API key as its Bearer
    credential (or in `legacy_header`): (None, None) without API keys; 401 without a valid one."""
    keys: dict[str, str] = request.app.state.settings.api_keys
    if not keys:
        return None, None
    scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
    presented = bearer.strip() if scheme.lower() == "bearer" else ""
    if legacy_header is not None:
        presented = presented or request.headers.get(legacy_header, "").strip()
    if not presented:
        also = f" (or {legacy_header})" if legacy_header else ""
        raise refused(f"an Authorization: Bearer <key>{also} header is required")
    tenant = key_tenant(keys, presented)
    if tenant is None:
        raise refused("the API key is not valid")
    return tenant, presented
