"""Answers with the replica that served the call."""

import os


def who(i: int) -> list[int]:
    return [i, os.getpid()]
