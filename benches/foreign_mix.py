"""Writes an NDJSON event mix nobody here designed, for `NDJSON=… benches/compare_batch.sh`.

Every row of five of vega_datasets' bundled tables (airports, cars, seattle-temps,
us-employment, la-riots) becomes one `track` call made by the real Segment Python SDK
(segment-analytics-python, `send=False`): the event is named after its table, its properties are
the row as the table has it (the table's own column names, types and nulls), and the envelope
(context.library, messageId, timestamp, integrations) is the SDK's. The rows are interleaved
round robin, so a batch holds every shape: narrow (seattle-temps: a date and a number), text
(airports, la-riots), mixed numbers with nulls (cars) and a wide numeric row (us-employment).

    target/py/bin/pip install vega_datasets segment-analytics-python
    target/py/bin/python benches/foreign_mix.py /tmp/foreign.ndjson
    NDJSON=/tmp/foreign.ndjson MIXES="" CONNECTIONS=16 benches/compare_batch.sh
"""

import itertools
import json
import math
import sys
import uuid

import segment.analytics as analytics
from vega_datasets import local_data

TABLES = ["airports", "cars", "seattle-temps", "us-employment", "la-riots"]


def properties(row):
    out = {}
    for key, value in row.items():
        if hasattr(value, "isoformat"):
            value = value.isoformat()
        elif isinstance(value, float) and math.isnan(value):
            value = None
        elif hasattr(value, "item"):  # numpy scalars
            value = value.item()
        out[str(key)] = value
    return out


def main(out_path):
    client = analytics.Client("foreign-mix", send=False)
    rows = []
    for name in TABLES:
        frame = getattr(local_data, name.replace("-", "_"))()
        rows.append([(name, r) for r in frame.to_dict(orient="records")])
    written = 0
    with open(out_path, "w", encoding="utf-8") as out:
        for pair in itertools.zip_longest(*rows):
            for item in pair:
                if item is None:
                    continue
                name, row = item
                ok, msg = client.track(
                    anonymous_id=str(uuid.uuid4()), event=name, properties=properties(row)
                )
                assert ok, msg
                out.write(json.dumps(msg, default=str, separators=(",", ":")) + "\n")
                written += 1
    client.shutdown()
    print(f"{written} messages from {', '.join(TABLES)} in {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "foreign.ndjson")
