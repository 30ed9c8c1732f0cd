"""The SQL files of `replay`: one question per file, read by `replay.sql`."""
