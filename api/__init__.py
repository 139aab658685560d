"""The HTTP edge: the channel API (docs/reference.md), a thin layer over `settled.gateway.gateway`."""
