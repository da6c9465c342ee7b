from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO.parent / "shared" / "healthbench-samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings):
    # Hashing with the production hasher costs ~0.3 s per login; tests log in a lot.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def sample_file(name: str) -> Path:
    """A file from the public HealthBench samples beside the repository, or skip."""
    path = SAMPLES / name
    if not path.exists():
        pytest.skip(f"{path} is absent: the public samples are not on this machine")
    return path
