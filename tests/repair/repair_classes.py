"""The ``--from`` classes the repair tests sweep and fix, by a module name no other folder uses.

Test modules import these from here, not from ``conftest``: with several test folders collected
together, ``conftest`` can name another folder's conftest.
"""

#: The seed thread's class: DeepSpeed 0.8.1's TrainSchedule with the ``+ 1`` removed.
SEED_CLASS = "seedfix:FixBufferTrainSchedule"
#: DeepSpeed's TrainSchedule as installed today (0.19.8).
TODAY_CLASS = "deepspeed.runtime.pipe.schedule:TrainSchedule"
