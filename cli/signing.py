"""The commands that sign for one conversation with a tenant's key from SETTLED_API_KEYS:

- `settled page-link CONVERSATION_ID [--tenant T] [--ttl SECONDS] [--base-url URL]`: the link to the
  conversation's text page (no token when no keys are configured);
- `settled token CONVERSATION_ID --tenant T [--ttl SECONDS]`: a conversation token, the bearer
  credential a browser agent uses in place of the API key (at most 24 hours).
"""

import argparse
import sys
from collections.abc import Callable

from settled.api.page.links import mint_link

from settled.runtime.commandline import Parser
from settled.runtime.config import Settings, SettingsError
from settled.tokens import CONVERSATION_TOKEN_MAX_TTL_S, mint_conversation_token, signing_key


def _parser(prog: str, description: str, *, tenant_required: bool) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description=description)
    parser.add_argument("conversation_id", help="the conversation to sign for")
    parser.add_argument(
        "--tenant", required=tenant_required, help="the tenant whose API key signs (needed with API keys)"
    )
    return parser


def _printed(make: Callable[[Settings], str]) -> int:
    try:
        print(make(Settings.from_env()))
    except (SettingsError, ValueError) as error:
        print(f"settled: {error}", file=sys.stderr)
        return 2
    return 0


def page_link(argv: list[str] | None = None) -> int:
    parser = _parser(
        "settled page-link", "print the signed link to a conversation's text page", tenant_required=False
    )
    parser.add_argument(
        "--ttl", type=float, default=None, help="seconds until the link expires (default: never)"
    )
    parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="where the API is reached")
    args = parser.parse_args(argv)
    return _printed(
        lambda settings: mint_link(
            settings, args.conversation_id, args.tenant, base_url=args.base_url, ttl_s=args.ttl
        )
    )


def _token(settings: Settings, conversation_id: str, tenant: str, ttl_s: float) -> str:
    key = signing_key(settings.api_keys, tenant)
    if key is None:
        raise ValueError("no API keys are configured: the API is open and needs no token")
    return mint_conversation_token(key, tenant, conversation_id, ttl_s=ttl_s)


def token(argv: list[str] | None = None) -> int:
    parser = _parser(
        "settled token",
        "print a conversation token: a browser agent's credential",
        tenant_required=True,
    )
    parser.add_argument(
        "--ttl",
        type=float,
        default=3600,
        help=f"seconds until the token expires (at most {CONVERSATION_TOKEN_MAX_TTL_S})",
    )
    args = parser.parse_args(argv)
    return _printed(lambda settings: _token(settings, args.conversation_id, args.tenant, args.ttl))
