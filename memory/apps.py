from django.apps import AppConfig
from django.conf import settings
from django.utils.translation import gettext_lazy as _
from PIL import Image


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = _("Memory")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Issue 24 point 2: Pillow's own bomb check (a warning over it, an error over twice it)
        # follows the uploads' pixel budget, for every image this process opens.
        Image.MAX_IMAGE_PIXELS = settings.PREVIOUSLY_IMAGE_MAX_PIXELS
