"""Hosted voice platforms (Vapi, Retell) reaching settled through their own webhooks: each route is an
adapter hosted in the API process (`settled.api.edges.inprocess`), with the adapters' tool set and
truthful answers (`settled.adapters.common`)."""
