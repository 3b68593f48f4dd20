"""The names of an episode's two choice keys, one list each: `agent_mode` (with what each mode is) and
`rollout_scheduling`.

`ArcConfig`, the rollout, the prompts, the rewards and the `arc-trl` commands (`evaluate generate`, `sft`,
`transcripts`) import them from here, never a copy (tests/unit/package/test_registries.py); like
`arc_trl/config/defaults.py` this module imports nothing, so every layer can read it. The other two extension points
keep their names with their behaviour: the reward modes in `arc_trl.rewards.modes.REWARD_MODE_REGISTRY`, the teacher
backends in `arc_trl.opd.backends.TEACHER_BACKENDS`.
"""

from __future__ import annotations

AGENT_MODES: dict[str, str] = {  # name -> what an episode of that mode is (ArcConfig.agent_mode's help)
    "repl": "multi-turn REPL ending with SUBMIT",
    "program": "one-turn transform()",
}
ROLLOUT_SCHEDULINGS = ("lockstep", "per_episode")  # see arc_trl.rollout.arc_rollout.run_episodes
