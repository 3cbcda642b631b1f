"""The perf tools' machine-readable outputs (--csv, --json) and the report pipeline (perf/report.py) end
to end on a small scale: one configuration, few sizes, one repeat.  The figures themselves are not
judged here (this machine is shared); that every system ran, and what was written, is."""
import csv
import json
import os
import subprocess
import sys

import pytest

BUILD = os.environ.get("LOOM_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
PERF = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mpirun(np_, *args):
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120)


def test_csv_has_every_timed_iteration_and_json_every_point(tmp_path):
    c, j = tmp_path / "t.csv", tmp_path / "t.json"
    out = mpirun(2, os.path.join(BUILD, "perf", "all_reduce_perf"), "-b", "8", "-e", "4K", "-f", "8", "-n", "3",
                 "-w", "1", "--csv", str(c), "--json", str(j))
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(open(c)))
    assert len(rows) == 4 * 2 * 3  # sizes 8, 64, 512, 4K x out-of-place and in-place x 3 iterations
    assert {r["placement"] for r in rows} == {"out-of-place", "in-place"}
    assert all(r["collective"] == "AllReduce" and r["backend"] == "loom" and r["nranks"] == "2" for r in rows)
    assert all(float(r["time_us"]) > 0 for r in rows)
    summary = json.load(open(j))
    assert summary["nranks"] == 2 and summary["iters"] == 3
    assert [r["bytes"] for r in summary["results"]] == [8, 8, 64, 64, 512, 512, 4096, 4096]
    assert all(r["wrong"] == 0 and r["busbw_gbs"] > 0 and r["cpu_s_per_gb"] >= 0 for r in summary["results"])
    # The table's mean time per size is the mean of the iterations the CSV lists (rank 0 sees both).
    for r in summary["results"]:
        its = [float(x["time_us"]) for x in rows if int(x["bytes"]) == r["bytes"] and x["placement"] == r["placement"]]
        assert len(its) == 3


def test_placement_out_leaves_in_place_unmeasured(tmp_path):
    j = tmp_path / "t.json"
    out = mpirun(2, os.path.join(BUILD, "perf", "broadcast_perf"), "-b", "1K", "-e", "1K", "-n", "2", "-w", "0",
                 "--placement", "out", "--json", str(j))
    assert out.returncode == 0, out.stderr
    assert [r["placement"] for r in json.load(open(j))["results"]] == ["out-of-place"]
    assert "N/A" in out.stdout


def test_json_reports_the_cpu_time_per_gb(tmp_path):
    # 8 MB x 5 calls on 2 ranks: tens of milliseconds of CPU, well above getrusage's resolution; a
    # library that moved 40 MB per rank with more than 100 CPU seconds per GB would be broken.
    j = tmp_path / "t.json"
    out = mpirun(2, os.path.join(BUILD, "perf", "all_reduce_perf"), "-b", "8M", "-e", "8M", "-n", "5", "-w", "1",
                 "--placement", "out", "--json", str(j))
    assert out.returncode == 0, out.stderr
    [r] = json.load(open(j))["results"]
    assert 0 < r["cpu_s_per_gb"] < 100, r


def test_json_stays_valid_for_sizes_without_an_element(tmp_path):
    # 4 bytes of reducescatter on 2 ranks is no float per rank: its CPU per GB must not print as inf.
    j = tmp_path / "t.json"
    out = mpirun(2, os.path.join(BUILD, "perf", "reduce_scatter_perf"), "-b", "4", "-e", "64", "-f", "4", "-n", "2",
                 "-w", "1", "--placement", "out", "--json", str(j))
    assert out.returncode == 0, out.stderr
    assert all(r["cpu_s_per_gb"] >= 0 for r in json.load(open(j))["results"])


def test_unwritable_json_is_an_error_not_a_crash(tmp_path):
    out = mpirun(2, os.path.join(BUILD, "perf", "all_reduce_perf"), "-b", "8", "-e", "8", "--json",
                 str(tmp_path / "missing" / "t.json"))
    assert out.returncode != 0
    assert "cannot create" in out.stderr and "No such file or directory" in out.stderr


def test_device_memory_without_a_gpu_is_refused_with_the_reason():
    """--memory device on a machine without a GPU (or a build without CUDA): exit 2 and say why."""
    out = mpirun(2, os.path.join(BUILD, "perf", "all_reduce_perf"), "-b", "1M", "-e", "1M", "--memory", "device")
    if "no GPU visible" not in out.stderr and "no CUDA" not in out.stderr and out.returncode == 0:
        pytest.skip("this machine has a GPU: tests/gpu/run.sh covers --memory device")
    assert out.returncode != 0
    assert "--memory device:" in out.stderr and ("no GPU visible" in out.stderr or "no CUDA" in out.stderr), out.stderr
    bad = mpirun(2, os.path.join(BUILD, "perf", "all_reduce_perf"), "--memory", "gpu")
    assert bad.returncode != 0 and "invalid memory 'gpu'" in bad.stderr


def test_report_pipeline_quick(tmp_path):
    out = subprocess.run([sys.executable, os.path.join(PERF, "report.py"), "--build", BUILD, "--quick", "--configs",
                          "shm2", "--repeats", "1", "--out", str(tmp_path)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.load(open(tmp_path / "results.json"))
    samples = data["configs"]["shm2"]["samples"]
    for system in ("loom", "openmpi", "gloo"):
        for coll in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall"):
            sizes = samples[system][coll]
            assert "1048576" in sizes and "4194304" in sizes, (system, coll, sizes.keys())
            assert all(len(v) == 1 and v[0][0] > 0 and v[0][1] > 0 for v in sizes.values())
    assert data["memcpy_gbs"] > 0
    report = open(tmp_path / "report.md").read()
    assert "| 2 ranks on one host (shared memory) |" in report and "loom/OpenMPI" in report
    assert open(tmp_path / "shm2.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert "geomean busbw ratio" in out.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
