"""Sample cards and slices shared by the card tests (a module, not fixtures, so the tests
run with or without the project's Django conftest)."""

from memory.card.mutations import resolver_from

# The seed's v5 example (seeds/000_6b880cc6c8736b87.txt), byte for byte.
SEED_CARD = """\
# Previously On

_Active slice: 2026-08-17-0515 | Format: user card v2 | Updated: 2026-08-17T05:27:48Z_

## Identity

- Name: Alex
- Address them as: you
- Alias: 小艾

## Past

Alex is an engineer who prefers answers grounded in real evidence over
abstraction. They left a draining job in 2024 and now work somewhere they
chose deliberately. What they want most is to spend their time on things
they themselves chose — a north star they still hold today.

- Graduated 2021; changed jobs in May 2024 — refs: [2026/07/26/1539]
- Red line: no databases for single-user tools — refs: [2026/08/02/1105]

## Now

- Training for a 5K — Wednesday morning runs are a two-person thing now — refs: [2026/08/11/1426] | since: 2026-08-11

## Horizon

- Draft the wedding speech for Lao Zhou — by: 2026-08-21 — refs: [2026/08/15/2030]

## Self-model

- When Alex is venting, lead with empathy first, then weave their own narrative back as evidence — refs: [2026/08/11/1426]
"""

# Slices that exist in the profile the tests pretend to edit.
KNOWN_SLICES = frozenset(
    {
        "2026/07/26/1539",
        "2026/08/02/1105",
        "2026/08/11/1426",
        "2026/08/15/2030",
        "2026/08/17/0515",
    }
)


refs_exist = resolver_from(KNOWN_SLICES)
