"""Realistic export fixtures, shaped after real exports (HISTORY_FORMATS.md; the shapes other
importers read): ChatGPT's mapping tree, Claude's chat_messages, Open WebUI's history tree,
SillyTavern's JSON Lines."""

import base64
import io
import json
import zipfile

from PIL import Image

T0 = 1_718_000_000.0  # 2024-06-10 06:13:20 UTC


def png(color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(out, "PNG")
    return out.getvalue()


def data_url(data: bytes, mime: str = "image/png") -> str:
    """An image as Open WebUI keeps one it was given: the browser's FileReader data: URL."""
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def node(nid, parent, children, message=None):
    return {"id": nid, "message": message, "parent": parent, "children": children}


def gmsg(nid, role, parts=None, *, t=None, ctype="text", hidden=False, recipient="all", **content):
    c = {"content_type": ctype, **content}
    if parts is not None:
        c["parts"] = parts
    meta = {"is_visually_hidden_from_conversation": True} if hidden else {}
    return {"id": nid, "author": {"role": role, "name": None, "metadata": {}}, "create_time": t, "update_time": None,
            "content": c, "status": "finished_successfully", "end_turn": True, "weight": 1.0,
            "metadata": meta, "recipient": recipient}


def chatgpt_conversation(cid="c-1", title="Trip to Hangzhou", t0=T0):
    """A conversation with everything a real one has: the null root, a hidden system message,
    custom instructions and memory, a regenerated reply (2 alternatives), an edited prompt
    branch, a tool call and its output, reasoning, an image part, code, a null time."""
    m = {}

    def add(nid, parent, children, message=None):
        m[nid] = node(nid, parent, children, message)

    add("root", None, ["sys"])
    add("sys", "root", ["ctx"], gmsg("sys", "system", [""], hidden=True))
    add("ctx", "sys", ["mem"], gmsg("ctx", "user", None, ctype="user_editable_context", hidden=True,
                                    user_profile="I live in Shanghai and teach piano.",
                                    user_instructions="Answer briefly."))
    add("mem", "ctx", ["u1"], gmsg("mem", "user", None, ctype="model_editable_context", hidden=True,
                                   model_set_context="1. [2024-05-01]. Has a cat named Mochi."))
    add("u1", "mem", ["a1x", "a1"], gmsg("u1", "user", ["周末想去杭州，有什么建议？"], t=t0))
    add("a1x", "u1", [], gmsg("a1x", "assistant", ["First draft: go to West Lake."], t=t0 + 5))
    add("a1", "u1", ["u2x", "u2"], gmsg("a1", "assistant", ["可以去西湖和灵隐寺。"], t=t0 + 9))
    add("u2x", "a1", ["a2x"], gmsg("u2x", "user", ["(edited away) what about food?"], t=t0 + 60))
    add("a2x", "u2x", [], gmsg("a2x", "assistant", ["Try the fish."], t=t0 + 65))
    add("u2", "a1", ["call"], gmsg("u2", "user", ["Look at this photo", {"content_type": "image_asset_pointer",
                                                                           "asset_pointer": "file-service://file-AbC123",
                                                                           "size_bytes": 100, "width": 8, "height": 6}],
                                        t=t0 + 70, ctype="multimodal_text"))
    add("call", "u2", ["out"], gmsg("call", "assistant", None, t=t0 + 71, ctype="code", recipient="python",
                                    text="print(1)"))
    add("out", "call", ["think"], gmsg("out", "tool", None, t=t0 + 72, ctype="execution_output", text="1"))
    add("think", "out", ["a2"], gmsg("think", "assistant", None, t=t0 + 73, ctype="thoughts", thoughts=[]))
    add("a2", "think", ["u3"], gmsg("a2", "assistant", ["A lovely lake view."], t=None))
    add("u3", "a2", ["a3"], gmsg("u3", "user", [""], t=t0 + 4 * 3600))  # empty: not a line
    add("a3", "u3", [], gmsg("a3", "assistant", None, t=t0 + 4 * 3600 + 3, ctype="code", text="def f():\n    pass"))
    return {"title": title, "create_time": t0 - 1, "update_time": t0 + 5 * 3600, "mapping": m,
            "moderation_results": [], "current_node": "a3", "conversation_id": cid, "id": cid,
            "default_model_slug": "gpt-4o"}


def chatgpt_zip(path, conversations, *, images=None, split=False, extra_members=None):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        if split:
            for i, conv in enumerate(conversations):
                z.writestr(f"conversations-{i:03d}.json", json.dumps([conv], ensure_ascii=False))
        else:
            z.writestr("conversations.json", json.dumps(conversations, ensure_ascii=False))
        z.writestr("user.json", json.dumps({"id": "user-1", "email": "a@example.com"}))
        z.writestr("chat.html", "<html></html>")
        for name, data in (images or {}).items():
            z.writestr(name, data)
        for name, data in (extra_members or {}).items():
            z.writestr(name, data)
    return path


def claude_conversations():
    return [{
        "uuid": "9d1c-claude-1", "name": "Piano practice", "created_at": "2025-02-01T09:00:00.000000Z",
        "updated_at": "2025-02-01T10:00:00Z", "account": {"uuid": "acc"},
        "chat_messages": [
            {"uuid": "m1", "sender": "human", "text": "How long should I practise scales?", "created_at":
             "2025-02-01T09:00:01.512345Z", "content": [{"type": "text", "text": "How long should I practise scales?"}],
             "attachments": [{"file_name": "plan.txt", "extracted_content": "Mon: scales"}], "files": []},
            {"uuid": "m2", "sender": "assistant", "text": "Ten minutes a day is plenty.",
             "created_at": "2025-02-01T09:00:09Z",
             "content": [{"type": "thinking", "thinking": "..."}, {"type": "text", "text": "Ten minutes a day is plenty."},
                         {"type": "tool_use", "name": "search", "input": {}}], "attachments": [], "files": []},
            {"uuid": "m3", "sender": "human", "text": "", "created_at": "2025-02-01T09:01:00Z", "content": [],
             "attachments": [], "files": [{"file_name": "photo.jpg"}]},
            {"uuid": "m4", "sender": "human", "text": "谢谢！", "created_at": "2025-02-01T11:30:00Z",
             "content": [], "attachments": [], "files": []},
        ],
    }]


def openwebui_chats():
    msgs = {
        "u1": {"id": "u1", "parentId": None, "childrenIds": ["a1", "a1b"], "role": "user", "content": "Hi there",
               "timestamp": 1_730_000_000},
        "a1": {"id": "a1", "parentId": "u1", "childrenIds": [], "role": "assistant", "content": "Hello! (first)",
               "timestamp": 1_730_000_005},
        "a1b": {"id": "a1b", "parentId": "u1", "childrenIds": ["u2"], "role": "assistant", "content": "Hey! (second)",
                "timestamp": 1_730_000_050},
        "u2": {"id": "u2", "parentId": "a1b", "childrenIds": ["a2"], "role": "user", "content": "Tell me a joke",
               "timestamp": 1_730_000_100},
        "a2": {"id": "a2", "parentId": "u2", "childrenIds": [], "role": "assistant", "content": "",
               "error": {"content": "upstream timeout"}, "timestamp": 1_730_000_105},
    }
    return [{"id": "owui-1", "user_id": "u-1", "title": "Greetings", "created_at": 1_730_000_000,
             "updated_at": 1_730_000_200, "chat": {"title": "Greetings", "params": {"system": "Be terse."},
                                                   "messages": [], "history": {"messages": msgs, "currentId": "a2"}}}]


def sillytavern_lines(send_dates=("June 14, 2025 6:22pm", "June 14, 2025 6:23pm", "June 14, 2025 6:25pm")):
    d1, d2, d3 = send_dates
    return [
        {"user_name": "Alex", "character_name": "Mia", "create_date": "2025-6-14@18h22m05s",
         "chat_metadata": {"integrity": "x"}},
        {"name": "Mia", "is_user": False, "is_system": False, "send_date": d1, "mes": "Hello, Alex!",
         "swipes": ["Hello, Alex!", "Hi, you're back!"], "swipe_id": 0, "extra": {}},
        {"name": "Alex", "is_user": True, "is_system": False, "send_date": d2, "mes": "Good evening.", "extra": {}},
        {"name": "Mia", "is_user": False, "is_system": False, "send_date": d3, "mes": "Evening! Tea?",
         "swipes": ["Evening!", "Evening! Tea?", ""], "swipe_id": 1,
         "swipe_info": [{"send_date": d3}, {"send_date": d3}, {}], "extra": {"reasoning": "be warm"}},
        {"name": "Narrator", "is_user": False, "is_system": False, "send_date": d3, "mes": "The rain starts.",
         "extra": {"type": "narrator"}},
        {"name": "SillyTavern System", "is_user": False, "is_system": True, "send_date": d3, "mes": "hidden note",
         "extra": {}},
    ]


def write_jsonl(path, lines):
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    return path
