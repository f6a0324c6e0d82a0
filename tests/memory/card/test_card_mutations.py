"""K2/K3: every mutation tool, accepted and refused, with the exact feedback."""

from dataclasses import replace
from datetime import date

from memory.card.format import Card, Fact, HorizonItem, IdentityLine, Lesson, NowItem, parse
from memory.card.mutations import (
    TOOLS,
    add_anchor_fact,
    add_horizon,
    add_lesson,
    add_now,
    apply_tool,
    promote_now,
    remove_anchor_fact,
    remove_lesson,
    remove_now,
    resolve_horizon,
    set_identity,
    set_portrait,
    tool_arguments,
)
from tests.memory.card.samples import SEED_CARD, refs_exist

SEED = parse(SEED_CARD)
REF = "2026/08/17/0515"


def refused(result, message):
    """A refusal carries the message and the very card it was given (K3)."""
    return result.accepted is False and result.message == message and result.card is SEED


# --- the tool table -------------------------------------------------------------------


def test_k3_every_agent_tool_maps_to_one_mutation_with_the_tool_arguments():
    assert {name: tool_arguments(name) for name in TOOLS} == {
        "set_identity": ("field", "value", "refs"),
        "set_portrait": ("text",),
        "add_anchor_fact": ("text", "refs"),
        "remove_anchor_fact": ("index",),
        "add_now": ("text", "refs", "since"),
        "remove_now": ("index",),
        "promote_now": ("index", "refs", "text"),
        "add_horizon": ("text", "by", "refs"),
        "resolve_horizon": ("index", "outcome"),
        "add_lesson": ("text", "refs"),
        "remove_lesson": ("index",),
    }


def test_k3_apply_tool_runs_the_named_mutation():
    result = apply_tool(SEED, "remove_now", {"index": 1}, refs_exist=refs_exist)
    assert result.accepted and result.card.now == ()


def test_k3_apply_tool_refuses_an_unknown_tool():
    result = apply_tool(SEED, "rewrite_card", {}, refs_exist=refs_exist)
    assert result.accepted is False
    assert result.message.startswith("unknown tool 'rewrite_card' — one of set_identity, ")


def test_k3_apply_tool_refuses_missing_and_unexpected_arguments():
    result = apply_tool(SEED, "add_now", {"text": "x", "when": "today"}, refs_exist=refs_exist)
    assert refused(
        result, "add_now takes arguments text, refs, since — missing refs, since; unexpected when"
    )


# --- immutability ---------------------------------------------------------------------


def test_k3_an_accepted_mutation_leaves_the_input_card_untouched():
    before = parse(SEED_CARD)
    add_now(before, text="新工作第一周 🎉", refs=[REF], since="2026-08-17", refs_exist=refs_exist)
    assert before == SEED


def test_k3_a_mutation_changes_only_what_it_names():
    result = add_now(
        SEED, text="Learning Rust", refs=[REF], since="2026-08-17", refs_exist=refs_exist
    )
    assert replace(result.card, now=SEED.now) == SEED


# --- refs (K2: no evidence, no write) -------------------------------------------------


def test_k2_refs_are_required():
    result = add_anchor_fact(SEED, text="Moved to Berlin", refs=[], refs_exist=refs_exist)
    assert refused(
        result,
        "refs are required — cite at least one slice as YYYY/MM/DD/HHMM (no evidence, no write)",
    )


def test_k2_refs_must_be_a_list_not_a_string():
    result = add_anchor_fact(SEED, text="Moved to Berlin", refs=REF, refs_exist=refs_exist)
    assert refused(
        result,
        "refs must be a list of YYYY/MM/DD/HHMM strings, e.g."
        " ['2026/08/11/1426'] — got the single string '2026/08/17/0515'",
    )


def test_k2_refs_must_have_the_slice_shape():
    result = add_anchor_fact(
        SEED, text="Moved to Berlin", refs=["[2026/08/17/0515]"], refs_exist=refs_exist
    )
    assert refused(
        result, "ref '[2026/08/17/0515]' is not a valid YYYY/MM/DD/HHMM, e.g. '2026/08/11/1426'"
    )


def test_k2_refs_must_be_a_real_time():
    result = add_anchor_fact(
        SEED, text="Moved to Berlin", refs=["2026/08/17/2460"], refs_exist=refs_exist
    )
    assert refused(
        result, "ref '2026/08/17/2460' is not a valid YYYY/MM/DD/HHMM, e.g. '2026/08/11/1426'"
    )


def test_k2_refs_must_resolve_to_slices_of_the_profile():
    result = add_anchor_fact(
        SEED, text="Moved to Berlin", refs=[REF, "2025/01/01/0900"], refs_exist=refs_exist
    )
    assert refused(
        result,
        "refs not found among this profile's slices: [2025/01/01/0900]"
        " — cite slices that exist (read_slice to check)",
    )


def test_k2_too_many_refs_are_refused_with_the_limit():
    refs = [f"2026/08/17/05{m:02d}" for m in range(7)]
    result = add_anchor_fact(SEED, text="Moved to Berlin", refs=refs, refs_exist=refs_exist)
    assert refused(result, "7 refs, limit 6 per item — cite the strongest evidence")


def test_k2_a_repeated_ref_is_stored_once():
    result = add_anchor_fact(SEED, text="Moved to Berlin", refs=[REF, REF], refs_exist=refs_exist)
    assert result.card.facts[-1] == Fact("Moved to Berlin", (REF,))


def test_k2_the_resolver_is_not_asked_when_the_write_is_refused_earlier():
    asked = []
    result = add_now(
        SEED,
        text="x",
        refs=[REF],
        since="someday",
        refs_exist=lambda refs: asked.append(refs) or set(),
    )
    assert result.accepted is False and asked == []


# --- set_identity ---------------------------------------------------------------------


def test_k2_set_identity_replaces_an_existing_field_in_place():
    result = set_identity(SEED, field="name", value="Alexandra", refs=[REF], refs_exist=refs_exist)
    assert result.accepted
    assert result.message == "Identity 'name' set to 'Alexandra' (3/8 lines)"
    assert result.card.identity[0] == IdentityLine("name", "Alexandra", (REF,))
    assert result.card.identity[1:] == SEED.identity[1:]


def test_k2_set_identity_appends_a_new_field():
    result = set_identity(
        SEED, field="Pronouns", value="she/her 她", refs=[REF], refs_exist=refs_exist
    )
    assert result.message == "Identity 'Pronouns' set to 'she/her 她' (4/8 lines)"
    assert result.card.identity[-1] == IdentityLine("Pronouns", "she/her 她", (REF,))


def test_k2_set_identity_with_an_empty_value_clears_the_line():
    result = set_identity(SEED, field="Alias", value="", refs=[REF], refs_exist=refs_exist)
    assert result.message == "Identity 'Alias' cleared (2/8 lines)"
    assert [line.field for line in result.card.identity] == ["Name", "Address them as"]


def test_k2_set_identity_refuses_to_clear_a_missing_field():
    result = set_identity(SEED, field="Pronouns", value=" ", refs=[REF], refs_exist=refs_exist)
    assert refused(result, "Identity has no 'Pronouns' line — nothing to clear")


def test_k2_set_identity_refuses_a_ninth_line():
    card = Card(identity=tuple(IdentityLine(f"F{k}", "v", (REF,)) for k in range(8)))
    result = set_identity(card, field="Alias", value="Al", refs=[REF], refs_exist=refs_exist)
    assert result.accepted is False and result.card is card
    assert result.message == (
        "Identity has 8/8 lines — change an existing field or clear one (empty value) first"
    )


def test_k2_set_identity_refuses_a_field_with_a_colon():
    result = set_identity(SEED, field="Name: nick", value="Al", refs=[REF], refs_exist=refs_exist)
    assert refused(
        result,
        "identity field 'Name: nick' must not contain ':' — e.g. 'Name',"
        " 'Address them as', 'Pronouns', 'Alias'",
    )


def test_k2_set_identity_refuses_an_overlong_value():
    result = set_identity(SEED, field="Name", value="A" * 121, refs=[REF], refs_exist=refs_exist)
    assert refused(result, "identity 'Name' is 121 chars, limit 120 — compress and retry")


def test_k2_set_identity_with_the_same_value_changes_nothing():
    card = set_identity(SEED, field="Name", value="Al", refs=[REF], refs_exist=refs_exist).card
    result = set_identity(card, field="Name", value="Al", refs=[REF], refs_exist=refs_exist)
    assert result.accepted and result.card is card
    assert result.message == "Identity 'Name' already is 'Al' — nothing changed"


# --- set_portrait ---------------------------------------------------------------------


def test_k2_set_portrait_refuses_an_overlong_portrait_with_the_numbers():
    result = set_portrait(SEED, text="字" * 2630)
    assert refused(result, "portrait is 2630 chars, limit 2400 — compress and retry")


def test_k2_set_portrait_accepts_exactly_the_limit():
    result = set_portrait(SEED, text="x" * 2400)
    assert result.accepted and result.message == "portrait set (2400/2400 chars)"


def test_k2_set_portrait_keeps_a_wrapped_paragraph_and_trims_invisible_whitespace():
    result = set_portrait(SEED, text="  Alex 是工程师, \r\nloves 🏃 runs.  \n")
    assert result.card.portrait == "Alex 是工程师,\nloves 🏃 runs."
    assert result.message == "portrait set (24/2400 chars)"


def test_k2_set_portrait_refuses_two_paragraphs():
    result = set_portrait(SEED, text="One.\n\nTwo.")
    assert refused(
        result, "portrait must be one paragraph — line 2 is blank; join the paragraphs and retry"
    )


def test_k2_set_portrait_refuses_a_line_that_would_read_as_an_anchor_fact():
    result = set_portrait(SEED, text="Alex runs.\n- Red line: no DBs")
    assert refused(
        result,
        "portrait line 2 starts with '- ' and would read as an anchor fact"
        " — reword it, or use add_anchor_fact",
    )


def test_k2_set_portrait_refuses_a_line_that_would_read_as_a_heading():
    result = set_portrait(SEED, text="## Now\nAlex runs.")
    assert refused(
        result, "portrait line 1 starts with '#' and would read as a heading — reword it"
    )


def test_k2_set_portrait_refuses_an_empty_portrait():
    assert refused(
        set_portrait(SEED, text="  \n"),
        "portrait is empty — write the third-person paragraph and retry",
    )


# --- anchor facts ---------------------------------------------------------------------


def test_k2_add_anchor_fact_appends_with_its_refs():
    result = add_anchor_fact(SEED, text="Married Sam in 2025 💍", refs=[REF], refs_exist=refs_exist)
    assert result.message == "anchor fact 3 added (3/8): 'Married Sam in 2025 💍'"
    assert result.card.facts[-1] == Fact("Married Sam in 2025 💍", (REF,))


def test_k2_add_anchor_fact_refuses_a_ninth_fact():
    card = replace(SEED, facts=tuple(Fact(f"fact {k}", (REF,)) for k in range(8)))
    result = add_anchor_fact(card, text="one more", refs=[REF], refs_exist=refs_exist)
    assert result.accepted is False and result.card is card
    assert result.message == (
        "Past has 8/8 anchor facts — remove one first (remove_anchor_fact)"
        " or fold it into the portrait"
    )


def test_k2_add_anchor_fact_refuses_a_duplicate():
    result = add_anchor_fact(
        SEED, text="red line: NO databases for single-user tools", refs=[REF], refs_exist=refs_exist
    )
    assert refused(result, "anchor fact 2 already says this — nothing added")


def test_k2_add_anchor_fact_refuses_an_overlong_fact():
    result = add_anchor_fact(SEED, text="x" * 301, refs=[REF], refs_exist=refs_exist)
    assert refused(result, "anchor fact is 301 chars, limit 300 — compress and retry")


def test_k2_add_anchor_fact_refuses_a_multi_line_fact():
    result = add_anchor_fact(SEED, text="one\ntwo", refs=[REF], refs_exist=refs_exist)
    assert refused(result, "anchor fact must be one line — remove the line breaks and retry")


def test_k3_remove_anchor_fact_removes_only_that_fact():
    result = remove_anchor_fact(SEED, index=1)
    assert result.message == (
        "anchor fact 1 removed: 'Graduated 2021; changed jobs in May 2024' (1/8 left)"
    )
    assert result.card.facts == SEED.facts[1:]


def test_k3_remove_anchor_fact_names_the_valid_range():
    assert refused(
        remove_anchor_fact(SEED, index=3),
        "index 3 is out of range — Past (anchor facts) has 2 items (valid: 1–2)",
    )


def test_k3_index_must_be_a_whole_number():
    assert refused(remove_anchor_fact(SEED, index="1"), "index must be a whole number, got '1'")


# --- Now ------------------------------------------------------------------------------


def test_k2_add_now_appends_with_since():
    result = add_now(
        SEED, text="新工作第一周", refs=[REF], since="2026-08-17", refs_exist=refs_exist
    )
    assert result.message == "Now item 2 added (2/5): '新工作第一周'"
    assert result.card.now[-1] == NowItem("新工作第一周", (REF,), date(2026, 8, 17))


def test_k2_add_now_refuses_a_sixth_item():
    card = replace(
        SEED, now=tuple(NowItem(f"hook {k}", (REF,), date(2026, 8, 17)) for k in range(5))
    )
    result = add_now(card, text="one more", refs=[REF], since="2026-08-17", refs_exist=refs_exist)
    assert result.accepted is False and result.card is card
    assert result.message == "Now has 5/5 items — remove or promote one first"


def test_k2_add_now_refuses_a_malformed_since():
    result = add_now(SEED, text="x", refs=[REF], since="2026-8-17", refs_exist=refs_exist)
    assert refused(result, "since '2026-8-17' is not a date YYYY-MM-DD, e.g. '2026-08-21'")


def test_k2_add_now_refuses_an_impossible_since():
    result = add_now(SEED, text="x", refs=[REF], since="2026-02-30", refs_exist=refs_exist)
    assert refused(result, "since '2026-02-30' is not a date YYYY-MM-DD, e.g. '2026-08-21'")


def test_k3_remove_now_drops_the_item():
    result = remove_now(SEED, index=1)
    assert result.card.now == ()
    assert result.message.startswith("Now 1 removed: 'Training for a 5K")
    assert result.message.endswith("(0/5 left)")


def test_k3_remove_now_on_an_empty_section_says_so():
    card = replace(SEED, now=())
    result = remove_now(card, index=1)
    assert result.accepted is False and result.message == "Now is empty — there is no item 1"


def test_k5_promote_now_moves_the_item_to_past_in_one_step():
    result = promote_now(
        SEED,
        index=1,
        refs=["2026/08/11/1426", REF],
        text="Runs a 5K with Sam every Wednesday",
        refs_exist=refs_exist,
    )
    assert result.message == (
        "Now 1 promoted to anchor fact 3: 'Runs a 5K with Sam every"
        " Wednesday' (anchor facts 3/8, Now 0/5)"
    )
    assert result.card.now == ()
    assert result.card.facts[-1] == Fact(
        "Runs a 5K with Sam every Wednesday", ("2026/08/11/1426", REF)
    )


def test_k5_promote_now_refuses_when_past_is_full():
    card = replace(SEED, facts=tuple(Fact(f"fact {k}", (REF,)) for k in range(8)))
    result = promote_now(card, index=1, refs=[REF], text="Runs", refs_exist=refs_exist)
    assert result.accepted is False and result.card is card
    assert result.message == (
        "Past has 8/8 anchor facts — remove one first, or fold Now 1 into"
        " the portrait (set_portrait) and remove_now"
    )


def test_k5_promote_now_refuses_an_index_out_of_range():
    result = promote_now(SEED, index=2, refs=[REF], text="Runs", refs_exist=refs_exist)
    assert refused(result, "index 2 is out of range — Now has 1 item (valid: 1)")


# --- Horizon --------------------------------------------------------------------------


def test_k2_add_horizon_appends_with_by():
    result = add_horizon(
        SEED, text="Reply to Lao Zhou 老周", by="2026-08-30", refs=[REF], refs_exist=refs_exist
    )
    assert result.message == "Horizon item 2 added (2/10): 'Reply to Lao Zhou 老周' by 2026-08-30"
    assert result.card.horizon[-1] == HorizonItem(
        "Reply to Lao Zhou 老周", date(2026, 8, 30), (REF,)
    )


def test_k2_add_horizon_refuses_a_missing_by():
    result = add_horizon(SEED, text="Reply", by="", refs=[REF], refs_exist=refs_exist)
    assert refused(result, "by '' is not a date YYYY-MM-DD, e.g. '2026-08-21'")


def test_k2_add_horizon_refuses_past_the_cap():
    card = replace(
        SEED, horizon=tuple(HorizonItem(f"h{k}", date(2026, 9, 1), (REF,)) for k in range(10))
    )
    result = add_horizon(card, text="one more", by="2026-09-02", refs=[REF], refs_exist=refs_exist)
    assert result.accepted is False and result.card is card
    assert result.message == "Horizon has 10/10 items — resolve one first"


def test_k6_resolve_horizon_removes_the_item_and_reports_the_outcome():
    result = resolve_horizon(SEED, index=1, outcome="Delivered it; everyone cried 😭")
    assert result.card.horizon == ()
    assert result.message == (
        "Horizon 1 resolved: 'Draft the wedding speech for Lao Zhou'"
        " — outcome: 'Delivered it; everyone cried 😭' (0/10 left)"
    )


def test_k6_resolve_horizon_requires_an_outcome():
    assert refused(
        resolve_horizon(SEED, index=1, outcome=""), "outcome is empty — write it and retry"
    )


# --- Self-model -----------------------------------------------------------------------


def test_k2_add_lesson_appends_a_plain_lesson():
    result = add_lesson(SEED, text="聊到跑步时, 先问配速 🏃", refs=[REF], refs_exist=refs_exist)
    assert result.message == "lesson 2 added (2/10): '聊到跑步时, 先问配速 🏃'"
    assert result.card.lessons[-1] == Lesson("聊到跑步时, 先问配速 🏃", (REF,))


def test_k2_add_lesson_refuses_an_eleventh_lesson():
    card = replace(SEED, lessons=tuple(Lesson(f"lesson {k}", (REF,)) for k in range(10)))
    result = add_lesson(card, text="one more", refs=[REF], refs_exist=refs_exist)
    assert result.accepted is False and result.card is card
    assert result.message == "Self-model has 10/10 lessons — remove one first (remove_lesson)"


def test_k3_remove_lesson_removes_it():
    result = remove_lesson(SEED, index=1)
    assert result.card.lessons == ()
    assert result.message.endswith("(0/10 left)")


def test_k3_remove_lesson_names_the_valid_range():
    assert refused(
        remove_lesson(SEED, index=0), "index 0 is out of range — Self-model has 1 item (valid: 1)"
    )
