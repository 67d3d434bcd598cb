"""The allocator setting of the `grpo` command."""

import platform

import pytest

from grpo_cli.allocator import keep_freed_memory


def test_the_cli_allocator_setting_takes_on_glibc():
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    assert keep_freed_memory() is True
