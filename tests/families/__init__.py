"""The family test suite: one configuration per tool-parser family, one set of tests for all."""
