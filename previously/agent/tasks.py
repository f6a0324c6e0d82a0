"""The agent's background tasks (Django tasks; the backend is chosen in settings.TASKS)."""

from django.tasks import task


@task()
def evolve_card(run_id: int) -> str:
    """Carry out one evolution run; returns its final status."""
    from previously.agent.evolve import execute_run

    return execute_run(run_id).status


@task()
def analyze_turn(slice_id: int, user_text: str, reply_text: str) -> bool:
    """The model-based turn analyzer, off the reply path; True when it started a run."""
    from previously.agent.analyzer import analyze_turn_with_model

    return analyze_turn_with_model(slice_id, user_text, reply_text)
