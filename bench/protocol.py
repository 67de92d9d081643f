"""A Streamlit session driven over the server's own websocket protocol, without a browser.

The browser's side of the protocol, as the load benchmark needs it: connect to `/_stcore/stream` (subprotocol
"streamlit"), send `BackMsg.rerun_script` with a `ClientState`, read `ForwardMsg`s up to `script_finished`. As the
browser does, a session keeps every widget's value from the elements the server sends (a widget the server set
through session state carries `set_value`), and sends all of them with each run; a fragment's rerun also names the
fragment; the URL's query string follows the server's `page_info_changed`; and messages the server marks cacheable
are kept by hash and named in `cached_message_hashes`, so the server may send a reference instead.

Uploads and chart selections are never sent; a button is pressed only by name (`press`), as bench_room presses the
presenter's Next.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import websockets
from streamlit.components.v2.bidi_component.main import _make_trigger_id
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

FINISHED = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}


@dataclass
class Widget:
    kind: str  # the element's type: checkbox, radio, slider, bidi_component, …
    label: str
    state: WidgetState  # what the browser would send for it now
    fragment: str  # the id of the fragment that drew it ("" outside any)


@dataclass
class Run:
    seconds: float  # request sent → script_finished
    ok: bool
    problem: str = ""  # why not ok: the app's exception, a compile error, a lost connection
    answer: dict | None = None  # a POST's JSON answer


def initial_state(kind: str, element) -> WidgetState | None:
    """The value a browser holds for a widget it has just drawn: the server's `set_value`, else its default."""
    state = WidgetState(id=element.id)
    chosen = getattr(element, "set_value", False)
    if kind == "checkbox":
        state.bool_value = element.value if chosen else element.default
    elif kind in ("radio", "selectbox"):
        if chosen:
            state.string_value = element.raw_value
        elif 0 <= element.default < len(element.options):
            state.string_value = element.options[element.default]
        else:
            return None
    elif kind == "slider" and element.options:  # a select_slider: its options' labels
        picked = list(element.raw_value) if chosen else [element.options[int(i)] for i in element.default]
        state.string_array_value.data.extend(picked)
    elif kind == "slider":
        state.double_array_value.data.extend(element.value if chosen else element.default)
    elif kind == "number_input":
        state.double_value = element.value if chosen else element.default
    elif kind in ("text_area", "text_input"):
        state.string_value = element.value if chosen else element.default
    elif kind == "multiselect":
        state.string_array_value.data.extend(list(element.raw_values) if chosen else [element.options[i] for i in element.default])
    else:
        return None
    return state


def block_state(kind: str, block) -> WidgetState | None:
    """An expander or a tab bar with a key is a widget too: its open state, or its open tab's label."""
    if kind == "expandable" and block.id:
        return WidgetState(id=block.id, bool_value=block.expanded)
    if kind == "tab_container" and block.id:
        return WidgetState(id=block.id, string_value=block.default_tab_label)
    return None


class Session:
    """One browser tab's worth of protocol. `await Session.open(url, query)` runs the page once."""

    def __init__(self, socket, query: str, page_name: str = ""):
        self.socket, self.query = socket, query
        self.page = ""  # the page's script hash, learnt from the server's navigation message
        self.page_name = page_name  # the page the first run asks for by its URL path ("lesson"), before the hash is known
        self.cookie = ""  # a balancer's cookie, sent with the page's POSTs
        self.widgets: dict[str, Widget] = {}
        self.cache: dict[str, ForwardMsg] = {}
        self.elements: list[tuple[str, object]] = []  # (type, element) of the last run, for the caller to inspect
        self.arrived: list[float] = []  # when each of those elements arrived (time.perf_counter())
        self.data: dict[str, dict] = {}  # each bidi component's data as last drawn, by its key (JSON data only)
        self.last_seen: set[str] = set()

    @classmethod
    async def open(cls, url: str, query: str = "", timeout: float = 300, page: str = "") -> tuple["Session", Run]:
        stream = url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/") + "/_stcore/stream"
        socket = await websockets.connect(stream, subprotocols=["streamlit"], max_size=None, open_timeout=timeout,
                                          ping_interval=None)
        session = cls(socket, query, page)
        # A balancer's cookie (HAProxy's ATTNVIZ_REPLICA, set on the websocket's handshake): the page's own POSTs carry
        # it, as a browser's do, so they reach the replica that holds the session.
        cookies = socket.response.headers.get_all("Set-Cookie") if socket.response else []
        session.cookie = "; ".join(c.split(";", 1)[0] for c in cookies)
        return session, await session.rerun(timeout=timeout)

    async def close(self) -> None:
        await self.socket.close()

    def find(self, label: str, kind: str | None = None) -> Widget:
        """The widget whose label is `label` (and type `kind`), or the bidi component named `label`."""
        for widget in self.widgets.values():
            if widget.label == label and (kind is None or widget.kind == kind):
                return widget
        raise KeyError(f"no widget {label!r} on the page")

    def has(self, label: str) -> bool:
        return any(widget.label == label for widget in self.widgets.values())

    async def change(self, widget: Widget, timeout: float = 120, **value) -> Run:
        """Set `widget` as a person would (bool_value=…, string_value=…, json_value=…) and run what that reruns: its
        fragment, or the whole page."""
        state = WidgetState(id=widget.state.id)
        for name, v in value.items():
            if name.endswith("array_value"):
                getattr(state, name).data.extend(v)
            else:
                setattr(state, name, v)
        widget.state = state
        return await self.rerun(widget.fragment, timeout=timeout)

    async def set_component_state(self, name: str, values: dict, timeout: float = 120) -> Run:
        """What a components-v2 component's `setStateValue(key, value)` sends, for each key of `values`: the
        component's whole state as JSON, and a rerun of its fragment."""
        widget = self.find(name, "bidi_component")
        current = json.loads(widget.state.json_value) if widget.state.HasField("json_value") else {}
        return await self.change(widget, timeout=timeout, json_value=json.dumps({**current, **values}))

    async def trigger(self, name: str, event: str, value, timeout: float = 120) -> Run:
        """What a components-v2 component's `setTriggerValue(event, value)` sends: a one-run trigger (its payload list,
        as JSON, under the component's trigger widget), and a rerun of its fragment."""
        widget = self.find(name, "bidi_component")
        state = WidgetState(id=_make_trigger_id(widget.state.id, "events"))
        state.json_trigger_value = json.dumps([{"event": event, "value": value}])
        return await self.rerun(widget.fragment, timeout=timeout, triggers=[state])

    async def press(self, label: str, timeout: float = 120) -> Run:
        """A click on the button labelled `label` that the last run drew: its one-run trigger, and a rerun."""
        element = next((e for kind, e in self.elements if kind == "button" and e.label == label), None)
        if element is None:
            raise KeyError(f"no button {label!r} on the page")
        return await self.rerun(timeout=timeout, triggers=[WidgetState(id=element.id, trigger_value=True)])

    async def type_sentence(self, url: str, box: str, text: str, timeout: float = 120) -> Run:
        """What the sentence box (attnviz/browser/sentence.mjs) does with a committed text: where its data carries
        `post`, the POST, whose answer is the heatmap's data (no run; the link follows the answer) or says the page must
        run; else, or then, the trigger and the run of its fragment (the time of both)."""
        post = self.data.get(box, {}).get("post")
        if post:
            sent = await self.post(url, post["url"], {"token": post["token"], "text": text, "search": "?" + self.query},
                                   timeout=timeout)
            if sent.ok and "data" in (sent.answer or {}):
                self.query = sent.answer["search"].lstrip("?")
                return sent
            run = await self.trigger(box, "text", text, timeout=timeout)
            return Run(sent.seconds + run.seconds, run.ok, run.problem)
        return await self.trigger(box, "text", text, timeout=timeout)

    async def post(self, url: str, path: str, body: dict, timeout: float = 120) -> Run:
        """An HTTP POST of `body` as JSON to `path` on the server at `url`, as a page's fetch() sends it (no page run):
        the time to the whole answer, ok on a 2xx status."""
        host, _, port = url.split("://", 1)[-1].split("/", 1)[0].partition(":")
        data = json.dumps(body).encode()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, int(port or 80))
                cookie = f"Cookie: {self.cookie}\r\n" if self.cookie else ""
                writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n{cookie}"
                             f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
                await writer.drain()
                answer = await reader.read()
                writer.close()
        except (TimeoutError, OSError) as error:
            return Run(time.perf_counter() - started, False, f"POST {path}: {type(error).__name__}")
        seconds = time.perf_counter() - started
        status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "no answer"
        head, _, payload = answer.partition(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in head.lower():
            payload = dechunk(payload)
        try:
            parsed = json.loads(payload) if payload else None
        except ValueError:
            parsed = None
        return Run(seconds, status.startswith("2"), "" if status.startswith("2") else f"HTTP {status}", parsed)

    async def rerun(self, fragment: str = "", timeout: float = 120, triggers: list[WidgetState] = ()) -> Run:
        message = BackMsg()
        state = message.rerun_script
        state.query_string = self.query
        state.page_script_hash = self.page
        if not self.page:
            state.page_name = self.page_name
        state.fragment_id = fragment
        state.widget_states.widgets.extend([*(w.state for w in self.widgets.values()), *triggers])
        state.cached_message_hashes.extend(self.cache)
        self.elements, self.arrived, seen = [], [], set()
        started = time.perf_counter()
        try:
            await self.socket.send(message.SerializeToString())
            async with asyncio.timeout(timeout):
                while True:
                    forward = ForwardMsg()
                    forward.ParseFromString(await self.socket.recv())
                    if forward.ref_hash:
                        forward = self.cache[forward.ref_hash]
                    elif forward.metadata.cacheable and forward.hash:
                        self.cache[forward.hash] = forward
                    problem = self._read(forward, seen)
                    if problem:
                        return Run(time.perf_counter() - started, False, problem)
                    if forward.WhichOneof("type") == "script_finished":
                        status = forward.script_finished
                        self._forget(fragment, seen)
                        return Run(time.perf_counter() - started, status in FINISHED,
                                   "" if status in FINISHED else ForwardMsg.ScriptFinishedStatus.Name(status))
        except TimeoutError:
            return Run(time.perf_counter() - started, False, f"no script_finished within {timeout:.0f} s")
        except websockets.ConnectionClosed as closed:
            return Run(time.perf_counter() - started, False, f"connection closed ({closed.code})")

    def _read(self, forward: ForwardMsg, seen: set[str]) -> str:
        """Take in one message: the page, the URL, each widget drawn. Returns a problem to report, or ""."""
        kind = forward.WhichOneof("type")
        if kind == "navigation" and forward.navigation.page_script_hash:
            self.page = forward.navigation.page_script_hash
        elif kind == "page_info_changed":
            self.query = forward.page_info_changed.query_string
        elif kind == "delta":
            delta = forward.delta
            if delta.WhichOneof("type") == "new_element":
                element_type = delta.new_element.WhichOneof("type")
                element = getattr(delta.new_element, element_type)
                self.elements.append((element_type, element))
                self.arrived.append(time.perf_counter())
                if element_type == "exception":
                    return f"{element.type}: {element.message[:120]}"
                self._widget(element_type, element, delta.fragment_id, seen)
            elif delta.WhichOneof("type") == "add_block":
                block_type = delta.add_block.WhichOneof("type")
                block = getattr(delta.add_block, block_type) if block_type else None
                state = block_state(block_type, block) if block is not None else None
                if state is not None:
                    self._keep(Widget(block_type, getattr(block, "label", ""), state, delta.fragment_id), seen)
        return ""

    def _widget(self, element_type: str, element, fragment: str, seen: set[str]) -> None:
        widget_id = element.id if "id" in element.DESCRIPTOR.fields_by_name else ""
        if not widget_id:
            return
        label = getattr(element, "label", "")
        if element_type == "bidi_component":
            label = widget_id.rsplit("-", 1)[-1]  # its key: the page's name for it
            if element.WhichOneof("data") == "json":
                self.data[label] = json.loads(element.json)[0]  # a one-item list (appkit.interactive)
            known = self.widgets.get(widget_id)
            state = known.state if known else WidgetState(id=widget_id)  # sent once the component sets a value
        else:
            state = initial_state(element_type, element)
            known = self.widgets.get(widget_id)
            if known is not None and not getattr(element, "set_value", False):
                state = known.state  # the browser keeps what the person chose
        if state is not None:
            self._keep(Widget(element_type, label, state, fragment), seen)

    def _keep(self, widget: Widget, seen: set[str]) -> None:
        self.widgets[widget.state.id] = widget
        seen.add(widget.state.id)

    def _forget(self, fragment: str, seen: set[str]) -> None:
        """Widgets the run did not draw again are gone (in a fragment's run: only that fragment's own)."""
        for widget_id, widget in list(self.widgets.items()):
            if widget_id not in seen and (not fragment or widget.fragment == fragment):
                del self.widgets[widget_id]


def dechunk(payload: bytes) -> bytes:
    """An HTTP/1.1 chunked body's bytes."""
    out = b""
    while payload:
        size, _, rest = payload.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        out, payload = out + rest[:n], rest[n + 2:]
    return out
