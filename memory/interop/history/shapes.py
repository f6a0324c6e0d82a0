"""The shape every reader yields (SPEC H1): conversations of lines, whatever the app.

A reader turns one app's export into `Conversation`s, one at a time (streamed). A `Line` is
what the person saw: a speaker, the text exactly as in the file, and its source time to the
second, timezone-aware. Everything else the reader met is counted in `Conversation.skipped`
by kind (never stored), branches not taken are the line's `alternatives` (kept hidden,
like regenerate's "2 / 3") or counted as `Skip.BRANCH`, and the app's own memory of the
person (ChatGPT's custom instructions and memory) comes as `notes`, which become candidate
experiences, never lines.

Keys are the app's own ids (a message id, or a position where the app has none); the mid a
line is stored under is derived from (app, conversation key, line key) by `mid_for`, so the
same file imported again names the same mids.
"""

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from django.utils.translation import gettext_lazy as _


class Skip:
    """The kinds a reader counts and never stores (HISTORY_FORMATS.md, "What becomes a line")."""

    SYSTEM = "system"  # system messages
    CUSTOM_INSTRUCTIONS = "custom_instructions"  # ChatGPT user_editable_context
    APP_MEMORY = "app_memory"  # ChatGPT model_editable_context
    TOOL = "tool"  # tool and browsing output, tool calls
    REASONING = "reasoning"  # thoughts, reasoning recaps, thinking blocks
    NARRATION = "narration"  # SillyTavern narrator messages
    ATTACHMENT_TEXT = "attachment_text"  # Claude attachments' extracted text
    SYSTEM_PROMPT = "system_prompt"  # Open WebUI chat.params.system
    ERROR = "error"  # Open WebUI assistant errors
    EMPTY = "empty"  # a message with no text
    HIDDEN = "hidden"  # ChatGPT is_visually_hidden_from_conversation
    OTHER_CONTENT = "other_content"  # a content type no line is made of
    BRANCH = "branch"  # messages on branches not taken that are not kept as alternatives
    # Images the file holds that we do not take (each also counted as an image missing):
    IMAGE_TOO_LARGE = "image_too_large"  # over PREVIOUSLY_IMAGE_MAX_BYTES or _PIXELS
    IMAGE_REFUSED = "image_refused"  # not a JPEG, PNG, GIF or WebP by content (or not decodable)

    ALL = (
        SYSTEM, CUSTOM_INSTRUCTIONS, APP_MEMORY, TOOL, REASONING, NARRATION, ATTACHMENT_TEXT,
        SYSTEM_PROMPT, ERROR, EMPTY, HIDDEN, OTHER_CONTENT, BRANCH, IMAGE_TOO_LARGE, IMAGE_REFUSED,
    )

    LABELS = {
        SYSTEM: _("system messages"), CUSTOM_INSTRUCTIONS: _("custom instructions"), APP_MEMORY: _("the app's memory"),
        TOOL: _("tool and browsing output"), REASONING: _("reasoning"), NARRATION: _("narration"),
        ATTACHMENT_TEXT: _("attachments' text"), SYSTEM_PROMPT: _("system prompts"), ERROR: _("error texts"),
        EMPTY: _("empty messages"), HIDDEN: _("hidden messages"), OTHER_CONTENT: _("other content"),
        BRANCH: _("branches not taken"), IMAGE_TOO_LARGE: _("images over the size limit"),
        IMAGE_REFUSED: _("images that are not a picture we take"),
    }


APPS = ("chatgpt", "claude", "openwebui", "sillytavern")
# A short tag per app in the mids ("hg_…"): a mid is at most 64 characters (Message.mid).
MID_TAG = {"chatgpt": "hg", "claude": "hc", "openwebui": "hw", "sillytavern": "hs"}


def mid_for(app: str, conversation: str, key: str) -> str:
    """The stable mid of a source message: the app's tag and a digest of its ids."""
    digest = hashlib.blake2b(f"{app}\x1f{conversation}\x1f{key}".encode(), digest_size=12).hexdigest()
    return f"{MID_TAG[app]}_{digest}"


@dataclass
class Alternative:
    """A branch not taken, kept as a hidden alternative of its line (regenerate's "2 / 3")."""

    key: str
    text: str
    at: datetime


@dataclass(frozen=True, eq=False)
class InlineImage:
    """An image the file holds itself (an Open WebUI `data:` URL), decoded and within
    PREVIOUSLY_IMAGE_MAX_BYTES: found, as a zip member is; the writer checks and re-encodes it
    as it does a member (memory.images.check_image)."""

    data: bytes
    name: str


@dataclass
class Line:
    key: str
    speaker: str  # "user" or "assistant"
    text: str
    at: datetime
    # Images the message showed: by the app's file id (ChatGPT's asset pointers), which the
    # writer finds in the archive or counts missing, or held inline (`InlineImage`, found).
    images: list[str | InlineImage] = field(default_factory=list)
    # Alternatives of an assistant line answering a user line (other replies to that line).
    alternatives: list[Alternative] = field(default_factory=list)


@dataclass
class Note:
    """What the app itself kept about the person (ChatGPT's memory and custom instructions):
    a candidate experience citing the import (C3), never a line."""

    kind: str  # Skip.APP_MEMORY or Skip.CUSTOM_INSTRUCTIONS
    text: str


@dataclass
class Conversation:
    app: str
    key: str  # the app's conversation id
    title: str
    lines: list[Line] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    notes: list[Note] = field(default_factory=list)
    record: str = ""  # where it is in the file, for refusals: "conversations.json[12]"

    def mid(self, key: str) -> str:
        return mid_for(self.app, self.key, key)
