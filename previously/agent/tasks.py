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


@task()
def proactive_check() -> int:
    """K15: one pass announcing due Horizon items; returns how many messages were sent."""
    from previously.proactive import check_all

    return sum(1 for outcome in check_all() if outcome.message is not None)


@task()
def welcome_back(profile_id: int) -> bool:
    """K15/K14: the companion writes first to a user back after a long gap; True when sent."""
    from memory.models import Profile
    from previously.proactive import welcome_back as send_welcome_back

    profile = Profile.objects.filter(pk=profile_id).first()
    outcome = send_welcome_back(profile) if profile is not None else None
    return outcome is not None and outcome.message is not None


@task()
def reply_in_background(profile_id: int, mid: str) -> None:
    """The reply to a line archived over plain HTTP (an image sent without JavaScript, A7): the
    normal turn, its frames pushed to the profile's open pages; archived for the next load."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from memory.models import Profile
    from previously.chat import turn
    from previously.chat.consumers import group_name

    profile = Profile.objects.filter(pk=profile_id).first()
    if profile is None:
        return
    layer = get_channel_layer()

    async def send(html: str) -> None:
        await layer.group_send(group_name(profile), {"type": "page.event", "html": html})

    async_to_sync(turn.handle_reply)(profile, {"mid": mid}, send)
