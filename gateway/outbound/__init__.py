"""Replies on their way out: outbox rows, delivery, streaming, the sentences for failures."""
