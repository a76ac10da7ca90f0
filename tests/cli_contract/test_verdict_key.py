"""``ok`` in every JSON document is the exit code's verdict (:mod:`explorer.verdict`)."""

from __future__ import annotations

from explorer.verdict import with_verdict


def test_ok_is_set_in_its_place_or_first_and_nothing_else_moves():
    doc = {"kind": "x", "ok": True, "failure": None}
    assert list(with_verdict(doc, 1).items()) == [("kind", "x"), ("ok", False), ("failure", None)]
    assert doc["ok"] is True  # the caller's document is not changed
    assert list(with_verdict({"cells": []}, 0)) == ["ok", "cells"]
    assert with_verdict({"ok": False}, 0) == {"ok": True}
    assert with_verdict({}, 130) == {"ok": False}  # an interrupted sweep is no clean verdict
