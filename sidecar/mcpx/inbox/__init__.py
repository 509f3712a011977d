"""The web inbox: the daemon's pages for people (a list of waiting questions, a page per question), the
single-use links that open one question on another device, and the notifications that carry those links."""
