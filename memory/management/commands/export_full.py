"""Export profiles in full (SPEC X1): our versioned JSON (a zip of it and the image files when
there are images), or the legacy KV bulk-put shape."""

from django.core.management.base import BaseCommand, CommandError

from memory.interop.export import (
    export_full,
    export_global_meta,
    export_kv,
    json_bytes,
    profiles_for,
    write_export,
    write_kv,
)
from memory.management import output
from memory.management.profiles import resolve_user


class _Raw:
    """Write pieces to the command's stdout without the newline OutputWrapper adds."""

    def __init__(self, wrapper):
        self.wrapper = wrapper

    def write(self, text: str) -> None:
        self.wrapper.write(text, ending="")


class Command(BaseCommand):
    help = "Export messages, curation, legacy keys, cards, slices and tombstones of profiles."

    def add_arguments(self, parser):
        parser.add_argument("--user", help="Only this user's profiles (default: every user's).")
        parser.add_argument("--profile", help="Only the profile with this key.")
        parser.add_argument(
            "--format", choices=("json", "kv"), default="json",
            help="json: our own versioned format (default); kv: the legacy wrangler bulk-put shape.",
        )
        parser.add_argument("--output", help="Write here instead of standard output (needed for an export with images: a zip).")

    def handle(self, *args, **opts):
        user = resolve_user(opts["user"], returncode=2) if opts["user"] else None
        profiles = list(profiles_for(user=user, profile_key=opts["profile"]))
        if not profiles:
            raise CommandError("no profile matches; check --user and --profile", returncode=2)
        if opts["format"] == "json":
            self.stderr.write(output.table(["exported", "count"], self._json(profiles, opts["output"])))
            return
        out = open(opts["output"], "w", encoding="utf-8") if opts["output"] else _Raw(self.stdout)  # noqa: SIM115
        try:
            with output.progress(self.stderr) as progress:
                each = output.counted(profiles, progress, "profiles", total=len(profiles), every=1)
                entries = export_kv(profiles=each)
                if user is None and not opts["profile"]:
                    entries = (e for gen in (entries, export_global_meta()) for e in gen)
                rows = [["keys", write_kv(output.counted(entries, progress, "keys"), out)]]
        finally:
            if opts["output"]:
                out.close()
        self.stderr.write(output.table(["exported", "count"], rows))

    def _json(self, profiles, path: str | None) -> list[list]:
        """Our own format: the JSON, or a zip of it and the image files when there are images
        (issue 28 point 4), which needs --output (standard output takes text)."""
        with output.progress(self.stderr) as progress:
            export = export_full(profiles=output.counted(profiles, progress, "profiles", total=len(profiles), every=1))
        if path:
            with open(path, "wb") as fh:
                write_export(export, fh)
        elif export.files:
            raise CommandError(
                f"this export holds {len(export.files):,} image files, so it is a zip: give --output FILE.zip",
                returncode=2)
        else:
            self.stdout.write(json_bytes(export.data).decode("utf-8"), ending="")
        messages = sum(len(p["messages"]) for p in export.data["profiles"])
        return [["profiles", len(profiles)], ["messages", messages], ["image files", len(export.files)]]
