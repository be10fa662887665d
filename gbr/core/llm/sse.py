"""A small server-sent-events parser, fed text as it arrives off the socket.

It follows the WHATWG event-stream rules that matter for LLM APIs: lines end in LF, CRLF or a
lone CR (Gemini sends CRLF, and a CRLF may be split across two network reads); `data:` lines
accumulate until a blank line dispatches the event; lines starting with `:` are comments
(keep-alives); one space after the colon is dropped. An event left unterminated when the stream
ends is discarded, as the spec says: it is a cut stream, not an answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

DONE = "[DONE]"
"""The data the OpenAI format sends as its last event; Gemini has no such marker."""

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SseEvent:
    data: str
    event: str = "message"
    id: str | None = None

    @property
    def is_done(self) -> bool:
        return self.data == DONE


class SseParser:
    """Incremental: `feed` any slice of the stream and get back the events it completed."""

    def __init__(self) -> None:
        self._buffer = ""
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None
        self._after_cr = False
        self._started = False

    def feed(self, text: str) -> list[SseEvent]:
        if not text:  # an empty read says nothing, not even "the CRLF is over"
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr and text.startswith("\n"):
            # The LF half of a CRLF whose CR ended the previous slice: the line already ended.
            text = text[1:]
        # Set on every non-empty read, even one the strip emptied (a slice of just that LF):
        # left over, it would eat the next slice's leading LF, a blank line that ends an event.
        self._after_cr = text.endswith("\r")
        buffer = self._buffer + text
        events: list[SseEvent] = []
        start = 0
        for match in _LINE_END.finditer(buffer):
            event = self._line(buffer[start : match.start()])
            if event is not None:
                events.append(event)
            start = match.end()
        self._buffer = buffer[start:]
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        # `retry` and unknown fields are ignored: reconnection is the retry loop's job.
        return None

    def _dispatch(self) -> SseEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return SseEvent(data="\n".join(data), event=event or "message", id=self._last_id)


def iter_sse(chunks: Iterable[str]) -> Iterator[SseEvent]:
    """Events from an iterable of text slices (for instance `httpx.Response.iter_text()`)."""
    parser = SseParser()
    for chunk in chunks:
        yield from parser.feed(chunk)
