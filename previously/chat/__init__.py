"""The chat: page, websocket turn, recall-backed prompt assembly (issue 3)."""
