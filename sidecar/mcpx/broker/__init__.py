"""The question broker: durable questions with deadlines, answered once, by anyone allowed to."""
