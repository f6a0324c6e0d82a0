"""The card page (K12) and the beliefs page."""
