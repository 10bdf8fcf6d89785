"""Settings of the ways in that speak HTTP: the OpenAI-compatible API and inbound webhooks."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_API_PORT = 8642


class ApiSettings(BaseModel):
    """Keys under ``api:``: where the HTTP listener of the API (and of the webhooks) listens."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(DEFAULT_API_PORT, ge=0, le=65535)
    """0 picks a free port (tests); the one chosen is logged."""
