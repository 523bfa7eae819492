"""Sends the calls of a spec file through an unmodified Python SDK.

Usage: sdk_send.py segment|rudder URL TOKEN SPEC.json [EXPECTED_CODE] — exits 1 if the SDK
reported any error; with EXPECTED_CODE, exits 1 unless every error it reported is an API error
with that `code` (read by the SDK from the top level of the error body).
"""
import json
import sys
from datetime import datetime

sdk, url, token, spec_path = sys.argv[1:5]
expected = sys.argv[5] if len(sys.argv) > 5 else None
calls = json.load(open(spec_path))
errors = []


def on_error(error, items):
    errors.append((getattr(error, "code", None), f"{error!r} ({len(items)} items)"))


if sdk == "segment":
    from segment.analytics.client import Client

    client = Client(token, host=url, on_error=on_error, max_retries=2, gzip=True)
elif sdk == "rudder":
    from rudderstack.analytics.client import Client

    client = Client(token, host=url, on_error=on_error, max_retries=2)
else:
    sys.exit(f"unknown sdk {sdk}")

for c in calls:
    common = dict(
        message_id=c["messageId"],
        timestamp=datetime.fromisoformat(c["timestamp"].replace("Z", "+00:00")),
        context=c.get("context"),
    )
    ids = dict(user_id=c.get("userId"), anonymous_id=c.get("anonymousId"))
    t = c["type"]
    if t == "track":
        client.track(**ids, event=c["event"], properties=c.get("properties"), **common)
    elif t == "identify":
        client.identify(**ids, traits=c.get("traits"), **common)
    elif t == "page":
        client.page(**ids, name=c.get("name"), category=c.get("category"),
                    properties=c.get("properties"), **common)
    elif t == "screen":
        client.screen(**ids, name=c.get("name"), properties=c.get("properties"), **common)
    elif t == "group":
        client.group(**ids, group_id=c["groupId"], traits=c.get("traits"), **common)
    elif t == "alias":
        client.alias(previous_id=c["previousId"], user_id=c["userId"], **common)
    else:
        sys.exit(f"unknown call {t}")

client.flush()
client.join()
if expected is not None:
    if not errors or any(code != expected for code, _ in errors):
        print(f"expected API errors {expected!r}, got:", errors, file=sys.stderr)
        sys.exit(1)
elif errors:
    print("SDK errors:", "; ".join(text for _, text in errors), file=sys.stderr)
    sys.exit(1)
