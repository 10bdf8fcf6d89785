"""docker/Dockerfile built and run on a real Docker engine: the image an operator gets.

Marked ``image`` and left out of the ordinary pytest run (it takes minutes and root): ``scripts/test``
runs it after the suite (``pytest -m image tests/test_docker_image.py``), and its failure fails the run.
On the way it installs Debian's ``docker.io`` and ``debootstrap`` with apt-get, starts ``dockerd`` when
no engine answers (and stops it again afterwards), and makes the base image from Debian packages
(``debootstrap`` + ``docker import``: no image registry is reachable here), cached by tag between
runs. Without root, apt-get or a working engine it skips, saying why.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# Cold (engine installed, base image made): about 4 minutes here; warm about 1.
pytestmark = [pytest.mark.image, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / "build" / "wheels"
IMAGE = "hygieia:image-test"
SUITE = "bookworm"  # Debian 12: python3 is 3.11, the version the host builds the wheels with
BASE_PYTHON = (3, 11)
# Only what the image needs: python3 with venv (ensurepip) for the builder, passwd for useradd.
BASE_PACKAGES = ("python3", "python3-venv", "passwd")
BASE_IMAGE = f"hygieia-base:{SUITE}-" + hashlib.sha256(" ".join(BASE_PACKAGES).encode()).hexdigest()[:8]
UID = 10001


def _run(args: list[str], timeout: float = 300, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)  # type: ignore[call-overload, no-any-return]


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (
        f"{' '.join(result.args)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result


def _apt_install(*packages: str) -> str | None:
    """Install Debian packages; None when done, else why not."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "not root or no apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if _run(install, timeout=600, env=env).returncode == 0:
        return None
    _run(["apt-get", "update", "-q"], timeout=600, env=env)
    result = _run(install, timeout=600, env=env)
    return (
        None
        if result.returncode == 0
        else f"apt-get install {' '.join(packages)} failed: {result.stderr[-500:]}"
    )


def _docker_client() -> str | None:
    # Debian's client first: a preinstalled newer client without buildx refuses classic builds
    # unless told to (DOCKER_BUILDKIT=0 is set below too).
    return "/usr/bin/docker" if Path("/usr/bin/docker").is_file() else shutil.which("docker")


def _engine_answers(docker: str) -> bool:
    return _run([docker, "info", "--format", "{{.ServerVersion}}"], timeout=30).returncode == 0


@pytest.fixture(scope="module")
def docker() -> Iterator[str]:
    """The docker client, with an engine that answers: installed and started here when needed."""
    no_engine = shutil.which("dockerd") is None and not Path("/usr/sbin/dockerd").exists()
    if (_docker_client() is None or no_engine) and (why := _apt_install("docker.io")):
        pytest.skip(f"NO DOCKER ENGINE: Debian's docker.io could not be installed ({why}); image NOT built")
    client = _docker_client()
    assert client is not None
    if _engine_answers(client):
        yield client
        return
    dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
    if os.geteuid() != 0:
        pytest.skip("NO DOCKER ENGINE: none answers and starting dockerd needs root; image NOT built")
    log = Path(tempfile.gettempdir()) / "hygieia-image-test-dockerd.log"
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            [dockerd], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 60
        while not _engine_answers(client):
            if daemon.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-1500:]
                pytest.skip(f"NO DOCKER ENGINE: dockerd did not start (log {log}):\n{tail}")
            time.sleep(1)
        yield client
    finally:
        daemon.terminate()  # the images stay in /var/lib/docker: the base image is cached for next time
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def _apt_mirror() -> str:
    """The Debian mirror apt is configured with (the only way to the archive from here)."""
    sources = Path("/etc/apt/sources.list.d")
    for path in [
        Path("/etc/apt/sources.list"),
        *sorted(sources.glob("*.sources")),
        *sorted(sources.glob("*.list")),
    ]:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for stanza in re.split(r"\n\s*\n", text):  # deb822: URIs / Suites per stanza
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.MULTILINE)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.MULTILINE)
            if (
                uris
                and suites
                and SUITE in suites.group(1).split()
                and uris.group(1).rstrip("/").endswith("/debian")
            ):
                return uris.group(1)
        for match in re.finditer(rf"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)/?\s+{SUITE}\s", text, re.MULTILINE):
            return match.group(1)
    return "http://deb.debian.org/debian"


@pytest.fixture(scope="module")
def base_image(docker: str) -> str:
    """A Debian base image with Python 3.11, from Debian packages; made once, then reused by tag."""
    if sys.version_info[:2] != BASE_PYTHON:
        pytest.skip(
            f"the wheels are built by this Python ({sys.version_info[0]}.{sys.version_info[1]}); "
            f"Debian {SUITE}'s python3 is {BASE_PYTHON[0]}.{BASE_PYTHON[1]}: image NOT built"
        )
    if _run([docker, "image", "inspect", BASE_IMAGE], timeout=60).returncode == 0:
        return BASE_IMAGE
    if shutil.which("debootstrap") is None and (why := _apt_install("debootstrap")):
        pytest.skip(f"NO DEBOOTSTRAP: {why}; image NOT built")
    with tempfile.TemporaryDirectory(prefix="hygieia-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _ok(
            _run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(BASE_PACKAGES)}",
                    SUITE,
                    str(rootfs),
                    _apt_mirror(),
                ],
                timeout=900,
            )
        )
        # What an image never uses: apt's downloads and lists, documentation, translations.
        for junk in (
            "var/cache/apt",
            "var/lib/apt/lists",
            "usr/share/doc",
            "usr/share/locale",
            "usr/share/man",
        ):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            [docker, "import", "-", BASE_IMAGE], stdin=tar.stdout, capture_output=True, text=True, timeout=600
        )
        assert tar.stdout is not None
        tar.stdout.close()
        assert tar.wait() == 0 and imported.returncode == 0, imported.stderr
    return BASE_IMAGE


@pytest.fixture(scope="module")
def image(docker: str, base_image: str) -> Iterator[str]:
    """docker/Dockerfile built as README says: wheels on the host, then a classic `docker build`."""
    shutil.rmtree(WHEELS, ignore_errors=True)
    _ok(
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--disable-pip-version-check",
                "--wheel-dir",
                str(WHEELS),
                str(ROOT),
            ],
            timeout=900,
        )
    )
    started = time.monotonic()
    _ok(
        _run(
            [
                docker,
                "build",
                "-f",
                "docker/Dockerfile",
                "--build-arg",
                f"BASE_IMAGE={base_image}",
                "-t",
                IMAGE,
                ".",
            ],
            timeout=900,
            cwd=ROOT,
            env={**os.environ, "DOCKER_BUILDKIT": "0"},  # the classic builder, whichever client this is
        )
    )
    size = _ok(_run([docker, "image", "inspect", "--format", "{{.Size}}", IMAGE])).stdout.strip()
    print(
        f"image {IMAGE}: {int(size) / 1e6:.0f} MB, "
        f"built in {time.monotonic() - started:.0f} s on {base_image}"
    )
    try:
        yield IMAGE
    finally:
        _run([docker, "rmi", "-f", IMAGE])
        _run([docker, "image", "prune", "-f"])  # the builder stage, untagged: rebuilt from the wheels anyway


@pytest.fixture
def volume(docker: str) -> Iterator[str]:
    name = f"hygieia-image-test-{uuid.uuid4().hex[:8]}"
    _ok(_run([docker, "volume", "create", name]))
    try:
        yield name
    finally:
        _run([docker, "volume", "rm", "-f", name])


@pytest.fixture
def container(docker: str, image: str, volume: str) -> Iterator[str]:
    """The console platform on the offline provider, stdin held open, health checked every 2 s."""
    name = f"hygieia-image-test-{uuid.uuid4().hex[:8]}"
    _ok(
        _run(
            [
                docker, "run", "-d", "-i", "--name", name, "-v", f"{volume}:/data",
                "--health-interval", "2s", "--health-start-period", "60s",
                image, "run", "--platform", "console",
            ]
        )
    )  # fmt: skip
    try:
        yield name
    finally:
        _run([docker, "rm", "-f", name])


def _wait_healthy(docker: str, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    status = ""
    while time.monotonic() < deadline:
        status = _ok(_run([docker, "inspect", "--format", "{{.State.Health.Status}}", name])).stdout.strip()
        if status == "healthy":
            return
        time.sleep(1)
    logs = _run([docker, "logs", "--tail", "30", name])
    raise AssertionError(f"{name} is {status!r} after {timeout:.0f} s\n{logs.stdout}\n{logs.stderr}")


def _say(docker: str, name: str, text: str, expect: str, timeout: float = 60) -> str:
    """Type one line into the container's console; the first stdout line containing ``expect``."""
    attach = subprocess.Popen(
        [docker, "attach", "--sig-proxy=false", name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    found: list[str] = []
    assert attach.stdout is not None and attach.stdin is not None

    def read() -> None:
        assert attach.stdout is not None
        for line in attach.stdout:
            if expect in line:
                found.append(line.strip())
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        time.sleep(1)  # attached before the line goes in, so its answer is not missed
        attach.stdin.write(text + "\n")
        attach.stdin.flush()
        reader.join(timeout)
    finally:
        attach.kill()  # --sig-proxy=false: the container keeps running
        attach.wait()
    assert found, f"no line with {expect!r} in the console's output within {timeout:.0f} s"
    return found[0]


def test_the_image_runs_healthy_as_non_root_and_keeps_the_chat_in_its_volume(
    docker: str, image: str, volume: str, container: str
) -> None:
    _wait_healthy(docker, container)
    word = f"marmalade{uuid.uuid4().hex[:6]}"

    reply = _say(docker, container, f"remember the {word} jar", expect=word)
    _ok(_run([docker, "restart", container], timeout=120))
    _wait_healthy(docker, container)
    # A new container on the same volume: the conversation lives in the volume, not in the container.
    found_anew = _ok(
        _run([docker, "run", "--rm", "-v", f"{volume}:/data", image, "sessions", "search", word])
    ).stdout
    uids = _ok(_run([docker, "exec", container, "cat", "/proc/1/status"])).stdout
    owner = _ok(_run([docker, "exec", container, "stat", "-c", "%u", "/data/hygieia.db"])).stdout.strip()

    assert "[offline]" in reply and word in reply
    assert word in found_anew
    [uid_line] = [line for line in uids.splitlines() if line.startswith("Uid:")]
    assert set(uid_line.split()[1:]) == {str(UID)}, uid_line
    assert owner == str(UID)
