import logging


def test_a_message_is_logged_once_a_process_per_logger(monkeypatch, caplog):
    from arc_trl.config import warn_once as module
    from arc_trl.rollout.per_episode import warn_lockstep_fallback

    monkeypatch.setattr(module, "said", set())
    caplog.set_level(logging.WARNING)
    first, second = logging.getLogger("arc_trl.a"), logging.getLogger("arc_trl.b")
    assert module.warn_once(first, "x") and not module.warn_once(first, "x")
    assert module.warn_once(second, "x")  # another logger's "x" is another warning
    for _ in range(3):
        warn_lockstep_fallback("no stream")  # met on every step, said once
    messages = [(r.name, r.getMessage()) for r in caplog.records]
    assert messages == [("arc_trl.a", "x"), ("arc_trl.b", "x"), (
        "arc_trl.rollout.per_episode", "rollout_scheduling=per_episode falls back to lockstep: no stream")]
