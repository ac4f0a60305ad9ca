"""Logs read from a stream keep only what `decode` keeps (bounded memory), and NUL-filled input such as
/dev/zero is refused at once."""

from __future__ import annotations

import io
import os
import resource

import pytest

from retriage.core.errors import UserError
from retriage.triage import logtext


@pytest.mark.parametrize("size", [10, logtext.MAX_BYTES, logtext.MAX_BYTES + 1, 3_000_017])
def test_a_stream_gives_what_decoding_the_whole_input_gives(size):
    data = bytes((65 + i % 26) for i in range(size - 1)) + b"\n"
    streamed = logtext.read_head_tail(io.BytesIO(data))
    assert logtext.decode(streamed) == logtext.decode(data)
    if size > logtext.MAX_BYTES:
        assert isinstance(streamed, logtext.HeadTail) and streamed.size == size
        assert len(streamed.data) == logtext.MAX_BYTES + len(logtext.CUT)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_is_refused_without_reading_it_all():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open("/dev/zero", "rb") as f, pytest.raises(UserError, match="binary") as e:
        logtext.read_head_tail(f)
    assert e.value.exit_code == 2
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KB: nowhere near gigabytes
