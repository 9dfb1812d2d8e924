"""The optional LLM extractor: an OpenAI-compatible chat client and one-turn extraction.

Recording its answers before use (I2) is ``pipeline/ingest/extractions.py``'s job. An answer that
is not a valid extraction, or an endpoint that keeps failing, becomes the rules' result with the
reason (``rules_fallback``): the stream keeps running and a reindex never asks again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol

import httpx

from pipeline.memory.rules.llm_extraction import (
    ExtractionResponseError,
    Message,
    build_messages,
    extractor_info,
    parse_response,
    record_extraction,
    rules_extraction,
)
from pipeline.runtime.settings import Settings
from schemas.errors import HindsightError
from schemas.events import ExtractionRecorded, ExtractorInfo, TurnRecorded
from schemas.prepared import TurnAnalysis

log = logging.getLogger("hindsight.llm")


class ExtractorUnavailable(HindsightError):
    """The endpoint did not give an answer (network, timeout, HTTP error) after the retries."""


class Extractor(Protocol):
    """Anything that turns chat messages into the model's raw answer text."""

    @property
    def info(self) -> ExtractorInfo: ...

    async def complete(self, messages: list[Message]) -> str: ...

    async def aclose(self) -> None: ...


class OpenAICompatibleExtractor:
    """``POST {base_url}/chat/completions`` with temperature 0 and JSON mode when supported."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 2,
        backoff_s: float = 0.5,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._retries = retries
        self._backoff_s = backoff_s
        self._json_mode = True
        self._client = httpx.AsyncClient(timeout=timeout, headers=headers)
        self._info = extractor_info(model)

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatibleExtractor:
        if not settings.llm_base_url:
            raise HindsightError("HINDSIGHT_LLM_BASE_URL: not set, there is no LLM to call")
        if not settings.llm_model:
            # The model name is recorded with every extraction, so it must be stated.
            raise HindsightError("HINDSIGHT_LLM_MODEL: required when HINDSIGHT_LLM_BASE_URL is set")
        return cls(settings.llm_base_url, settings.llm_model, settings.llm_api_key)

    @property
    def info(self) -> ExtractorInfo:
        return self._info

    async def complete(self, messages: list[Message]) -> str:
        attempt = 0
        while True:
            body: dict[str, Any] = {"model": self._model, "messages": messages, "temperature": 0}
            if self._json_mode:
                body["response_format"] = {"type": "json_object"}
            try:
                response = await self._client.post(self._url, json=body)
            except httpx.HTTPError as error:
                problem = f"{type(error).__name__}: {error}"
            else:
                if (
                    response.status_code in {400, 422}
                    and self._json_mode
                    and "response_format" in response.text
                ):
                    # The server does not know JSON mode: ask again without it (not a retry).
                    self._json_mode = False
                    continue
                if response.status_code < 400:
                    return _answer_text(response)
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code != 429 and response.status_code < 500:
                    raise ExtractorUnavailable(problem)
            attempt += 1
            if attempt > self._retries:
                raise ExtractorUnavailable(f"{problem} (after {attempt} attempts)")
            await asyncio.sleep(self._backoff_s * attempt)

    async def aclose(self) -> None:
        await self._client.aclose()


def _answer_text(response: httpx.Response) -> str:
    """The first choice's message content; an envelope of the wrong shape is a bad answer."""
    try:
        payload = response.json()
        content = payload["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise ExtractionResponseError(f"not a chat completion response ({error!r})") from error
    if not isinstance(content, str):
        raise ExtractionResponseError("message content is not a string", "choices[0].message")
    return content


async def extract_turn(
    extractor: Extractor,
    turn: TurnRecorded,
    analysis: TurnAnalysis,
    context: Sequence[TurnRecorded] = (),
    revision: int = 0,
) -> ExtractionRecorded:
    """Ask the model about one turn; an unusable answer records the rules' result and why."""
    try:
        answer = await extractor.complete(build_messages(turn, context))
        extraction = parse_response(answer)
    except (ExtractionResponseError, ExtractorUnavailable) as error:
        log.warning("extraction of %s fell back to rules: %s", turn.event_id, error)
        return record_extraction(
            turn,
            extractor.info,
            rules_extraction(analysis),
            source="rules_fallback",
            error=str(error),
            revision=revision,
        )
    return record_extraction(turn, extractor.info, extraction, revision=revision)
