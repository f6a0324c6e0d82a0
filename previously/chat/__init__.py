"""The chat over its websocket (issue 3): consumer -> proactive sends -> turn -> prompt (markers: memory.markers).

The chat page over plain HTTP is previously.pages.chat; pushing to open pages is
previously.push.
"""
