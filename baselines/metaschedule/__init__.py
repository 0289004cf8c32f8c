"""TVM MetaSchedule as a peer of tensorgym's agents (see :mod:`.agent`).

* :mod:`.tvmscript`: a cheap ``inspect.stack`` that makes MetaSchedule's processes start in seconds;
* :mod:`.design`: MetaSchedule's design spaces as knobs, replayed and matched;
* :mod:`.space`: the ``metaschedule`` space, which stores MetaSchedule's schedules as configs;
* :mod:`.job`: the tuning job that runs ``tune_tir`` in its own process;
* :mod:`.agent`: the ``metaschedule`` agent.
"""

from .agent import TRIALS_PER_ITER, MetaScheduleAgent, MetaScheduleRun
from .space import MetaScheduleSpace

__all__ = ["TRIALS_PER_ITER", "MetaScheduleAgent", "MetaScheduleRun", "MetaScheduleSpace"]
