"""Test-time RL for tasks without known test outputs (`arc-trl ttrl`, docs/ttrl.md): leave-one-out episodes
(`leave_one_out`), the per-task loop with budgets and resume (`loop`, `budget`, `task_folder`), the GRPO adaptation
and the attempts of one task (`adapt`), the one trainer reset to the start model for every task (`shared_trainer`),
the submission (`submission`), the command's own keys (`settings`)."""

from arc_trl.ttrl.budget import Allowance, Budget
from arc_trl.ttrl.leave_one_out import can_leave_one_out, leave_one_out_tasks
from arc_trl.ttrl.loop import LoopReport, run_tasks
from arc_trl.ttrl.settings import TtrlArguments
from arc_trl.ttrl.task_folder import TaskFolder

__all__ = ["Allowance", "Budget", "LoopReport", "TaskFolder", "TtrlArguments", "can_leave_one_out",
           "leave_one_out_tasks", "run_tasks"]
