"""Runnable examples: one per framework, each a scripted refund call against a running settled."""
