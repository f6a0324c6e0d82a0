"""The profiles pages (P1-P3): list and create, edit, delete, switch; and the about page."""
