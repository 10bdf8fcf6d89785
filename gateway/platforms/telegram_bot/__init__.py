"""The Telegram platform over python-telegram-bot: adapter, inbound, formatting."""
