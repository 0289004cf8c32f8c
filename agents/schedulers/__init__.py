"""Task schedulers: one measurement budget shared by the layers of a network (``tensorgym tune-network``).

* :mod:`.base`: the :class:`TaskScheduler` interface and its warm-up/round loop;
* :mod:`.round_robin`: every task in turn;
* :mod:`.gradient`: Ansor's gradient task scheduler;
* :mod:`.metaschedule_gradient`: MetaSchedule's simplified gradient scheduler;
* :mod:`.dual_task`: GTA's dual-task scheduler (seed 002), gradient pick plus ``probability_sample``
  over mapping candidates.

:func:`tensorgym.catalog.make_scheduler` builds one by name.
"""

from .base import TaskScheduler
from .dual_task import DualTaskScheduler, probability_sample
from .gradient import GradientScheduler, ansor_gradient
from .metaschedule_gradient import MetaScheduleGradientScheduler, metaschedule_gradient
from .round_robin import RoundRobinScheduler

__all__ = ["DualTaskScheduler", "GradientScheduler", "MetaScheduleGradientScheduler", "RoundRobinScheduler",
           "TaskScheduler", "ansor_gradient", "metaschedule_gradient", "probability_sample"]
