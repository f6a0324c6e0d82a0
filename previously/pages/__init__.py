"""The pages, one package per family (views, urls, forms; templates in templates/<family>/).

Families never import each other; what they share sits here: `current_profile` (which of the
user's profiles a page is about) and `card_display` (the card as the pages show it).
"""
