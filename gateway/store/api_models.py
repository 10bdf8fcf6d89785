"""The table of the OpenAI-compatible API: the response ids it handed out, so that a later request's
``previous_response_id`` finds its conversation (and only for the key that created it)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from gateway.store.columns import SchemaBase as Base
from gateway.store.columns import UTCDateTime


class ApiResponseRow(Base):
    """One ``/v1/responses`` answer: its id, the key that asked and the conversation it belongs to."""

    __tablename__ = "api_responses"
    __table_args__ = (Index("ix_api_responses_key_name", "key_name"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_name: Mapped[str] = mapped_column(String(64))
    conversation: Mapped[str] = mapped_column(String(128))
    session_key: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


api_responses: Table = Base.metadata.tables["api_responses"]
