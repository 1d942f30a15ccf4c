"""How a run's models are fitted: the plan of shadow memberships, the experiment over Ray (or the driver), its tasks, progress and phases, and Ray's start and stop."""
