"""Inbox to turn to reply, one session at a time: dispatch, turns, hygiene, commands, media."""
