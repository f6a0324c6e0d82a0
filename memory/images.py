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
import dataclasses
import hashlib
import io
import logging
import re
from dataclasses import dataclass

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils.translation import gettext, ngettext
from PIL import GifImagePlugin, Image, ImageOps, UnidentifiedImageError

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
# A GIF's frames stay palette images (1 byte a pixel, not 4) unless a frame brings its own
# palette: an animation's decoded size is then about its pixel count.
GifImagePlugin.LOADING_STRATEGY = GifImagePlugin.LoadingStrategy.RGB_AFTER_DIFFERENT_PALETTE_ONLY
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
    thumb: bytes  # the thumbnail (JPEG), made from the same decode
    note: str = ""  # what was left out (frames of an animation over the budget), for the person


ANIMATION_SHARE = 4  # an animation's frames are held together while written: a quarter of the budget


def pixel_budget() -> tuple[int, int]:
    """(pixels an upload may decode to, frames an animation keeps at most):
    PREVIOUSLY_IMAGE_MAX_PIXELS and PREVIOUSLY_IMAGE_MAX_FRAMES."""
    return settings.PREVIOUSLY_IMAGE_MAX_PIXELS, settings.PREVIOUSLY_IMAGE_MAX_FRAMES


def frames_within(width: int, height: int) -> int:
    """How many frames of a width×height animation are kept: as many as fit a quarter of the
    pixel budget (the writer holds every frame, and compares each with the one before as
    full-colour canvases), at most PREVIOUSLY_IMAGE_MAX_FRAMES, and always the first."""
    pixels, frames = pixel_budget()
    return max(1, min(frames, pixels // ANIMATION_SHARE // max(1, width * height)))


def check_image(data: bytes, *, name: str = "") -> CheckedImage:
    """The bytes as a checked image; refuses by size and by content, never by file name.

    S4/S6 (issue 24 point 2): the canvas is read from the header before any pixel is decoded
    and the pixels × frames are bounded before decoding: a still image over
    PREVIOUSLY_IMAGE_MAX_PIXELS is refused; an animation keeps the frames that fit it (and
    PREVIOUSLY_IMAGE_MAX_FRAMES), the rest are left out and `note` says so."""
    limit = settings.PREVIOUSLY_IMAGE_MAX_BYTES
    if len(data) > limit:
        raise ImageRefused(gettext("image too large (%(size)d bytes, limit %(limit)d, PREVIOUSLY_IMAGE_MAX_BYTES)") % {"size": len(data), "limit": limit}, status=413)
    if not data:
        raise ImageRefused(gettext("empty file"))
    try:
        with Image.open(io.BytesIO(data)) as probe:
            fmt = probe.format
            width, height = probe.size
            if width * height > pixel_budget()[0]:
                raise ImageRefused(gettext(
                    "image too large (%(width)d×%(height)d pixels, limit %(limit)d pixels, PREVIOUSLY_IMAGE_MAX_PIXELS)"
                ) % {"width": width, "height": height, "limit": pixel_budget()[0]}, status=413)
            probe.verify()  # structure check; a truncated or forged file fails here
    except ImageRefused:
        raise
    except Image.DecompressionBombError:  # Pillow's own check (MAX_IMAGE_PIXELS, memory/apps.py), over twice the budget
        raise ImageRefused(gettext(
            "image too large (more than %(limit)d pixels, PREVIOUSLY_IMAGE_MAX_PIXELS)"
        ) % {"limit": pixel_budget()[0]}, status=413) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise ImageRefused(gettext("not an image (JPEG, PNG, GIF or WebP by content)")) from None
    if fmt not in FORMATS:
        raise ImageRefused(gettext("unsupported image format %(format)s; send JPEG, PNG, GIF or WebP") % {"format": fmt})
    content_type, ext = FORMATS[fmt]
    try:
        data, thumb, kept, more = reencode(data, fmt)  # the one decode of the pixels
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError):
        raise ImageRefused(gettext("not an image (JPEG, PNG, GIF or WebP by content)")) from None
    note = ""
    if more:
        note = ngettext(
            "Only the first frame of this animation was kept: an animation of %(width)d×%(height)d keeps at most "
            "%(kept)d frame (a quarter of PREVIOUSLY_IMAGE_MAX_PIXELS, %(pixels)d pixels, across its frames; at most "
            "PREVIOUSLY_IMAGE_MAX_FRAMES, %(frames)d).",
            "Only the first %(kept)d frames of this animation were kept: an animation of %(width)d×%(height)d "
            "keeps at most %(kept)d frames (a quarter of PREVIOUSLY_IMAGE_MAX_PIXELS, %(pixels)d pixels, across its "
            "frames; at most PREVIOUSLY_IMAGE_MAX_FRAMES, %(frames)d).",
            kept,
        ) % {"kept": kept, "width": width, "height": height, "pixels": pixel_budget()[0], "frames": pixel_budget()[1]}
    return CheckedImage(
        data=data,
        content_type=content_type,
        ext=ext,
        width=width,
        height=height,
        sha256=hashlib.sha256(data).hexdigest(),
        name=_clean_name(name),
        thumb=thumb,
        note=note,
    )


def reencode(data: bytes, fmt: str) -> tuple[bytes, bytes, int, bool]:
    """S4: the image decoded and written again in its own format, so what is stored is only
    pixels — no trailing bytes, comments or metadata a polyglot (GIF/JS, PNG/HTML) hides in.
    The EXIF orientation is applied first. An animation keeps the frames within the budget
    (`frames_within`), read one at a time. The thumbnail comes from the same decode.
    (bytes, thumbnail, frames kept, whether frames were left out)."""
    with Image.open(io.BytesIO(data)) as image:
        animated = getattr(image, "is_animated", False) and fmt in ("GIF", "WEBP")
        out = io.BytesIO()
        if animated:
            allowed = frames_within(*image.size)
            kept = _frames(image, allowed)
            first = next(kept)
            first.save(out, fmt, save_all=True, append_images=kept, loop=image.info.get("loop", 0),
                       duration=image.info.get("duration", 100))
            count, more = image.tell() + 1, _has_frame(image, allowed)
            return out.getvalue(), thumbnail(first), count, more
        image.load()
        ImageOps.exif_transpose(image, in_place=True)  # no copy of the pixels
        frame = image
        if fmt == "JPEG":
            frame = frame if frame.mode in ("RGB", "L") else frame.convert("RGB")
            frame.save(out, "JPEG", quality=90)
        elif fmt == "WEBP":
            frame.save(out, "WEBP", quality=90)
        else:
            frame.save(out, fmt)
        return out.getvalue(), thumbnail(frame), 1, False


def _frames(image: Image.Image, allowed: int):
    """The first `allowed` frames of an animation, each a copy made as the writer asks for it
    (so at most the writer's own frames are held); stops at a frame whose size is not the canvas's."""
    canvas = image.size
    for index in range(allowed):
        if index:
            try:
                image.seek(index)
            except EOFError:
                return
        if image.size != canvas:
            return
        yield image.copy()


def _has_frame(image: Image.Image, index: int) -> bool:
    """Whether the animation has a frame `index` (one frame past the kept ones: decoded, within
    the budget's cost of one more canvas)."""
    try:
        image.seek(index)
    except EOFError:
        return False
    return True


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


def thumbnail(image: Image.Image) -> bytes:
    """A JPEG no larger than THUMB_SIZE of a decoded frame (transparency on white). The frame
    is shrunk in place: this is the last use of its full pixels. An image with transparency is
    first brought near the size by nearest-neighbour (Pillow's filters would copy the whole
    canvas to premultiply its alpha), then filtered."""
    near = (THUMB_SIZE[0] * 4, THUMB_SIZE[1] * 4)
    if image.mode in ("RGBA", "LA", "PA") and (image.width > near[0] or image.height > near[1]):
        image = ImageOps.contain(image, near, Image.Resampling.NEAREST)
    image.thumbnail(THUMB_SIZE)
    if image.mode in ("RGBA", "LA", "P", "PA"):
        image = image.convert("RGBA")
        background = Image.new("RGB", image.size, (255, 255, 255))
        background.paste(image, mask=image.getchannel("A"))
        image = background
    elif image.mode != "RGB":
        image = image.convert("RGB")
    out = io.BytesIO()
    image.save(out, "JPEG", quality=82, optimize=True)
    return out.getvalue()


def save_image_files(*, profile_id: int, mid: str, checked: CheckedImage) -> tuple[dict, list[str]]:
    """Store a checked image and its thumbnail; (the attachment metadata, the paths written).
    The caller removes the paths (`remove_files`) if the message is not archived after all."""
    base = f"images/{profile_id}/{mid}"
    path = default_storage.save(f"{base}.{checked.ext}", ContentFile(checked.data))
    written = [path]
    try:
        thumb = default_storage.save(f"{base}.thumb.jpg", ContentFile(checked.thumb))
    except BaseException:
        _remove(written)
        raise
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
    return attachment, written


def remove_files(paths: list[str]) -> None:
    """Remove files `save_image_files` wrote for messages that were not archived."""
    _remove(paths)


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
    if Tombstone.objects.line_deleted(profile.pk, mid):
        raise MidTombstoned(mid)  # checked before any file is written (D6)
    existing = Message.objects.filter(profile=profile, mid=mid).first()
    if existing is not None:
        if existing.content != caption:
            raise MidConflict(mid)
        return Archived(message=existing, created=False)
    attachment, written = save_image_files(profile_id=profile.pk, mid=mid, checked=checked)
    try:
        archived = archive_message(
            profile=profile, mid=mid, speaker=Message.Speaker.USER, content=caption,
            message_type=Message.Type.IMAGE, attachment=attachment, tz=tz, local_time=local_time,
        )
    except BaseException:
        _remove(written)
        raise
    if not archived.created:  # a concurrent upload of the same mid won; keep its files
        _remove([p for p in written if p not in _paths(archived.message)])
    return dataclasses.replace(archived, note=checked.note) if checked.note else archived


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
    return PreparedAvatar(image=checked, thumb=checked.thumb)


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
