"""The text channel page: `/c/{conversation_id}`, where the customer sees, continues and controls the
work of a conversation after the call (routes), and the signed links that open it (links; the
routes a link opens: api.access).
"""
