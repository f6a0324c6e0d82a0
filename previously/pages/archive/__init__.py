"""The archive page: browse and search the whole archive (A4)."""
