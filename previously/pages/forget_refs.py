"""What a delete-for-good confirmation shows (SPEC D1, D6, D7), shared by the message and the
conversation confirmations: the refs of `memory.deletion` grouped for templates/forget_refs.html."""


def refs_context(refs: list[dict] | None) -> dict:
    refs = refs or []
    return {
        "refs": refs,
        "has_replies": any(r["kind"] == "reply" for r in refs),
        "has_card_lines": any(r["kind"] == "card" for r in refs),
    }
