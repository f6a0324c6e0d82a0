"""Every limit of the user card (K2) in one place.

Lengths are counted in Unicode code points (what ``len()`` returns), so "2,400
characters" means the same for English, Chinese and emoji text.
"""

# K2 — from the spec and the seed.
IDENTITY_MAX_LINES = 8
PORTRAIT_MAX_CHARS = 2400
ANCHOR_FACTS_MAX = 8
NOW_MAX = 5
LESSONS_MAX = 10

# K5 — a Now item whose since: date is more than this many days before today is stale.
NOW_STALE_AFTER_DAYS = 7

# Ours, not K2: K2 leaves Horizon uncounted, but the card is injected into every
# prompt, so an unbounded section would grow the prompt without bound. Adding past
# the cap is refused (never dropped); resolving frees a place (K6).
HORIZON_MAX = 10

# Ours: per-item caps keep each line a "hook, not narrative" and the whole card
# bounded (~8k chars at most), whatever the agent writes.
IDENTITY_FIELD_MAX_CHARS = 40
IDENTITY_VALUE_MAX_CHARS = 120
ITEM_MAX_CHARS = 300  # anchor fact, Now, Horizon, lesson and resolve outcome text
REFS_MAX_PER_ITEM = 6
