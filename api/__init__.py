"""The HTTP edge: the channel API (contract §3), a thin layer over `settled.gateway`."""
