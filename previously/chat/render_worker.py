"""The helper process that renders long replies' Markdown (previously.chat.markdown, issue 24
point 4): one JSON line in, {"text", "leave"}; one JSON line out, {"html"} (null when the text
could not be rendered); until its input closes (the server has gone). Run as `python -m previously.chat.render_worker`."""

import json
import sys

from previously.chat.markdown import sanitised_html


def main() -> None:
    # json.dumps writes ASCII (a lone surrogate as \\udXXX), so no encoding can fail either way.
    for line in sys.stdin:
        asked = json.loads(line)
        try:
            answer = {"html": sanitised_html(asked["text"], asked["leave"])}
        except Exception:  # noqa: BLE001 - the server renders it itself and meets the error there
            answer = {"html": None}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
