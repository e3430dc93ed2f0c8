"""tfperf.core.versions: version numbers read through packaging, never by hand."""

from __future__ import annotations

import pytest

from tfperf.core.errors import UserError
from tfperf.core.versions import parse, release, same_release


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("2.21.0", (2, 21, 0)),
        ("2.21.0rc1", (2, 21, 0)),
        ("2.22.0-dev20250101", (2, 22, 0)),
        ("2.21.0+local", (2, 21, 0)),
        ("v2.20", (2, 20)),
        ("12.4", (12, 4)),
        ("9", (9,)),
        ("64_112", ()),
        ("", ()),
        (None, ()),
    ],
)
def test_release_numbers(text: str | None, numbers: tuple[int, ...]) -> None:
    assert release(text) == numbers


@pytest.mark.parametrize(
    ("got", "want", "same"),
    [
        ("2.20.0", "2.20.0", True),
        ("2.21.0", "2.21.0+local", True),  # the local label is the builder's
        ("2.21.0-dev20250101", "2.21.0.dev20250101", True),  # a nightly, two spellings
        ("2.21.0-dev20250101", "2.21.0.dev20250102", True),
        ("2.21.0", "2.20.0", False),
        ("2.21.0rc1", "2.21.0", False),
        ("2.21.0-dev20250101", "2.22.0.dev20250101", False),
    ],
)
def test_same_release(got: str, want: str, same: bool) -> None:
    assert same_release(got, want) is same


def test_a_typed_version_that_is_not_one_is_a_user_error() -> None:
    assert parse(" 2.21.0 ", "--tensorflow", "2.21.0").release == (2, 21, 0)
    with pytest.raises(UserError, match=r"--tensorflow 'two' is not a version number"):
        parse("two", "--tensorflow", "2.21.0")
