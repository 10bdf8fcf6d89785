"""The Discord platform over discord.py: adapter, client, inbound, interactions, shards."""
