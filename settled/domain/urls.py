"""What makes a URL usable for a business call or a setting: checked once, for the kinds file and
the environment alike."""

from urllib.parse import urlsplit


def http_url_problem(url: str) -> str | None:
    """Why `url` is not a usable http(s) URL, or None. URL templates' `{placeholders}` are fine."""
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return "contains whitespace or control characters"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "has no host"
    try:
        parts.port  # noqa: B018 -- urlsplit checks the port only when asked
    except ValueError:
        return "has an invalid port"
    return None
