"""Every test process is one rank.  Launched by torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT set) or by
mpirun (OMPI_COMM_WORLD_RANK/SIZE mapped here; MASTER_ADDR/PORT passed with -x).  The default group is
loom; a gloo group over the same ranks gives the results loom is checked against."""
import datetime
import os

import pytest
import torch
import torch.distributed as dist

import loom_torch  # noqa: F401  (registers the "loom" backend)

# PyTorch's own suite has its own driver (dist_suite/run_suite.py) and environment.
collect_ignore = ["dist_suite"]


def _env_from_launcher():
    if "RANK" not in os.environ and "OMPI_COMM_WORLD_RANK" in os.environ:
        os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
        os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
        os.environ["LOCAL_RANK"] = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise RuntimeError(f"{name} is not set: start the tests with torchrun or mpirun (see tests/CMakeLists.txt)")


@pytest.fixture(scope="session")
def groups():
    _env_from_launcher()
    dist.init_process_group("loom", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    yield dist.group.WORLD, gloo
    dist.destroy_process_group()


@pytest.fixture
def rank():
    return dist.get_rank()


@pytest.fixture
def world():
    return dist.get_world_size()
