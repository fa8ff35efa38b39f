from pathlib import Path

import pytest


@pytest.fixture
def fake_proc(tmp_path, monkeypatch):
    """fake_proc(module, "/proc/...", text): `module`'s Path reads `text` at that path (None: no such file)."""
    def use(module, proc_path: str, text: str | None) -> None:
        fake = tmp_path / Path(proc_path).name
        if text is not None:
            fake.write_text(text)
        monkeypatch.setattr(module, "Path", lambda p: fake if p == proc_path else Path(p))
    return use
