"""Character cards as SillyTavern writes them (HISTORY_FORMATS.md "Character cards").

SillyTavern (src/character-card-parser.js) drops the PNG's text chunks and inserts, before IEND,
a `tEXt` chunk `chara` holding base64 of the V2 JSON and, since 1.12, a `ccv3` chunk with the
same card as V3; other tools write V3 alone. The fields below follow a real V2 export (the
extensions SillyTavern adds: talkativeness, fav, world, depth_prompt; a lorebook entry's
`extensions` with position/depth/probability…).
"""

import base64
import copy
import io
import json
import struct
import zlib

from PIL import Image, ImageDraw

V2_CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Seraphina",
        "description": (
            "{{char}} is a guardian of the Eldoria forest, a gentle healer with pink hair and "
            "amber eyes. She found {{user}} wounded at the edge of the glade."
        ),
        "personality": "caring, protective, soft-spoken, fiercely loyal to {{user}}",
        "scenario": "{{user}} wakes up in {{char}}'s cottage after being attacked by shadow beasts.",
        "first_mes": "*{{char}} leans over you, her hand glowing softly.* You're awake, {{user}}. Don't move too fast.",
        "mes_example": "<START>\n{{user}}: Where am I?\n{{char}}: *smiles* Safe. This is my home in the glade.",
        "creator_notes": "Works best with a warm, slow-paced story.",
        "system_prompt": "{{original}}\nWrite {{char}}'s next reply in a gentle voice.",
        "post_history_instructions": "Stay in character as {{char}}.",
        "alternate_greetings": [
            "*The fire crackles.* {{user}}, you slept for two days. I kept watch.",
            "*{{char}} hums while grinding herbs.* Oh! You're finally up.",
        ],
        "character_book": {
            "name": "Eldoria",
            "description": "",
            "scan_depth": 2,
            "token_budget": 512,
            "recursive_scanning": False,
            "extensions": {},
            "entries": [
                {
                    "id": 0,
                    "keys": ["Eldoria", "forest"],
                    "secondary_keys": [],
                    "comment": "The forest",
                    "content": "Eldoria is an ancient forest where the trees remember every traveller's name.",
                    "constant": False,
                    "selective": True,
                    "insertion_order": 100,
                    "enabled": True,
                    "position": "before_char",
                    "use_regex": True,
                    "extensions": {"position": 0, "exclude_recursion": False, "probability": 100,
                                   "useProbability": True, "depth": 4, "selectiveLogic": 0, "group": ""},
                },
                {
                    "id": 1,
                    "keys": ["Shadow beast", "SHADOWS"],
                    "secondary_keys": [],
                    "comment": "The enemy",
                    "content": "Shadow beasts fear firelight; {{char}} keeps a lantern lit every night.",
                    "constant": False,
                    "selective": False,
                    "insertion_order": 90,
                    "enabled": True,
                    "position": "after_char",
                    "extensions": {"position": 1, "depth": 4},
                },
                {
                    "id": 2,
                    "keys": ["amulet"],
                    "secondary_keys": [],
                    "comment": "Disabled note",
                    "content": "The amulet was lost long ago.",
                    "constant": False,
                    "selective": False,
                    "insertion_order": 100,
                    "enabled": False,
                    "position": "before_char",
                    "extensions": {},
                },
            ],
        },
        "tags": ["fantasy", "healer"],
        "creator": "example-creator",
        "character_version": "1.2",
        "extensions": {"talkativeness": "0.5", "fav": False, "world": "Eldoria",
                       "depth_prompt": {"prompt": "", "depth": 4, "role": "system"}},
    },
}

CHINESE_CARD = {
    "spec": "chara_card_v3",
    "spec_version": "3.0",
    "data": {
        "name": "林晚",
        "description": "{{char}}是一名在上海开书店的年轻女子，总是记得{{user}}喜欢的书。",
        "personality": "温柔、细心、爱开玩笑",
        "scenario": "雨天的傍晚，{{user}}走进了{{char}}的书店。",
        "first_mes": "欢迎光临～{{user}}，今天想看点什么？",
        "mes_example": "<START>\n{{user}}：有推荐的诗集吗？\n{{char}}：有呀，你一定会喜欢这本。",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": ["下雨了，{{user}}，进来躲躲雨吧。"],
        "character_book": {"entries": [
            {"keys": ["书店", "书屋"], "content": "{{char}}的书店叫“晚风书屋”，开在弄堂深处。", "enabled": True,
             "insertion_order": 10, "extensions": {}},
        ]},
        "tags": ["日常"],
        "creator": "",
        "character_version": "",
        "extensions": {},
        "group_only_greetings": [],
        "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
        "nickname": "晚晚",
        "creation_date": 1764547200,
        "modification_date": 1764547200,
    },
}


def as_v3(card: dict) -> dict:
    v3 = copy.deepcopy(card)
    v3["spec"], v3["spec_version"] = "chara_card_v3", "3.0"
    v3["data"].setdefault("group_only_greetings", [])
    v3["data"].setdefault("assets", [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}])
    return v3


def picture(size=(256, 384), colour=(200, 120, 160)) -> bytes:
    """A card picture: a dusk gradient with a pale face-like disc, so screenshots show a picture."""
    width, height = size
    image = Image.new("RGB", size, colour)
    draw = ImageDraw.Draw(image)
    for y in range(height):
        t = y / max(height - 1, 1)
        draw.line([(0, y), (width, y)], fill=(int(colour[0] * (1 - t) + 40 * t), int(colour[1] * (1 - t) + 60 * t),
                                                int(colour[2] * (1 - t) + 110 * t)))
    r = width // 4
    draw.ellipse([width // 2 - r, height // 3 - r, width // 2 + r, height // 3 + r], fill=(250, 225, 205))
    draw.rectangle([width // 2 - r, height // 3 - r, width // 2 + r, height // 3 - r // 3], fill=(235, 140, 180))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def with_text_chunks(png: bytes, chunks: list[tuple[str, str]]) -> bytes:
    """The PNG with `tEXt` chunks inserted before IEND, as SillyTavern's writer does."""
    assert png.endswith(_chunk(b"IEND", b""))
    body = png[: -len(_chunk(b"IEND", b""))]
    for keyword, text in chunks:
        body += _chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + text.encode("latin-1"))
    return body + _chunk(b"IEND", b"")


def b64(card: dict) -> str:
    return base64.b64encode(json.dumps(card, ensure_ascii=False).encode()).decode()


def v2_png(card: dict = V2_CARD, **kw) -> bytes:
    return with_text_chunks(picture(**kw), [("chara", b64(card))])


def v3_png(card: dict = V2_CARD, *, with_v2: bool = True) -> bytes:
    chunks = [("chara", b64(card))] if with_v2 else []
    return with_text_chunks(picture(), [*chunks, ("ccv3", b64(as_v3(card)))])
