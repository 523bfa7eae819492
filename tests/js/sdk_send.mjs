// Sends the calls of a spec file through an unmodified Node SDK pointed at the server, and
// writes every batch body it sent (decompressed) to SENT.json.
// Usage: node sdk_send.mjs segment|rudder URL TOKEN SPEC.json SENT.json
// Exits 1 if the SDK reported any error.
//
// segment: @segment/analytics-node (2 retries, a 200 ms flush interval); the app passes each
//   call's `timestamp`, and the SDK sends one `sentAt` per batch, as application/json.
// rudder: @rudderstack/rudder-sdk-node with its defaults; the app passes no time, so the SDK
//   stamps each message with `originalTimestamp` and a `sentAt` of its own, and gzips the batch
//   itself, which its HTTP client then labels application/x-www-form-urlencoded.
import { readFileSync, writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { Analytics as SegmentAnalytics } from '@segment/analytics-node';
import RudderAnalytics from '@rudderstack/rudder-sdk-node';

const [sdk, url, token, specPath, sentPath] = process.argv.slice(2);
const calls = JSON.parse(readFileSync(specPath, 'utf8'));
const errors = [];
const sent = [];

// Each SDK: how to send one call, and how to send everything still queued.
function segment() {
  const analytics = new SegmentAnalytics({ writeKey: token, host: url, maxRetries: 2, flushInterval: 200 });
  analytics.on('error', (e) => errors.push(String(e?.message ?? e)));
  analytics.on('http_request', (req) => sent.push(JSON.parse(req.body)));
  return {
    send: (type, message) => analytics[type]({ ...message, timestamp: new Date(message.timestamp) }),
    close: () => analytics.closeAndFlush({ timeout: 20000 }),
  };
}

function rudder() {
  const analytics = new RudderAnalytics(token, { dataPlaneUrl: url });
  // Each message is called back, once its batch is answered, with that batch's body as sent
  // (gzipped): keep every body once, and wait for every callback before exiting.
  const bodies = new Set();
  const answered = [];
  return {
    send: (type, { timestamp, ...message }) => answered.push(new Promise((resolve) => {
      analytics[type](message, (err, body) => {
        if (err) errors.push(String(err?.message ?? err));
        else if (!bodies.has(body)) {
          bodies.add(body);
          sent.push(JSON.parse(Buffer.isBuffer(body) ? gunzipSync(body).toString() : JSON.stringify(body)));
        }
        resolve();
      });
    })),
    close: async () => {
      // One flush sends up to flushAt (20) queued messages; a spec has 6.
      await analytics.flush();
      await Promise.all(answered);
    },
  };
}

const client = { segment, rudder }[sdk]?.();
if (!client) throw new Error(`unknown sdk ${sdk}`);
for (const c of calls) {
  const m = { messageId: c.messageId, timestamp: c.timestamp, context: c.context };
  if (c.userId !== undefined) m.userId = c.userId;
  if (c.anonymousId !== undefined) m.anonymousId = c.anonymousId;
  switch (c.type) {
    case 'track': client.send('track', { ...m, event: c.event, properties: c.properties }); break;
    case 'identify': client.send('identify', { ...m, traits: c.traits }); break;
    case 'page': client.send('page', { ...m, name: c.name, category: c.category, properties: c.properties }); break;
    case 'screen': client.send('screen', { ...m, name: c.name, properties: c.properties }); break;
    case 'group': client.send('group', { ...m, groupId: c.groupId, traits: c.traits }); break;
    case 'alias': client.send('alias', { ...m, previousId: c.previousId }); break;
    default: throw new Error(`unknown call ${c.type}`);
  }
}
try {
  await client.close();
} catch (e) {
  errors.push(String(e?.message ?? e));
}
writeFileSync(sentPath, JSON.stringify(sent));
if (errors.length) {
  console.error('SDK errors:', errors.join('; '));
  process.exit(1);
}
