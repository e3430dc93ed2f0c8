"""``tfperf builds``: plan a TensorFlow source build for this CPU, and compare builds.

The modules here run in the parent process and never import TensorFlow:

- :mod:`tfperf.builds.releases` — TensorFlow release -> Bazel, Python and compiler versions.
- :mod:`tfperf.builds.cpuflags` — archspec target -> compiler flags, plus ``-m`` flags for the
  host features the target lacks.
- :mod:`tfperf.builds.plan` — the pinned recipe (shell script + Dockerfile) and running it.
- :mod:`tfperf.builds.envs` — one isolated, cached environment per candidate build.
- :mod:`tfperf.builds.compare` — the same workload measured in each environment.
- :mod:`tfperf.builds.explain` — what a build for this CPU could buy, from measured figures.
"""

from __future__ import annotations
