"""The public face of the payload codec: `new_key()` makes a key for `SETTLED_ENCRYPTION_KEYS`.
The codec itself is `settled.temporal.codec`."""

from settled.temporal.codec import new_key

__all__ = ["new_key"]
