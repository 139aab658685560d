"""`settled page-link CONVERSATION_ID [--tenant T] [--ttl SECONDS] [--base-url URL]`: print the link to
a conversation's text page, signed with the tenant's key from SETTLED_API_KEYS when keys are configured."""

import argparse
import sys

from settled.api.page.links import mint_link

from settled.runtime.config import Settings, SettingsError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="settled page-link", description=__doc__.split("\n")[0])
    parser.add_argument("conversation_id")
    parser.add_argument("--tenant", help="the tenant whose API key signs the link (needed with API keys)")
    parser.add_argument(
        "--ttl", type=float, default=None, help="seconds until the link expires (default: never)"
    )
    parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="where the API is reached")
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        print(mint_link(settings, args.conversation_id, args.tenant, base_url=args.base_url, ttl_s=args.ttl))
    except (SettingsError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
