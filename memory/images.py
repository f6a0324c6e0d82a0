"""Image messages (SPEC A7): check by content, store through Django's storage API, thumbnail,
archive as `message_type=image`.

Files live in `default_storage` (MEDIA_ROOT, i.e. var/media, by default; any STORAGES backend
at scale) under `images/<profile pk>/<mid>.<ext>`, the thumbnail beside it as
`<mid>.thumb.jpg`. They are never served from a public URL: the chat's image view checks the
profile belongs to the user. The attachment metadata is
`{"path", "thumb", "content_type", "size", "width", "height", "sha256", "name"}`;
legacy image records (LEGACY_KV.md) carry `{"name", "mime", "size", "width", "height"}` and no
path: their file was never migrated.
"""

import base64
import hashlib
import io
import logging
import re
from dataclasses import dataclass

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils.translation import gettext
from PIL import Image, ImageOps, UnidentifiedImageError

from memory.archive import Archived, MidConflict, MidTombstoned, archive_message
from memory.models import Message, Profile, Tombstone

log = logging.getLogger(__name__)

# Pillow format → (content type, file extension). Only formats every browser shows.
FORMATS = {
    "JPEG": ("image/jpeg", "jpg"),
    "PNG": ("image/png", "png"),
    "GIF": ("image/gif", "gif"),
    "WEBP": ("image/webp", "webp"),
}
THUMB_SIZE = (320, 320)
# Read from the header before any pixel is decoded (S4): 25 MP (a 6000×4000 photo) decodes
# to at most ~100 MB; a 7000×7000 PNG of 186 KB is refused without costing 375 MB.
MAX_PIXELS = 25_000_000
NAME_MAX = 200


class ImageRefused(ValueError):
    """The upload is not an image we take; the message says why, for the user."""

    def __init__(self, reason: str, *, status: int = 400):
        self.reason = reason
        self.status = status
        super().__init__(reason)


@dataclass(frozen=True)
class CheckedImage:
    data: bytes
    content_type: str
    ext: str
    width: int
    height: int
    sha256: str
    name: str


def check_image(data: bytes, *, name: str = "") -> CheckedImage:
    """The bytes as a checked image; refuses by size and by content, never by file name."""
    limit = settings.PREVIOUSLY_IMAGE_MAX_BYTES
    if len(data) > limit:
        raise ImageRefused(gettext("image too large (%(size)d bytes, limit %(limit)d)") % {"size": len(data), "limit": limit}, status=413)
    if not data:
        raise ImageRefused(gettext("empty file"))
    try:
        with Image.open(io.BytesIO(data)) as probe:
            fmt = probe.format
            width, height = probe.size
            if width * height > MAX_PIXELS:
                raise ImageRefused(gettext("image too large (%(width)d×%(height)d pixels)") % {"width": width, "height": height}, status=413)
            probe.verify()  # structure check; a truncated or forged file fails here
        with Image.open(io.BytesIO(data)) as full:
            full.load()  # verify() does not decode the pixels; this does
    except ImageRefused:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        raise ImageRefused(gettext("not an image (JPEG, PNG, GIF or WebP by content)")) from None
    if fmt not in FORMATS:
        raise ImageRefused(gettext("unsupported image format %(format)s; send JPEG, PNG, GIF or WebP") % {"format": fmt})
    content_type, ext = FORMATS[fmt]
    try:
        data = reencode(data, fmt)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        raise ImageRefused(gettext("not an image (JPEG, PNG, GIF or WebP by content)")) from None
    return CheckedImage(
        data=data,
        content_type=content_type,
        ext=ext,
        width=width,
        height=height,
        sha256=hashlib.sha256(data).hexdigest(),
        name=_clean_name(name),
    )


def reencode(data: bytes, fmt: str) -> bytes:
    """S4: the image decoded and written again in its own format, so what is stored is only
    pixels — no trailing bytes, comments or metadata a polyglot (GIF/JS, PNG/HTML) hides in.
    The EXIF orientation is applied first; animations keep their frames."""
    with Image.open(io.BytesIO(data)) as image:
        animated = getattr(image, "is_animated", False) and fmt in ("GIF", "WEBP")
        out = io.BytesIO()
        if animated:
            image.save(out, fmt, save_all=True, loop=image.info.get("loop", 0),
                       duration=image.info.get("duration", 100))
        else:
            frame = ImageOps.exif_transpose(image)
            if fmt == "JPEG":
                frame = frame if frame.mode in ("RGB", "L") else frame.convert("RGB")
                frame.save(out, "JPEG", quality=90)
            elif fmt == "WEBP":
                frame.save(out, "WEBP", quality=90)
            else:
                frame.save(out, fmt)
    return out.getvalue()


def sniff(stream) -> str | None:
    """The content type of a stored file, read from its own header (S4): one of FORMATS' or
    None. The served type never comes from attachment metadata, which an import can set."""
    try:
        with Image.open(stream) as probe:
            return FORMATS.get(probe.format, (None,))[0]
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return None


def _clean_name(name: str) -> str:
    name = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    return "".join(c for c in name if c.isprintable())[:NAME_MAX] or "image"


def make_thumbnail(data: bytes) -> bytes:
    """A JPEG no larger than THUMB_SIZE (first frame of an animation; transparency on white)."""
    with Image.open(io.BytesIO(data)) as image:
        image.seek(0)
        image.thumbnail(THUMB_SIZE)
        if image.mode in ("RGBA", "LA", "P"):
            image = image.convert("RGBA")
            background = Image.new("RGB", image.size, (255, 255, 255))
            background.paste(image, mask=image.getchannel("A"))
            image = background
        elif image.mode != "RGB":
            image = image.convert("RGB")
        out = io.BytesIO()
        image.save(out, "JPEG", quality=82, optimize=True)
    return out.getvalue()


def store_image_message(
    *,
    profile: Profile,
    mid: str,
    data: bytes,
    name: str = "",
    caption: str = "",
    tz: str | None = None,
    local_time: str | None = None,
) -> Archived:
    """Check, store (file + thumbnail) and archive a user's image message, idempotently by mid.

    A resend of a stored mid with the same caption returns the stored message and writes no
    file; a different caption is a MidConflict (A2). Files written for a write that did not
    happen are removed again."""
    checked = check_image(data, name=name)
    if Tombstone.objects.filter(profile=profile, kind=Tombstone.Kind.MESSAGE, object_id=mid).exists():
        raise MidTombstoned(mid)  # checked before any file is written (D6)
    existing = Message.objects.filter(profile=profile, mid=mid).first()
    if existing is not None:
        if existing.content != caption:
            raise MidConflict(mid)
        return Archived(message=existing, created=False)
    base = f"images/{profile.pk}/{mid}"
    path = default_storage.save(f"{base}.{checked.ext}", ContentFile(checked.data))
    written = [path]
    try:
        thumb = default_storage.save(f"{base}.thumb.jpg", ContentFile(make_thumbnail(checked.data)))
        written.append(thumb)
        attachment = {
            "path": path,
            "thumb": thumb,
            "content_type": checked.content_type,
            "size": len(checked.data),
            "width": checked.width,
            "height": checked.height,
            "sha256": checked.sha256,
            "name": checked.name,
        }
        archived = archive_message(
            profile=profile, mid=mid, speaker=Message.Speaker.USER, content=caption,
            message_type=Message.Type.IMAGE, attachment=attachment, tz=tz, local_time=local_time,
        )
    except BaseException:
        _remove(written)
        raise
    if not archived.created:  # a concurrent upload of the same mid won; keep its files
        _remove([p for p in written if p not in _paths(archived.message)])
    return archived


def _paths(message: Message) -> list[str]:
    # Only the files this message's upload wrote: images/<profile pk>/<mid>.<ext> and
    # <mid>.thumb.jpg (the storage may have added "_<7 characters>" to a taken name). An
    # imported record naming any other path (a crafted or foreign dump, S4) can neither serve
    # nor delete another file, of this profile or anyone's.
    attachment = message.attachment if isinstance(message.attachment, dict) else {}
    base = f"images/{message.profile_id}/{re.escape(message.mid)}"
    shapes = (re.compile(base + r"(_[A-Za-z0-9]{7})?\.(jpg|png|gif|webp)"),
              re.compile(base + r"\.thumb(_[A-Za-z0-9]{7})?\.jpg"))
    return [
        p for p, shape in zip((attachment.get("path"), attachment.get("thumb")), shapes, strict=True)
        if isinstance(p, str) and shape.fullmatch(p)
    ]


def attachment_paths(message: Message) -> list[str]:
    """The stored files of a message (file, thumbnail); empty for legacy or text lines."""
    return _paths(message)


def stored_path(message: Message, *, thumb: bool = False) -> str | None:
    """The storage path of the image (or its thumbnail), when it is this profile's file."""
    attachment = message.attachment if isinstance(message.attachment, dict) else {}
    path = attachment.get("thumb" if thumb else "path")
    return path if path in _paths(message) else None


def _remove(paths: list[str]) -> None:
    for path in paths:
        try:
            default_storage.delete(path)
        except OSError:
            log.warning("could not remove %s", path)


def has_file(message: Message) -> bool:
    """True when the image's file was stored here (legacy image records have none)."""
    return stored_path(message) is not None


def image_label(message: Message) -> str:
    """The short text stand-in for models without image input: `[image: <caption or name>]`."""
    attachment = message.attachment if isinstance(message.attachment, dict) else {}
    return f"[image: {message.content.strip() or attachment.get('name') or 'image'}]"


def data_url(message: Message) -> str | None:
    """The image as a `data:` URL for a model request, or None when the file is absent."""
    if not has_file(message):
        return None
    attachment = message.attachment
    try:
        with default_storage.open(stored_path(message), "rb") as f:
            data = f.read()
    except OSError:
        log.warning("image file %s of %s is missing", attachment["path"], message.mid)
        return None
    content_type = sniff(io.BytesIO(data))
    if content_type is None:
        return None
    return f"data:{content_type};base64,{base64.b64encode(data).decode('ascii')}"


# --- a companion's avatar (H2) ------------------------------------------------------------------

AVATAR_SHAPE = re.compile(r"avatars/([0-9]+)/[0-9a-f]{16}(_[A-Za-z0-9]{7})?(\.thumb)?\.(jpg|png|gif|webp)")


@dataclass(frozen=True)
class PreparedAvatar:
    """An avatar checked, re-encoded and thumbnailed: the CPU work, done before any write."""

    image: CheckedImage
    thumb: bytes


def prepare_avatar(data: bytes, *, name: str = "") -> PreparedAvatar:
    """Check and re-encode `data` as an upload is (`ImageRefused` if it is not an image we take)."""
    checked = check_image(data, name=name)
    return PreparedAvatar(image=checked, thumb=make_thumbnail(checked.data))


def store_avatar(*, profile: Profile, avatar: PreparedAvatar) -> dict:
    """Write a prepared avatar and its thumbnail under `avatars/<profile pk>/`; returns the
    metadata for `Profile.avatar`. Saves no row: the caller sets the field, and removes the
    files with `remove_avatar_files` if it does not."""
    checked = avatar.image
    base = f"avatars/{profile.pk}/{checked.sha256[:16]}"
    path = default_storage.save(f"{base}.{checked.ext}", ContentFile(checked.data))
    try:
        thumb = default_storage.save(f"{base}.thumb.jpg", ContentFile(avatar.thumb))
    except BaseException:
        _remove([path])
        raise
    return {
        "path": path, "thumb": thumb, "content_type": checked.content_type, "size": len(checked.data),
        "width": checked.width, "height": checked.height, "sha256": checked.sha256,
    }


def avatar_paths(profile_id: int, avatar) -> list[str]:
    """The stored files of a profile's avatar (image, thumbnail): only paths of its own folder's
    shape, so an avatar record naming any other file can neither serve nor delete it (S4)."""
    avatar = avatar if isinstance(avatar, dict) else {}
    found = []
    for key in ("path", "thumb"):
        path = avatar.get(key)
        match = AVATAR_SHAPE.fullmatch(path) if isinstance(path, str) else None
        if match and match.group(1) == str(profile_id):
            found.append(path)
    return found


def remove_avatar_files(profile_id: int, avatar) -> None:
    _remove(avatar_paths(profile_id, avatar))


def read_avatar(profile: Profile, *, thumb: bool = False) -> bytes | None:
    """The avatar's stored bytes (or its thumbnail's), None when it has none or it is gone."""
    paths = avatar_paths(profile.pk, profile.avatar)
    wanted = [p for p in paths if (".thumb" in p) == thumb]
    if not wanted:
        return None
    try:
        with default_storage.open(wanted[0], "rb") as fh:
            return fh.read()
    except OSError:
        return None
