"""The Previously Agent (K3-K11): lifecycle (the one module that starts runs) -> evolve (the
run and its tool loop) -> analyzer (explicit requests, "worth it?") -> tools, briefing, events.
"""
