"""The console platform: a local terminal chat, interactive or scripted."""
