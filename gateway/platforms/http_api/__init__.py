"""The OpenAI-compatible API: a way in like Telegram, served under ``/v1`` on the door listener."""
