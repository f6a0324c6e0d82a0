"""The timeline page: conversations by day, what each changed on the card (S1, S2)."""
