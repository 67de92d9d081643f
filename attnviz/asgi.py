"""The two small pieces every HTTP route of attnviz's shares (the view beacon in appkit/beacon.py, the class in
attnviz.classroom.http): reading a request's body within a limit, and answering with JSON. No streamlit here."""

from __future__ import annotations

import json


class TooLarge(ValueError):
    pass


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


async def read_body(receive, limit: int) -> bytes:
    """The request's body, or TooLarge once it passes `limit` bytes (the rest is left unread)."""
    body, more = b"", True
    while more and len(body) <= limit:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if len(body) > limit:
        raise TooLarge(f"A request is at most {limit} bytes.")
    return body


def loads(body: bytes):
    """JSON as the routes take it: strict, so NaN and Infinity (which Python's json would accept) are refused."""
    return json.loads(body, parse_constant=_no_constant)


async def respond(send, status: int, answer: dict, headers: list[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store"), *headers]})
    await send({"type": "http.response.body", "body": json.dumps(answer).encode()})
