"""Edges for assistants settled does not run (MCP clients, hosted voice platforms): each is an adapter
hosted in the API process, built on the adapters' own shared code (`settled.adapters.common`)."""
