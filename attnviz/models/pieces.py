"""A text as a model's pieces: ids, the pieces' labels for axes, which are special ([CLS], <s>, …), which stand for
characters the vocabulary lacks, and the word each belongs to."""

from __future__ import annotations

import json
from dataclasses import dataclass

LABEL_CHARS = 40  # a label longer than this is cut (a long unknown word, a run of spaces)


class TextError(ValueError):
    """Text the model cannot take (empty, or longer than it reads here); the message says why."""


@dataclass
class Pieces:
    tokens: list[str]  # the tokenizer's own strings ("##gged", "Ġdog", "▁dog")
    ids: list[int]
    words: list[int | None]  # the word each piece belongs to; None for special pieces
    spans: list[tuple[int, int]]  # each piece's characters in the text ((0, 0) for special pieces)
    text: str
    special: list[bool]  # added by the tokenizer ([CLS], [SEP], <s>, </s>)
    unknown: list[bool]  # the vocabulary's unknown piece ([UNK], <unk>), standing for characters it lacks
    shown: list[str]  # what each piece reads as on an axis (see Reader.label)

    def __len__(self) -> int:
        return len(self.ids)

    def labels(self) -> list[str]:
        """Axis labels: the piece as it reads, or for an unknown piece its own token and the text it stands for."""
        return [f"{t} {cut(self.text[a:b])}" if u else s
                for t, s, u, (a, b) in zip(self.tokens, self.shown, self.unknown, self.spans)]


def cut(text: str, chars: int = LABEL_CHARS) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def spaced(piece: str) -> str:
    """A piece as a label: spaces shown as ·, a line break as ↵, another unprintable character as its code (\\x1d),
    nothing as ∅; cut to LABEL_CHARS."""
    shown = piece.replace(" ", "·").replace("\n", "↵")
    shown = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in shown)
    return cut(shown or "∅")


def _byte_of() -> dict[str, int]:
    """Byte-level BPE's alphabet (GPT-2's bytes_to_unicode, inverted): the character that stands for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(256 + k): b for k, b in enumerate(others)}}


BYTE_OF = _byte_of()
CHARACTER_BYTES = 4  # UTF-8's longest character: a run of pieces longer than this that is no character is left alone


def _bytes_of(token: str) -> bytes | None:
    """A byte-level BPE token's bytes, or None for a token outside its alphabet (a special piece)."""
    return bytes(BYTE_OF[c] for c in token) if token and all(c in BYTE_OF for c in token) else None


def _whole(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def whole_characters(tokens: list[str], shown: list[str]) -> list[str]:
    """Labels where consecutive byte-level pieces split a character (Chinese, an emoji): each reads as the text they
    make together and which part it is ("中 1/2", "中 2/2"), as Long text's document shows the character once."""
    shown = list(shown)
    run: list[int] = []  # the pieces of a character not yet whole
    for i in range(len(tokens)):
        data = _bytes_of(tokens[i])
        if data is None or (not run and _whole(data)):
            run = []
            continue
        run.append(i)
        together = b"".join(_bytes_of(tokens[j]) for j in run)
        if _whole(together):
            text = spaced(together.decode("utf-8"))
            for k, j in enumerate(run):
                shown[j] = f"{text} {k + 1}/{len(run)}"
            run = []
        elif len(together) > CHARACTER_BYTES:
            run = [i] if not _whole(data) else []
    return shown


class Reader:
    """A model's tokenizer (a `tokenizers.Tokenizer`) with what attnviz needs of it: the pieces of a text, labelled.

    Labels follow the tokenizer's kind: WordPiece pieces as they are ("wa", "##gged"); byte-level BPE pieces decoded
    one by one ("Ġdog" reads "·dog"; in a text, the pieces a character is split into read as it and their part, "中 1/2",
    "中 2/2"; a piece alone that is part of a character, a next piece's candidate, shows its bytes, "\xf0\x9f\x90");
    SentencePiece's ▁ as ·."""

    def __init__(self, tokenizer, max_pieces: int, name: str = "The model"):
        self.tokenizer, self.max_pieces, self.name = tokenizer, max_pieces, name
        spec = json.loads(tokenizer.to_str())
        decoder = spec.get("decoder") or {}
        kinds = [decoder.get("type")] + [d.get("type") for d in decoder.get("decoders") or []]
        self.style = "bytes" if "ByteLevel" in kinds else "wordpiece" if "WordPiece" in kinds else "plain"
        self.unk = (spec.get("model") or {}).get("unk_token")

    def label(self, token: str, token_id: int) -> str:
        if self.style == "bytes":
            text = self.tokenizer.decode([token_id], skip_special_tokens=False)
            if "\ufffd" in text and all(c in BYTE_OF for c in token):  # part of a character: its bytes, as \xNN
                text = bytes(BYTE_OF[c] for c in token).decode("utf-8", "backslashreplace")
            return spaced(text)
        if self.style == "wordpiece":
            return cut(token)
        return spaced(token.replace("▁", " "))

    def labels(self, ids: list[int]) -> list[str]:
        """Labels of ids that no text gave (the decoder's next pieces); an id the tokenizer does not know (a model whose
        output is larger than its tokenizer's vocabulary) reads ⟨id N⟩."""
        tokens = [self.tokenizer.id_to_token(i) for i in ids]
        return [f"⟨id {i}⟩" if token is None else self.label(token, i) for token, i in zip(tokens, ids)]

    def vocabulary_gap(self, outputs: int) -> str | None:
        """What to say when a model scores more pieces (`outputs`) than its tokenizer knows, else None."""
        known = self.tokenizer.get_vocab_size(with_added_tokens=True)
        if outputs <= known:
            return None
        return (f"{self.name}'s tokenizer knows {known:,} pieces, but the model scores {outputs:,}: the other "
                f"{outputs - known:,} have no text, and read ⟨id N⟩ in the bars. Is the tokenizer another model's?")

    def __call__(self, text: str, limit: int | None = None) -> Pieces:
        limit = limit or self.max_pieces
        if not text or not text.strip():
            raise TextError("Type a text: the model sees nothing to read.")
        encoding = self.tokenizer.encode(text)
        special = [bool(s) for s in encoding.special_tokens_mask]
        if all(special):
            raise TextError("Type a sentence: the model sees no words in this text.")
        n = len(encoding.ids)
        if n > limit:
            raise TextError(f"{self.name} reads at most {limit:,} pieces here (its special pieces included); this text "
                            f"has {n:,}. Shorten it by about {n - limit:,} pieces.")
        tokens, ids = list(encoding.tokens), list(encoding.ids)
        shown = [self.label(t, i) for t, i in zip(tokens, ids)]
        return Pieces(tokens, ids, list(encoding.word_ids), [tuple(s) for s in encoding.offsets], text, special,
                      [self.unk is not None and t == self.unk for t in tokens], self.joined(tokens, shown))

    def joined(self, tokens: list[str], shown: list[str]) -> list[str]:
        """The labels of a text's pieces in order, a character split over pieces read whole (whole_characters)."""
        return whole_characters(tokens, shown) if self.style == "bytes" else shown

    def append(self, pieces: Pieces, token: int) -> Pieces:
        """`pieces` with one more id at their end (a decoder's next piece), its text added to the text."""
        piece = self.tokenizer.decode([token], skip_special_tokens=False)
        start = len(pieces.text)
        token_text = self.tokenizer.id_to_token(token) or ""
        word = max((w for w in pieces.words if w is not None), default=-1) + 1  # a word of its own
        return Pieces([*pieces.tokens, token_text], [*pieces.ids, token], [*pieces.words, word],
                      [*pieces.spans, (start, start + len(piece))], pieces.text + piece, [*pieces.special, False],
                      [*pieces.unknown, self.unk is not None and token_text == self.unk],
                      self.joined([*pieces.tokens, token_text], [*pieces.shown, self.label(token_text, token)]))


MAX_UPLOAD_BYTES = 2_000_000  # a text of a model's whole context is far smaller (SmolLM2's 8,192 pieces: ~40 kB)


def read_text(data: bytes, name: str = "the file") -> str:
    """An uploaded text file's text (UTF-8, or UTF-16 with its byte-order mark; a UTF-8 one dropped), or a ValueError
    that says why it is not one."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(f"{name} has {len(data):,} bytes; a text file of at most {MAX_UPLOAD_BYTES:,} is read.")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 (Windows' "Unicode" text): its zero bytes are text
        try:
            data = data.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{name} starts as UTF-16 text but cannot be read as it.") from None
    if b"\x00" in data:
        raise ValueError(f"{name} is not a text file (it holds zero bytes, as binary files do).")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"{name} is not UTF-8 text (byte {error.start:,} cannot be read).") from None
    if not text.strip():
        raise ValueError(f"{name} holds no text.")
    return text
