"""The response ids of the OpenAI-compatible API (``/v1/responses``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select

from gateway.store.api_models import api_responses
from gateway.store.base import Repo


class ApiResponseOps(Repo):
    async def api_response_put(
        self, response_id: str, *, key_name: str, conversation: str, session_key: str, at: datetime
    ) -> None:
        """Remember that ``response_id`` answered ``key_name`` in ``conversation``."""
        async with self._tx() as s:
            await s.execute(
                insert(api_responses).values(
                    id=response_id,
                    key_name=key_name,
                    conversation=conversation,
                    session_key=session_key,
                    created_at=at,
                )
            )

    async def api_response_conversation(self, response_id: str, *, key_name: str) -> str | None:
        """The conversation ``response_id`` belongs to, when ``key_name`` created it (else None:
        another key's response is as unknown as one that never existed)."""
        async with self._tx(write=False) as s:
            row = (
                await s.execute(
                    select(api_responses.c.conversation).where(
                        api_responses.c.id == response_id, api_responses.c.key_name == key_name
                    )
                )
            ).one_or_none()
        return None if row is None else str(row.conversation)
