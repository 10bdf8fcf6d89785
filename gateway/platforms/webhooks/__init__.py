"""Inbound webhooks: signed HTTP posts that land in a chat (docs/webhooks.md)."""
