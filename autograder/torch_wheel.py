"""Install the right torch wheel before the rest of the course (`make venv` runs this).

    python autograder/torch_wheel.py [--dry-run]

The default package index gives each platform one torch build. On macOS it
is the CPU/MPS build and on Windows the CPU build, both a few hundred MB; on
Linux it is the CUDA build, which pulls NVIDIA's CUDA libraries (gigabytes)
even onto a laptop that has no NVIDIA GPU. So on Linux without an NVIDIA
driver this installs the CPU wheel from PyTorch's CPU index instead.

Two environment variables override the choice (`make help` lists them):
  TORCH_INDEX_URL  the index to install torch from, on any platform
                   (e.g. https://download.pytorch.org/whl/cu128 for a CUDA build)
  TORCH_SPEC       the torch requirement (default: the course's own, torch>=2.5)
A torch that is already installed in the environment is kept, overrides or
not: CI installs its pinned CPU wheel first and relies on that.

When the CPU index was chosen here (not named by TORCH_INDEX_URL) and cannot
be reached within a few seconds, one line says so and torch comes from the
default index instead, rather than pip retrying for minutes and failing;
pip's own errors from that install still show.

Standard library only: it runs in a fresh virtual environment before
anything is installed, as a script, so that importing `autograder` (and what
its package imports) is not needed.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"
# tests/course/test_torch_wheel.py proves this equals pyproject.toml's torch requirement.
COURSE_TORCH_SPEC = "torch>=2.5"
INDEX_ENV = "TORCH_INDEX_URL"
SPEC_ENV = "TORCH_SPEC"

# Any one of these means an NVIDIA driver is installed. Each alone misses a
# real setup: /proc/driver/nvidia/version is written by the kernel module on
# a Linux host; /dev/nvidia0 is what a container started with GPU access sees
# (and the host too); WSL2 has neither and only ships nvidia-smi (in
# /usr/lib/wsl/lib, not always on PATH). Any sign of a driver keeps the CUDA
# build: a GPU user given the CPU wheel would lose the GPU without noticing,
# a CPU user given the CUDA wheel only downloads more.
DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidia0", "/usr/lib/wsl/lib/nvidia-smi")


@dataclass(frozen=True)
class Plan:
    """What to do about torch: `pip_args` is None when nothing is installed."""
    pip_args: list[str] | None
    reason: str
    # the CPU index was picked here, not named by the user: may fall back when unreachable
    cpu_index_chosen_here: bool = False


def choose(system: str, nvidia_driver: bool, installed_torch: str | None,
           index_url: str | None = None, spec: str | None = None) -> Plan:
    """The decision, as a pure function of what was detected.

    system: platform.system()-style name ("Linux", "Darwin", "Windows").
    installed_torch: the version of torch already in the environment, or None.
    index_url, spec: the TORCH_INDEX_URL and TORCH_SPEC overrides (None or "" when unset).
    """
    index_url = (index_url or "").strip() or None
    spec = (spec or "").strip() or None
    if installed_torch is not None:
        note = ""
        if index_url or spec:
            set_vars = " and ".join(name for name, value in ((INDEX_ENV, index_url), (SPEC_ENV, spec)) if value)
            note = f"; {set_vars} ignored: to replace it, `make clean`, then `make venv` with {set_vars} set"
        return Plan(None, f"torch {installed_torch} is already installed: keeping it{note}")
    requirement = spec or COURSE_TORCH_SPEC
    if index_url:
        return Plan(["install", "--index-url", index_url, requirement], f"{requirement} from {INDEX_ENV}={index_url}")
    if system == "Linux" and not nvidia_driver:
        return Plan(["install", "--index-url", CPU_INDEX_URL, requirement],
                    f"{requirement}, CPU build from {CPU_INDEX_URL} (Linux without an NVIDIA driver; "
                    f"set {INDEX_ENV} to choose another build)", cpu_index_chosen_here=True)
    where = {"Linux": "Linux with an NVIDIA driver: the CUDA build",
             "Darwin": "macOS: the CPU/MPS build",
             "Windows": "Windows: the CPU build"}.get(system, f"{system}: its default build")
    return Plan(["install", requirement], f"{requirement} from the default index ({where})")


PROBE_TIMEOUT_S = 5


def index_reachable(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when `url` answers within `timeout` seconds, else why not (one line).
    Any HTTP answer counts: the server is there, and pip will say more."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as err:
        return str(getattr(err, "reason", err)) or type(err).__name__
    return None


def without_unreachable_cpu_index(plan: Plan, why_unreachable: str | None) -> Plan:
    """The plan to follow when the CPU index chosen by `choose` cannot be
    reached: the default index, with a reason that says what that costs."""
    if why_unreachable is None or not plan.cpu_index_chosen_here:
        return plan
    requirement = plan.pip_args[-1]
    return Plan(["install", requirement],
                f"PyTorch's CPU index {CPU_INDEX_URL} is unreachable ({why_unreachable}): installing {requirement} "
                f"from the default index instead (on Linux that is the CUDA build, gigabytes more; set {INDEX_ENV} "
                f"to a reachable index of CPU wheels to avoid it)")


def nvidia_driver_present(files=DRIVER_FILES, which=shutil.which) -> bool:
    return any(os.path.exists(path) for path in files) or which("nvidia-smi") is not None


def installed_torch_version() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python {Path(__file__).as_posix()}", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the decision and the pip command; install nothing")
    args = parser.parse_args(argv)
    import platform

    plan = choose(platform.system(), nvidia_driver_present(), installed_torch_version(),
                  os.environ.get(INDEX_ENV), os.environ.get(SPEC_ENV))
    if plan.cpu_index_chosen_here:
        plan = without_unreachable_cpu_index(plan, index_reachable(f"{CPU_INDEX_URL}/torch/"))
    print(f"torch: {plan.reason}", flush=True)
    if plan.pip_args is None:
        return 0
    command = [sys.executable, "-m", "pip", *plan.pip_args[:1], "-q", *plan.pip_args[1:]]
    if args.dry_run:
        print("would run: " + " ".join(command))
        return 0
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
