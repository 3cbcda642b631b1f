"""PyTorch's own distributed test suite (DistributedTest._DistTestBase, shipped in the torch wheel) for
the backend named by BACKEND, driven as torch's test/distributed/test_distributed_spawn.py drives it:
one spawned process per rank.  Run by run_suite.py, which runs it for loom and for gloo and compares."""
import os
import sys

import torch.distributed as dist

if os.environ.get("BACKEND") == "loom":
    import loom_torch  # noqa: F401  (registers "loom" in this process and in every spawned rank)

from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402
from torch.testing._internal.common_utils import run_tests  # noqa: E402

if os.environ.get("BACKEND") == "loom":
    # A plugin backend: tests that ask whether the backend is available say yes.
    DistTestCases.backend_feature["plugin"].add("loom")

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402

if not dist.is_available():
    print("torch.distributed is not available")
    sys.exit(0)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
