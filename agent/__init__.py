"""The model side of Hygieia: LLM client, context compression, tool loop, tools.

Knows nothing of Telegram, Discord or SQL; it reaches storage only through
:class:`agent.storage.ConversationStore`.
"""
