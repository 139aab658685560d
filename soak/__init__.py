"""The load soak: hundreds of concurrent actions under random faults and channel events, every answer
checked against the sandbox's records (`settled soak --help`)."""
