"""RETURNN's process-wide state across tests in one worker: the tests that run RETURNN's frontend
on PyTorch leave the minimum behavior version as they found it, so a TensorFlow network that
needs behavior version 0 (the 2018 LibriSpeech config has none) still builds after them."""

from __future__ import annotations

from conftest import returnn_frontend_torch


def test_frontend_on_torch_leaves_the_behavior_version_as_it_was():
    from returnn.util.basic import BehaviorVersion

    before = BehaviorVersion._get_state()
    with returnn_frontend_torch():
        assert BehaviorVersion.get() >= 16
    assert BehaviorVersion._get_state() == before
    # what behavior version 0 allows and 1 refuses: a layer without "from"
    BehaviorVersion.require(False, "a layer without from", 1)
