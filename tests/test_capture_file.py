"""The file sink (JSONL segments, rotation, compression) on a real temp directory."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import zstandard

from provkg import capture
from provkg.capture.file_sink import FileSink
from provkg.events import parse_events_jsonl


def _read(path):
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    elif path.name.endswith(".zst"):
        data = zstandard.ZstdDecompressor().stream_reader(data).read()
    return data.decode().splitlines()


@pytest.mark.parametrize("compression", [None, "gzip", "zstd"], ids=["plain", "gzip", "zstd"])
def test_file_sink_writes_valid_jsonl_segments(tmp_path, compression):
    url = f"file:{tmp_path / 'events'}" + (f"?compression={compression}" if compression else "")
    with capture.workflow("files", sink=url, spool=tmp_path / "spool") as wf:
        for i in range(500):
            with wf.task("step", index=i, used={"x": i}) as t:
                t.generate(y=i * 2)
    files = sorted((tmp_path / "events").iterdir())
    assert files and all(f.name.endswith({None: ".jsonl", "gzip": ".gz", "zstd": ".zst"}[compression])
                         for f in files)
    lines = [line for f in files for line in _read(f)]
    events = list(parse_events_jsonl(lines, source="segment"))
    assert len(events) == 2 + 2 * 500
    ids = {(e.id, e.event) for e in events}
    assert len(ids) == len(events)
    ys = sorted(v.value for e in events if e.type == "task" and e.event == "end" for v in e.generated)
    assert ys == [i * 2 for i in range(500)]
    assert not (tmp_path / "spool").exists()  # nothing needed spooling


def test_file_sink_rotates_segments_by_size(tmp_path):
    sink = FileSink(tmp_path, segment_bytes=10_000)
    with capture.workflow("rot", sink=sink, spool=tmp_path / "spool") as wf:
        for i in range(1000):
            wf.task("t", used={"i": i}).end()
    assert len(sink.paths) >= 3
    assert all(p.stat().st_size >= 10_000 for p in sink.paths[:-1])  # rotated only past the limit
    total = sum(len(_read(p)) for p in sink.paths)
    assert total == 2 + 2 * 1000


def test_file_sink_url_forms(tmp_path):
    assert FileSink.from_url(f"file://{tmp_path}/a").directory == tmp_path / "a"
    assert FileSink.from_url("file:rel/dir?compression=gzip").compression == "gzip"
    # the home folder, not a folder named "~" here (black-box testing)
    assert FileSink.from_url("file:~/events").directory == Path.home() / "events"
    with pytest.raises(ValueError, match="compression"):
        FileSink(tmp_path, compression="lz4")
