"""The container image (Containerfile, built by bin/image with buildah on an
mmdebstrap base) serves the console as it would in a pod: its own command (gunicorn), as uid
10001, on a read-only root filesystem with only BRICK_VAR_DIR and /dev/shm writable. There is no
container runtime daemon here, so the smoke test runs the image's unpacked root under chroot
(mount namespace of its own: the root bind-mounted read-only, tmpfs where a pod has emptyDirs).

The build is cached (~/.cache/brickadmin-image: the base and buildah's layers), so a run after a
code change rebuilds only the application's layers."""

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import require_service

ROOT = Path(__file__).resolve().parents[2]
UID = 10001

pytestmark = pytest.mark.alone  # the build uses both cores for minutes: bin/test runs it apart


def buildah_can_run() -> bool:
    return os.geteuid() == 0 and (shutil.which("buildah") is not None or shutil.which("apt-get") is not None)


@pytest.fixture(scope="module")
def image_root():
    """Build (or reuse) the image, and give its root filesystem as a directory and its config."""
    require_service(buildah_can_run(), "buildah as root (bin/image installs it with apt-get)")
    build = subprocess.run([str(ROOT / "bin/image")], cwd=ROOT, capture_output=True, text=True, timeout=2400)
    assert build.returncode == 0, build.stderr[-3000:]
    tag = build.stdout.strip().splitlines()[-1]
    env = dict(os.environ, CONTAINERS_STORAGE_CONF=str(cache_dir() / "storage.conf"))
    config = json.loads(
        subprocess.run(
            ["buildah", "inspect", "--type", "image", tag], env=env, capture_output=True, text=True, check=True
        ).stdout
    )["OCIv1"]["config"]
    root = subprocess.run(
        [str(ROOT / "bin/image"), "mount"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    yield Path(root), config, build.stderr
    subprocess.run([str(ROOT / "bin/image"), "unmount"], cwd=ROOT, check=False)


def cache_dir() -> Path:
    return Path(os.environ.get("BRICK_IMAGE_CACHE", Path.home() / ".cache/brickadmin-image"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_in_a_pod(root: Path, config: dict, command: list[str], extra_env: dict) -> list[str]:
    """The command line that runs `command` in the image as a pod with readOnlyRootFilesystem
    would: a private mount namespace, the root read-only, tmpfs for the emptyDir and /dev/shm,
    the image's user, working directory and environment."""
    env = dict(e.split("=", 1) for e in config.get("Env", []))
    env.update(extra_env)
    user = config.get("User", "")
    assert user.split(":")[0] == str(UID), f"the image runs as {user!r}"
    var_dir = env["BRICK_VAR_DIR"].lstrip("/")
    script = f"""set -e
ro=/run/brickadmin-image-root  # a mount point only, in this namespace alone
mkdir -p "$ro"
mount --bind "{root}" "$ro" && mount -o remount,bind,ro "$ro"
mount -t proc proc "$ro/proc"
mount --rbind /dev "$ro/dev" && mount -t tmpfs -o mode=1777 tmpfs "$ro/dev/shm"
mount -t tmpfs -o uid={UID},gid={UID},mode=0750 tmpfs "$ro/{var_dir}"
cd "$ro" && exec chroot --userspec={user} "$ro" env -i {" ".join(f"{k}='{v}'" for k, v in env.items())} \
  sh -c 'cd {config.get("WorkingDir", "/")} && exec "$@"' sh "$@"
"""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *command]


def get(url, host="brickadmin.example.internal"):
    request = urllib.request.Request(url, headers={"Host": host, "X-Forwarded-Proto": "https"})
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def test_the_image_has_no_compiler_no_test_tools_and_the_static_files(image_root):
    root, config, _ = image_root
    compilers = [
        p
        for d in ("usr/bin", "usr/local/bin")
        for p in (root / d).glob("*")
        if p.name in ("cc", "gcc", "c++", "g++", "clang", "make") or p.name.startswith(("gcc-", "x86_64-linux-gnu-gcc"))
    ]
    assert compilers == []
    site = next((root / "opt/venv/lib").glob("python3.11/site-packages"))
    for absent in ("pytest", "playwright", "hypothesis", "pip"):
        assert not (site / absent).exists(), f"{absent} is in the image"
    assert (site / "gunicorn").is_dir() and (site / "django").is_dir()
    manifest = json.loads((root / "app/staticfiles/staticfiles.json").read_text())
    assert "css/brickadmin.css" in manifest["paths"] and "js/autosubmit.js" in manifest["paths"]
    assert config["Cmd"][0] == "gunicorn" and "8000" in " ".join(config["Cmd"])
    assert not (root / "app/tests").exists() and not (root / "app/.git").exists()


def test_the_image_serves_healthz_and_the_login_page_read_only_as_its_user(image_root):
    root, config, build_log = image_root
    port = free_port()
    env = {"DJANGO_SECRET_KEY": "smoke-test-only-" + "k" * 40, "DJANGO_ALLOWED_HOSTS": "brickadmin.example.internal"}
    migrate = subprocess.run(
        as_in_a_pod(root, config, ["sh", "-c", "python manage.py migrate --noinput -v0 && touch /app/probe"], env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    # migrate wrote the SQLite database in the emptyDir; the root refused the write
    assert "Read-only file system" in migrate.stderr, migrate.stderr[-2000:]

    # The image's own command, with only the port changed (another server may hold 8000 here).
    command = [a if a != "0.0.0.0:8000" else f"127.0.0.1:{port}" for a in config["Cmd"]]
    assert command != config["Cmd"], "the image's command binds 0.0.0.0:8000"
    # a fresh namespace: the SQLite file of the migrate above is gone, so migrate again first
    server = subprocess.Popen(
        as_in_a_pod(
            root, config, ["sh", "-c", 'python manage.py migrate --noinput -v0 && exec "$@"', "sh", *command], env
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                status, _, body = get(f"http://127.0.0.1:{port}/healthz", host="10.0.0.7:8000")  # as a kubelet
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()[-3000:]
                assert time.monotonic() < deadline, "gunicorn did not answer within 120 s"
                time.sleep(0.5)
        assert (status, body) == (200, "ok")

        status, headers, page = get(f"http://127.0.0.1:{port}/login/")
        assert status == 200, page[:2000]
        assert 'name="username"' in page and 'name="password"' in page and "csrfmiddlewaretoken" in page
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        css = page.split('href="/static/css/')[1].split('"')[0]
        assert css != "brickadmin.css", "not the hashed name: the collected manifest is not used"
        status, headers, _ = get(f"http://127.0.0.1:{port}/static/css/{css}")
        assert status == 200 and headers["Content-Type"].startswith("text/css")

        uids = {
            line.split()[1]
            for pid in child_pids(server.pid) | {server.pid}
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("Uid:")
        }
        assert uids == {str(UID)}, uids
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    print(build_log.strip().splitlines()[-1])  # "built ... (size)"


def child_pids(pid: int) -> set[int]:
    out = set()
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if int(p.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(p.name))
        except (OSError, ValueError, IndexError):
            continue
    return out
