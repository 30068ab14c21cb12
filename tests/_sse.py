"""The text/event-stream format (Server-Sent Events) as the tests read ``/api/runs/{id}/events``,
a line at a time, for the synchronous (tests/app) and asynchronous (tests/load) clients alike."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Message:
    event: str | None
    id: str | None
    data: Any


@dataclass
class SseReader:
    """``feed`` each line of the stream; it returns the message that a blank line ends."""

    fields: dict[str, str] = field(default_factory=dict)
    data: list[str] = field(default_factory=list)

    def feed(self, line: str) -> Message | None:
        if line == "":
            message = None
            if self.data or self.fields:
                message = Message(
                    self.fields.get("event"), self.fields.get("id"), json.loads("\n".join(self.data))
                )
            self.fields, self.data = {}, []
            return message
        if not line.startswith(":"):  # ":" starts a keep-alive comment
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                self.data.append(value)
            else:
                self.fields[name] = value
        return None
