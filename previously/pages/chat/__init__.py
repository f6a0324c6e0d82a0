"""The chat page over plain HTTP (the socket side is previously.chat): the page, older lines,
new conversation, image upload, proactive switch, image files."""
